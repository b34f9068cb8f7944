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
    profile: Literal["default", "small", "agentworld"] | None = Field(
        default=None,
        description="Prompt profile; None: the one the LoRA adapter was trained with, else "
        "default.",
    )

    # Transport
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765

    # Engine
    engine: Literal["llama-cpp", "transformers", "openai"] = "llama-cpp"
    model: Path | None = None  # GGUF path; None = the embedded SmolLM2-135M-Instruct
    n_ctx: int = Field(default=8192, ge=256)  # context window (all engines)
    threads: int | None = Field(default=None, ge=1)
    n_gpu_layers: int = 0
    kv_snapshot_mb: int = Field(default=1024, ge=0)  # per model instance
    instances: int = Field(default=1, ge=1, le=64)  # local engines: model copies in a pool
    lora: list[Path] = Field(
        default_factory=list,
        description="GGUF LoRA adapters applied to the model (llama-cpp engine; 'aw-mcp train' "
        "writes them). Given ones replace the bundled default adapter.",
    )
    no_lora: bool = Field(
        default=False,
        description="No LoRA adapter at all, not even the bundled one the embedded model gets "
        "by default for the domains it was trained on.",
    )

    # transformers engine (pip install 'aw-mcp[transformers]')
    hf_model: str | None = None  # HF model id or folder; None = --model or the embedded GGUF
    gguf_file: str | None = None  # a GGUF file inside --hf-model (transformers' GGUF loader)
    device: str = "auto"  # auto = CUDA when present, else CPU; or cpu, cuda, cuda:1
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    device_map: str | None = None  # "auto" spreads a large model over GPUs (accelerate)
    trust_remote_code: bool = False

    # OpenAI-compatible engine (vLLM, SGLang, llama.cpp server, ...)
    base_url: str = "http://127.0.0.1:8000/v1"
    model_name: str | None = None  # served model name; None = the first the server lists
    api_key_env: str = "AW_MCP_OPENAI_API_KEY"  # variable holding the key (or OPENAI_API_KEY)
    connect_timeout: float = Field(default=10.0, gt=0)
    read_timeout: float = Field(default=300.0, gt=0)  # longest silence within a stream
    request_timeout: float | None = Field(default=None, gt=0)  # whole call, retries included
    max_retries: int = Field(default=3, ge=0)
    concurrency: int = Field(default=64, ge=1)  # requests in flight to the server
    reasoning_budget: int = Field(default=0, ge=0)  # thinking tokens on top of each answer's
    json_mode: Literal["json_schema", "json_object", "off"] = "json_schema"

    # Episodes and records
    record_dir: Path | None = None
    grounding: Path | None = Field(
        default=None,
        description="Record dir of real episodes: for each call, the most similar recorded "
        "real transitions (BM25) are shown to the model as examples.",
    )
    grounding_k: int = Field(
        default=3, ge=1, le=20, description="Real transitions shown per call (--grounding)."
    )
    max_episodes: int = Field(default=10_000, ge=1)
    replay_read_only: bool = True
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
