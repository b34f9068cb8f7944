"""Assemble a running simulator from the serve settings: domains, engine, faults, episodes.

Each part gets its own section of the settings as it was set (``aw_mcp.sections``); what is
decided here is only what crosses parts: which adapters the engine applies, which prompt
profile they call for, how instances share the cores.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.domain.mirror import MIRROR_TEMPLATE_DOMAIN, mirror_domain
from aw_mcp.engines.base import Engine, default_inference_threads
from aw_mcp.engines.registry import ENGINES
from aw_mcp.engines.registry import make_engine as make_engine_of
from aw_mcp.episode.prompt import PROFILES
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.errors import UserInputError
from aw_mcp.faults.coverage import argument_gaps, served_tool_arguments
from aw_mcp.faults.layer import FaultLayer, NoFaults
from aw_mcp.faults.scenario import load_scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.models.adapters import (
    AdapterInfo,
    adapters_profile,
    default_adapters,
    read_adapter_info,
)
from aw_mcp.models.catalogue import model_file_name
from aw_mcp.records.sink import RecordSink
from aw_mcp.server.world_surface import offered_actions
from aw_mcp.simulation.replay import Recordings
from aw_mcp.simulation.simulator import SimulatorOptions, WorldSimulator
from aw_mcp.wiring.settings import ServeSettings

if TYPE_CHECKING:
    from aw_mcp.simulation.grounding import GroundingIndex

log = logging.getLogger(__name__)


def resolve_adapters(settings: ServeSettings, catalogue: Catalogue) -> list[AdapterInfo]:
    """The LoRA adapters to serve with: ``--lora`` files, else the bundled adapter when the
    default model serves only domains it was trained on; none with ``--no-lora``."""
    if settings.no_lora:
        return []
    if settings.lora:
        return [read_adapter_info(path) for path in settings.lora]
    if settings.engine != "llama-cpp":
        return []
    adapters = default_adapters(
        model_file_name(settings.model), [d.adapter_domain for d in catalogue.domains]
    )
    for adapter in adapters:
        log.info("using the bundled LoRA adapter %s (--no-lora to serve without)", adapter.path)
    return adapters


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


def make_engine(settings: ServeSettings, adapters: list[AdapterInfo] | None = None) -> Engine:
    """The configured engine with ``adapters`` applied (default: none beyond ``--lora``);
    local engines with ``instances > 1`` become an EnginePool."""
    lora = [a.path for a in adapters] if adapters is not None else settings.lora
    overrides = {"lora": lora} if settings.engine == "llama-cpp" else {}
    if settings.instances == 1:
        return make_engine_of(settings.engine, settings, **overrides)
    from aw_mcp.engines.pool import EnginePool

    # The instances share the cores: each gets its part of them.
    cores = settings.threads or default_inference_threads()
    threads = max(1, cores // settings.instances)
    return EnginePool(
        [
            make_engine_of(settings.engine, settings, threads=threads, **overrides)
            for _ in range(settings.instances)
        ],
        max_homes=settings.max_episodes,
    )


def make_faults(settings: ServeSettings, catalogue: Catalogue | None = None) -> FaultLayer:
    """The scenarios of ``--faults`` (bundled names or files); raises DataFileError on a bad one."""
    if not settings.faults:
        return NoFaults()
    layer = ScenarioFaultLayer([load_scenario(p) for p in settings.faults])
    log.info("fault scenarios: %s", ", ".join(s.name for s in layer.scenarios))
    if catalogue is not None:
        served = [(t.domain.name, t.public_name) for t in catalogue]
        served += offered_actions(catalogue)  # resources/read, prompts/get, completion/complete
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
        # The KV cache of a local engine lives here; a remote server keeps its own.
        options=SimulatorOptions.of(settings, warm_up_prompts=ENGINES[settings.engine].local),
        recordings=Recordings.load(settings.replay, settings.replay_miss)
        if settings.replay
        else None,
        grounding=_grounding(settings),
    )


def _grounding(settings: ServeSettings) -> GroundingIndex | None:
    if settings.grounding is None:
        return None
    _require_folder(settings.grounding, "--grounding")
    from aw_mcp.simulation.grounding import GroundingIndex

    return GroundingIndex.from_record_dir(settings.grounding, k=settings.grounding_k)


def _require_folder(path: Path, flag: str) -> Path:
    if not path.is_dir():
        problem = "it is a file" if path.exists() else "no such folder"
        raise UserInputError(f"{flag} {path}: {problem} (give a folder of call records)")
    return path
