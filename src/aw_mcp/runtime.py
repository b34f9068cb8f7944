"""Assemble a running simulator from settings: domains, engine, faults, episodes."""

from __future__ import annotations

from aw_mcp.catalogue import Catalogue
from aw_mcp.config import ServeSettings
from aw_mcp.domain.loader import load_domain, load_world
from aw_mcp.engines.base import Engine
from aw_mcp.episode.prompt import PROFILES
from aw_mcp.episode.store import EpisodeStore, RecordSink
from aw_mcp.faults.layer import FaultLayer, NoFaults
from aw_mcp.simulator import SimulatorSettings, WorldSimulator


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


def make_faults(settings: ServeSettings) -> FaultLayer:
    if not settings.faults:
        return NoFaults()
    raise ValueError("fault scenarios are not supported by this build")


def build_catalogue(settings: ServeSettings) -> Catalogue:
    """Load every domain and the user's world file; raises DataFileError on a bad file."""
    domains = [load_domain(name) for name in settings.simulator]
    world = load_world(settings.world) if settings.world else None
    return Catalogue(domains, extra_world=world)


def build_simulator(settings: ServeSettings, engine: Engine | None = None) -> WorldSimulator:
    sink = RecordSink(settings.record_dir) if settings.record_dir else None
    return WorldSimulator(
        catalogue=build_catalogue(settings),
        engine=engine or make_engine(settings),
        episodes=EpisodeStore(limit=settings.max_episodes, sink=sink),
        faults=make_faults(settings),
        profile=PROFILES[settings.profile](),
        settings=SimulatorSettings(replay_read_only=settings.replay_read_only),
    )
