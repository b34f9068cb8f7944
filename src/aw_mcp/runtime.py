"""Assemble a running simulator from settings: domains, engine, faults, episodes."""

from __future__ import annotations

import logging

from aw_mcp.catalogue import Catalogue
from aw_mcp.config import ServeSettings
from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.domain.mirror import mirror_domain
from aw_mcp.engines.base import Engine
from aw_mcp.episode.prompt import PROFILES
from aw_mcp.episode.store import EpisodeStore, RecordSink
from aw_mcp.faults.layer import FaultLayer, NoFaults
from aw_mcp.faults.scenario import load_scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.simulator import SimulatorSettings, WorldSimulator

log = logging.getLogger(__name__)


def make_engine(settings: ServeSettings) -> Engine:
    if settings.engine == "llama-cpp":
        from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions

        return LlamaCppEngine(
            LlamaCppOptions(
                model_path=settings.model,
                n_ctx=settings.n_ctx,
                n_threads=settings.threads,
                n_gpu_layers=settings.n_gpu_layers,
                snapshot_budget_bytes=settings.kv_snapshot_mb << 20,
            )
        )
    raise ValueError(f"unknown engine {settings.engine!r}")


def make_faults(settings: ServeSettings, catalogue: Catalogue | None = None) -> FaultLayer:
    """The scenarios of ``--faults`` (bundled names or files); raises DataFileError on a bad one."""
    if not settings.faults:
        return NoFaults()
    layer = ScenarioFaultLayer(
        [load_scenario(p) for p in settings.faults], max_episodes=settings.max_episodes
    )
    log.info("fault scenarios: %s", ", ".join(s.name for s in layer.scenarios))
    if catalogue is not None:
        served = [(t.domain.name, t.public_name) for t in catalogue]
        for rule in layer.rules_matching_no_tool(served):
            log.warning("fault rule %s matches no tool of this server: it will never fire", rule)
    return layer


def build_catalogue(settings: ServeSettings) -> Catalogue:
    """Load every domain and the user's world file; raises DataFileError on a bad file.

    ``--tools-from`` alone serves only the mirrored tools; with ``--simulator`` both.
    """
    names = settings.simulator
    if settings.tools_from and "simulator" not in settings.model_fields_set:
        names = []
    domains = [load_domain(name) for name in names]
    domains += [mirror_domain(path) for path in settings.tools_from]
    world = load_world(settings.world) if settings.world else None
    return Catalogue(domains, extra_world=world)


def build_simulator(settings: ServeSettings, engine: Engine | None = None) -> WorldSimulator:
    sink = RecordSink(settings.record_dir) if settings.record_dir else None
    catalogue = build_catalogue(settings)
    return WorldSimulator(
        catalogue=catalogue,
        engine=engine or make_engine(settings),
        episodes=EpisodeStore(limit=settings.max_episodes, sink=sink),
        faults=make_faults(settings, catalogue),
        profile=PROFILES[settings.profile](),
        settings=SimulatorSettings(replay_read_only=settings.replay_read_only),
    )
