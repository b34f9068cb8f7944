"""Small builders shared by tests."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.base import Engine
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.generation.sandbox import SandboxUnavailable, ensure_user
from aw_mcp.records.sink import RecordSink
from aw_mcp.server.app import build_server
from aw_mcp.simulation.simulator import SimulatorOptions, WorldSimulator

TINY_DOMAIN = Path(__file__).parent / "data" / "tiny_domain.yaml"


def make_simulator(
    engine: Engine, domain: str | Path = TINY_DOMAIN, record_dir: Path | None = None, **settings
) -> WorldSimulator:
    return WorldSimulator(
        Catalogue([load_domain(str(domain))]),
        engine,
        episodes=EpisodeStore(sink=RecordSink(record_dir) if record_dir else None),
        options=SimulatorOptions(**settings),
    )


def make_server(engine: Engine, domain: str | Path = TINY_DOMAIN, **settings):
    simulator = make_simulator(engine, domain, **settings)
    return simulator, build_server(simulator)


def default_server(*args: str) -> StdioServerParameters:
    """Plain `aw-mcp serve` as a new user starts it: no model chosen (conftest's plumbing
    model taken out of the environment)."""
    env = {k: v for k, v in os.environ.items() if k != "AW_MCP_MODEL"}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "aw_mcp", "serve", "--threads", "1", *args],
        env={**env, "AW_MCP_LOG_LEVEL": "WARNING"},
    )


def text_of(result) -> str:
    return result.content[0].text


def _sandbox_unavailable() -> str:
    """Why this machine cannot run the real-bash sandbox ('' when it can). strace is part of
    it: the generator records what each command reads by default."""
    try:
        ensure_user()
    except SandboxUnavailable as exc:
        return str(exc)
    return "" if shutil.which("strace") else "strace is not installed"


def needs_sandbox(test: Callable[..., Any]) -> Callable[..., Any]:
    """A test of the sandbox tier: it runs real bash in a sandbox (root and unshare), and is
    skipped, saying why, where there is none."""
    missing = _sandbox_unavailable()
    return pytest.mark.sandbox(pytest.mark.skipif(bool(missing), reason=missing)(test))
