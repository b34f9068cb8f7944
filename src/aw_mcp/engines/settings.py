"""The engine settings of ``aw-mcp serve``, one section per kind of engine (``aw_mcp.sections``).

An engine's options are its section plus the knobs that are not flags (``LlamaCppOptions`` in
``llama_cpp.py``); the registry (``registry.py``) picks the engine by ``engine``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from aw_mcp.models.requantize import QuantType
from aw_mcp.sections import ENGINE, OPENAI, TRANSFORMERS, Section, flag

EngineName = Literal["llama-cpp", "transformers", "openai"]
JsonMode = Literal["json_schema", "json_object", "off"]
DType = Literal["auto", "float32", "float16", "bfloat16"]
OnOff = Literal["on", "off"]


class ModelSettings(Section):
    """Which engine, which model, how large a context: every engine has these."""

    engine: EngineName = Field(
        default="llama-cpp",
        description="llama-cpp (GGUF on CPU or GPU), transformers (a Hugging Face model on "
        "CUDA or CPU) or openai (an OpenAI-compatible server: vLLM, SGLang, llama.cpp)",
        json_schema_extra=flag(ENGINE),
    )

    model: str | None = Field(
        default=None,
        description="the world model: a known model (qwen2.5-coder-0.5b, qwen2.5-coder-1.5b, "
        "smollm2-135m; fetched and sha256-verified, see 'aw-mcp models') or a GGUF file "
        "(default: qwen2.5-coder-0.5b with its bundled adapter)",
        json_schema_extra=flag(ENGINE, "NAME|PATH"),
    )

    n_ctx: int = Field(
        default=8192,
        ge=256,
        description="context window in tokens (all engines)",
        json_schema_extra=flag(ENGINE),
    )


class LocalSettings(Section):
    """What every engine that runs the model in this process has (llama.cpp, transformers)."""

    threads: int | None = Field(
        default=None,
        ge=1,
        description="CPU threads for local inference (default: all cores but one)",
        json_schema_extra=flag(ENGINE),
    )

    kv_snapshot_mb: int = Field(
        default=1024,
        ge=0,
        description="local engines: memory for idle episodes' KV snapshots, per model instance",
        json_schema_extra=flag(ENGINE, "MB"),
    )

    instances: int = Field(
        default=1,
        ge=1,
        le=64,
        description="local engines: copies of the model serving episodes side by side",
        json_schema_extra=flag(ENGINE),
    )

    batch_slots: int = Field(
        default=1,
        ge=1,
        le=256,
        description="llama.cpp: episodes decoded together in one step (1: one at a time)",
        json_schema_extra=flag(ENGINE),
    )

    speculative: OnOff = Field(
        default="on",
        description="speculative decoding with drafts from the episode's own context "
        "(prompt lookup), checked several tokens per model call: copying answers about "
        "1.5x faster on llama.cpp, a 30-call session 1.6x, free-form answers about as fast as off; "
        "greedy decoding (temperature 0) only; one episode at a time, answers are the same "
        "whatever is drafted, but on llama.cpp not always those of off, whose steps compute "
        "otherwise (docs/engines.md)",
        json_schema_extra=flag(ENGINE),
    )


class LlamaCppSettings(LocalSettings, ModelSettings):
    """The llama.cpp engine (the default): any GGUF, on the CPU or with GPU offload."""

    n_gpu_layers: int = Field(
        default=0,
        description="llama.cpp: layers to offload to the GPU (-1: all; needs a GPU build)",
        json_schema_extra=flag(ENGINE),
    )

    requantize: QuantType | None = Field(
        default=None,
        description="llama.cpp: serve a copy of the model re-quantized to this type, made "
        "once in ~/.cache/aw-mcp/models; q8_0 evaluates prompts ~1.8x and decodes ~1.2x faster "
        "than the small model's Q4_1 on x86 CPUs, for ~50 MB more memory",
        json_schema_extra=flag(ENGINE),
    )

    lora: list[Path] = Field(
        default_factory=list,
        description="a GGUF LoRA adapter applied to the model (llama-cpp engine; 'aw-mcp "
        "train' writes them); repeatable; given ones replace the bundled default adapter",
        json_schema_extra=flag(ENGINE, "FILE.gguf"),
    )

    no_lora: bool = Field(
        default=False,
        description="no LoRA adapter at all, not even the bundled one the served model gets "
        "by default for the domains it was trained on",
        json_schema_extra=flag(ENGINE),
    )


class TransformersSettings(LocalSettings, ModelSettings):
    """The transformers engine: a Hugging Face model on CUDA or the CPU."""

    hf_model: str | None = Field(
        default=None,
        description="Hugging Face model id or local folder (default: --model, or the "
        "default world model's GGUF)",
        json_schema_extra=flag(TRANSFORMERS, "ID|DIR"),
    )

    gguf_file: str | None = Field(
        default=None,
        description="load this GGUF file from --hf-model with transformers' GGUF loader",
        json_schema_extra=flag(TRANSFORMERS, "NAME"),
    )

    device: str = Field(
        default="auto",
        description="auto (CUDA when present, else CPU), cpu, cuda, cuda:1, ...",
        json_schema_extra=flag(TRANSFORMERS),
    )

    dtype: DType = Field(
        default="auto", description="weights' data type", json_schema_extra=flag(TRANSFORMERS)
    )

    device_map: str | None = Field(
        default=None,
        description='"auto" spreads a large model over all GPUs (accelerate)',
        json_schema_extra=flag(TRANSFORMERS),
    )

    trust_remote_code: bool = Field(
        default=False,
        description="allow model code from the model's repository",
        json_schema_extra=flag(TRANSFORMERS),
    )


class OpenAISettings(ModelSettings):
    """The OpenAI-compatible engine: a model behind vLLM, SGLang, llama.cpp's server, ..."""

    base_url: str = Field(
        default="http://127.0.0.1:8000/v1",
        description="the server's OpenAI-compatible API root",
        json_schema_extra=flag(OPENAI, "URL"),
    )

    model_name: str | None = Field(
        default=None,
        description="served model name (default: the first the server lists)",
        json_schema_extra=flag(OPENAI),
    )

    api_key_env: str = Field(
        default="AW_MCP_OPENAI_API_KEY",
        description="environment variable holding the API key (OPENAI_API_KEY if unset)",
        json_schema_extra=flag(OPENAI, "VAR"),
    )

    connect_timeout: float = Field(
        default=10.0,
        gt=0,
        description="seconds to connect",
        json_schema_extra=flag(OPENAI, "S"),
    )

    read_timeout: float = Field(
        default=300.0,
        gt=0,
        description="longest silence, in seconds, while an answer streams",
        json_schema_extra=flag(OPENAI, "S"),
    )

    request_timeout: float | None = Field(
        default=None,
        gt=0,
        description="limit in seconds on a whole call, retries included (default: none)",
        json_schema_extra=flag(OPENAI, "S"),
    )

    max_retries: int = Field(
        default=3, ge=0, description="retries of a failed request", json_schema_extra=flag(OPENAI)
    )

    concurrency: int = Field(
        default=64,
        ge=1,
        description="requests in flight to the server",
        json_schema_extra=flag(OPENAI),
    )

    reasoning_budget: int = Field(
        default=0,
        ge=0,
        description="tokens a reasoning model may think with, on top of each tool's "
        "observation budget (Qwen-AgentWorld: several thousand)",
        json_schema_extra=flag(OPENAI, "TOKENS"),
    )

    json_mode: JsonMode = Field(
        default="json_schema",
        description="how outputSchema constraints are sent to the server",
        json_schema_extra=flag(OPENAI),
    )
