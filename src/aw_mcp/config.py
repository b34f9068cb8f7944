"""Server configuration: command-line flags over ``AW_MCP_*`` environment variables over defaults.

Every field can be set as an environment variable (``AW_MCP_MODEL=/models/x.gguf``,
``AW_MCP_N_GPU_LAYERS=-1``); list fields take JSON (``AW_MCP_SIMULATOR='["web","search"]'``).
``aw-mcp serve --help`` lists the flags.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AW_MCP_", extra="ignore")

    # What to simulate
    simulator: list[str] = Field(default_factory=lambda: ["terminal"])
    tools_from: list[Path] = Field(default_factory=list)  # captured tools/list files to mirror
    world: Path | None = None
    faults: list[Path] = Field(default_factory=list)
    profile: Literal["default", "agentworld"] = "default"

    # Transport
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765

    # Engine
    engine: Literal["llama-cpp"] = "llama-cpp"
    model: Path | None = None  # GGUF path; None = the embedded SmolLM2-135M-Instruct
    n_ctx: int = Field(default=8192, ge=256)
    threads: int | None = Field(default=None, ge=1)
    n_gpu_layers: int = 0
    kv_snapshot_mb: int = Field(default=1024, ge=0)

    # Episodes and records
    record_dir: Path | None = None
    max_episodes: int = Field(default=10_000, ge=1)
    replay_read_only: bool = True
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
