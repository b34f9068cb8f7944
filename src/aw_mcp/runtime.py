"""Assemble a running simulator from settings: domains, engine, faults, episodes."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from aw_mcp.adapters import AdapterInfo, adapters_profile, default_adapters, read_adapter_info
from aw_mcp.catalogue import Catalogue
from aw_mcp.config import ServeSettings
from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.domain.mirror import MIRROR_TEMPLATE_DOMAIN, mirror_domain
from aw_mcp.engines.base import Engine, default_inference_threads
from aw_mcp.episode.prompt import PROFILES
from aw_mcp.episode.store import EpisodeStore, RecordSink
from aw_mcp.faults.coverage import argument_gaps, served_tool_arguments
from aw_mcp.faults.layer import FaultLayer, NoFaults
from aw_mcp.faults.scenario import load_scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.models import DEFAULT_MODEL, KNOWN_MODELS
from aw_mcp.simulation.sampling import SamplingSettings
from aw_mcp.simulator import SimulatorSettings, WorldSimulator
from aw_mcp.trajectories.replay import Recordings

if TYPE_CHECKING:
    from aw_mcp.grounding import GroundingIndex

log = logging.getLogger(__name__)


def resolve_adapters(settings: ServeSettings, catalogue: Catalogue) -> list[AdapterInfo]:
    """The LoRA adapters to serve with: ``--lora`` files, else the bundled adapter when the
    embedded model serves only domains it was trained on; none with ``--no-lora``."""
    if settings.no_lora:
        if settings.lora:
            raise ValueError("--lora and --no-lora contradict each other")
        return []
    if settings.lora:
        if settings.engine != "llama-cpp":
            raise ValueError("--lora adapters are applied by the llama-cpp engine only")
        return [read_adapter_info(path) for path in settings.lora]
    if settings.engine != "llama-cpp":
        return []
    adapters = default_adapters(
        served_model_file_name(settings), [d.adapter_domain for d in catalogue.domains]
    )
    for adapter in adapters:
        log.info("using the bundled LoRA adapter %s (--no-lora to serve without)", adapter.path)
    return adapters


def served_model(settings: ServeSettings) -> str:
    """``--model`` as given, else the default world model (a catalogue name)."""
    return settings.model or DEFAULT_MODEL


def served_model_file_name(settings: ServeSettings) -> str:
    """The file name of the served GGUF, known before the file is fetched: bundled adapters
    are chosen by it (an adapter records the file name of the base it was trained on)."""
    name = served_model(settings)
    known = KNOWN_MODELS.get(name)
    return known.file_name if known else Path(name).name


def serving_profile(settings: ServeSettings, adapters: list[AdapterInfo]) -> str:
    """``--profile``, else the profile the adapters were trained with, else default."""
    trained = adapters_profile(adapters)
    if settings.profile and trained and settings.profile != trained:
        log.warning(
            "--profile %s, but the LoRA adapter was trained with the %s profile: expect worse "
            "answers",
            settings.profile,
            trained,
        )
    return settings.profile or trained or "default"


def make_engine(settings: ServeSettings, adapters: Sequence[AdapterInfo] = ()) -> Engine:
    """The configured engine; local engines with ``instances > 1`` become an EnginePool."""
    if settings.requantize and settings.engine != "llama-cpp":
        raise ValueError("--requantize converts GGUF files for the llama-cpp engine only")
    if settings.engine == "openai":
        if settings.instances > 1:
            raise ValueError(
                "--instances is for local engines; an OpenAI-compatible server batches "
                "concurrent requests itself (raise --concurrency instead)"
            )
        return _openai_engine(settings)
    if settings.instances == 1:
        return _local_engine(settings, settings.threads, adapters)
    from aw_mcp.engines.pool import EnginePool

    # The instances share the cores: each gets its part of them.
    cores = settings.threads or default_inference_threads()
    threads = max(1, cores // settings.instances)
    return EnginePool(
        [_local_engine(settings, threads, adapters) for _ in range(settings.instances)],
        max_homes=settings.max_episodes,
    )


def _local_engine(
    settings: ServeSettings, threads: int | None, adapters: Sequence[AdapterInfo] = ()
) -> Engine:
    if settings.engine == "llama-cpp":
        from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions

        return LlamaCppEngine(
            LlamaCppOptions(
                model_path=served_model(settings),
                n_ctx=settings.n_ctx,
                n_threads=threads,
                n_gpu_layers=settings.n_gpu_layers,
                batch_slots=settings.batch_slots,
                requantize=settings.requantize,
                snapshot_budget_bytes=settings.kv_snapshot_mb << 20,
                lora_paths=[a.path for a in adapters],
            )
        )
    if settings.engine == "transformers":
        from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

        return TransformersEngine(
            TransformersOptions(
                model=settings.hf_model or settings.model,
                gguf_file=settings.gguf_file,
                device=settings.device,
                dtype=settings.dtype,
                device_map=settings.device_map,
                n_ctx=settings.n_ctx,
                n_threads=threads,
                snapshot_budget_bytes=settings.kv_snapshot_mb << 20,
                trust_remote_code=settings.trust_remote_code,
            )
        )
    raise ValueError(f"unknown engine {settings.engine!r}")


def _openai_engine(settings: ServeSettings) -> Engine:
    from aw_mcp.engines.openai_compat import OpenAICompatEngine, OpenAICompatOptions

    return OpenAICompatEngine(
        OpenAICompatOptions(
            base_url=settings.base_url,
            model=settings.model_name,
            api_key_env=settings.api_key_env,
            context_window=settings.n_ctx,
            connect_timeout_s=settings.connect_timeout,
            read_timeout_s=settings.read_timeout,
            total_timeout_s=settings.request_timeout,
            max_retries=settings.max_retries,
            concurrency=settings.concurrency,
            reasoning_budget=settings.reasoning_budget,
            json_mode=settings.json_mode,
        )
    )


def make_faults(settings: ServeSettings, catalogue: Catalogue | None = None) -> FaultLayer:
    """The scenarios of ``--faults`` (bundled names or files); raises DataFileError on a bad one."""
    if not settings.faults:
        return NoFaults()
    layer = ScenarioFaultLayer([load_scenario(p) for p in settings.faults])
    log.info("fault scenarios: %s", ", ".join(s.name for s in layer.scenarios))
    if catalogue is not None:
        served = [(t.domain.name, t.public_name) for t in catalogue]
        for rule in layer.rules_matching_no_tool(served):
            log.warning("fault rule %s matches no tool of this server: it will never fire", rule)
        for gap in argument_gaps(layer.scenarios, served_tool_arguments(catalogue)):
            log.warning("fault rule %s", gap)
    return layer


def build_catalogue(settings: ServeSettings) -> Catalogue:
    """Load every domain and the user's world file; raises DataFileError on a bad file.

    ``--tools-from`` alone serves only the mirrored tools; with ``--simulator`` both.
    """
    names = settings.simulator
    if settings.tools_from and "simulator" not in settings.model_fields_set:
        names = []
    domains = [load_domain(name) for name in names]
    if settings.tools_from:
        template = load_domain(MIRROR_TEMPLATE_DOMAIN)  # read once for every capture file
        domains += [mirror_domain(path, template) for path in settings.tools_from]
    world = load_world(settings.world) if settings.world else None
    return Catalogue(domains, extra_world=world)


def build_simulator(settings: ServeSettings, engine: Engine | None = None) -> WorldSimulator:
    """The simulator the settings describe; a given ``engine`` is used as is (no adapters)."""
    sink = RecordSink(settings.record_dir) if settings.record_dir else None
    catalogue = build_catalogue(settings)
    adapters = resolve_adapters(settings, catalogue) if engine is None else []
    return WorldSimulator(
        catalogue=catalogue,
        engine=engine or make_engine(settings, adapters),
        episodes=EpisodeStore(limit=settings.max_episodes, sink=sink),
        faults=make_faults(settings, catalogue),
        profile=PROFILES[serving_profile(settings, adapters)](),
        settings=SimulatorSettings(
            replay_read_only=settings.replay_read_only,
            # The KV cache of a local engine lives here; a remote server keeps its own.
            warm_up_prompts=settings.engine != "openai",
            sampling=SamplingSettings(
                sampling_seed=settings.sampling_seed,
                retry_temperature=settings.retry_temperature,
            ),
        ),
        recordings=Recordings.load(settings.replay, settings.replay_miss)
        if settings.replay
        else None,
        grounding=_grounding(settings),
    )


def _grounding(settings: ServeSettings) -> GroundingIndex | None:
    if settings.grounding is None:
        return None
    _require_folder(settings.grounding, "--grounding")
    from aw_mcp.grounding import GroundingIndex

    return GroundingIndex.from_record_dir(settings.grounding, k=settings.grounding_k)


def _require_folder(path: Path, flag: str) -> Path:
    if not path.is_dir():
        problem = "it is a file" if path.exists() else "no such folder"
        raise ValueError(f"{flag} {path}: {problem} (give a folder of call records)")
    return path
