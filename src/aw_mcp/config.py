"""Server configuration, defined once: each field here IS a setting.

A field's name gives the command-line flag (``n_ctx`` -> ``--n-ctx``) and the environment
variable (``AW_MCP_N_CTX``); its ``description`` is the flag's help; its type gives the flag's
kind (choices, repeatable, on/off). ``aw-mcp serve --help`` is generated from this class
(``aw_mcp.settings_cli``), and a test checks that README's settings table agrees with it.
Precedence: command-line flags over ``AW_MCP_*`` variables over the defaults below. List
fields take JSON in the environment (``AW_MCP_SIMULATOR='["web","search"]'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic.config import JsonDict
from pydantic_settings import BaseSettings, SettingsConfigDict

from aw_mcp.engines.requantize import QuantType

# The --help sections fields are listed in.
WHAT = "what to simulate"
TRANSPORT = "transport"
ENGINE = "engine"
TRANSFORMERS = "transformers engine (pip install 'aw-mcp[transformers]')"
OPENAI = "OpenAI-compatible engine (vLLM, SGLang, llama.cpp server, ...)"
EPISODES = "episodes and records"

DEFAULT_MAX_ARGUMENT_BYTES = 256 * 1024


def flag(group: str, metavar: str | None = None) -> JsonDict:
    """How a field shows as a flag: its --help section and, optionally, its metavar."""
    return {"group": group, "metavar": metavar} if metavar else {"group": group}


class ServeSettings(BaseSettings):
    """Everything ``aw-mcp serve`` can be told."""

    model_config = SettingsConfigDict(env_prefix="AW_MCP_", extra="ignore")

    # What to simulate
    simulator: list[str] = Field(
        default_factory=lambda: ["terminal"],
        description="a bundled domain (terminal, search, swe, web, android, os, mcp) or a "
        "domain YAML file; repeatable",
        json_schema_extra=flag(WHAT, "NAME|FILE"),
    )
    tools_from: list[Path] = Field(
        default_factory=list,
        description="serve the tools of a captured tools/list (see 'aw-mcp capture'), "
        "simulated; repeatable; without --simulator only these tools are served",
        json_schema_extra=flag(WHAT, "FILE.json"),
    )
    world: Path | None = Field(
        default=None,
        description="extra world facts (same shape as a domain's world: block)",
        json_schema_extra=flag(WHAT, "FILE.yaml"),
    )
    faults: list[Path] = Field(
        default_factory=list,
        description="a bundled fault scenario (see 'aw-mcp faults list') or a scenario YAML "
        "file; repeatable",
        json_schema_extra=flag(WHAT, "NAME|FILE"),
    )
    profile: Literal["default", "small", "agentworld"] | None = Field(
        default=None,
        description="prompt format: default; small (short, for small trained models); or "
        "agentworld (the format Qwen-AgentWorld was trained on); unset: the profile the LoRA "
        "adapter was trained with, else default",
        json_schema_extra=flag(WHAT),
    )

    # Transport
    transport: Literal["stdio", "http"] = Field(
        default="stdio", description="stdio, or Streamable HTTP", json_schema_extra=flag(TRANSPORT)
    )
    host: str = Field(
        default="127.0.0.1", description="HTTP bind address", json_schema_extra=flag(TRANSPORT)
    )
    port: int = Field(
        default=8765,
        ge=0,
        le=65535,
        description="HTTP port (0: any free port)",
        json_schema_extra=flag(TRANSPORT),
    )
    allowed_host: list[str] = Field(
        default_factory=list,
        description="HTTP: a Host header value clients may send ('name:*' for any port; "
        "'*' turns the DNS-rebinding check off); repeatable; needed off loopback (default: "
        "the loopback names and the bind address)",
        json_schema_extra=flag(TRANSPORT, "HOST[:PORT|:*]"),
    )
    allowed_origin: list[str] = Field(
        default_factory=list,
        description="HTTP: an Origin header value browsers may send; repeatable (default: "
        "http:// and https:// of each allowed host)",
        json_schema_extra=flag(TRANSPORT, "URL"),
    )
    auth_token: SecretStr | None = Field(
        default=None,
        description="HTTP: require 'Authorization: Bearer TOKEN' on every request (prefer the "
        "environment variable: a flag shows in the process list)",
        json_schema_extra=flag(TRANSPORT, "TOKEN"),
    )
    request_state_key: SecretStr | None = Field(
        default=None,
        min_length=32,
        description="the secret (32+ characters) that seals the requestState of 2026-07-28 "
        "input_required results, for replicas that resume each other's calls (default: a "
        "key of this process; prefer the environment variable)",
        json_schema_extra=flag(TRANSPORT, "KEY"),
    )
    session_idle_timeout: float = Field(
        default=1800.0,
        gt=0,
        description="HTTP: seconds a handshake session may stay idle before it is closed",
        json_schema_extra=flag(TRANSPORT, "S"),
    )
    max_sessions: int = Field(
        default=1000,
        ge=1,
        description="HTTP: open handshake sessions at most; past this the least recently "
        "used idle session is closed for a new client",
        json_schema_extra=flag(TRANSPORT),
    )

    max_argument_bytes: int = Field(
        default=DEFAULT_MAX_ARGUMENT_BYTES,
        ge=1024,
        description="a tool call's arguments, as compact JSON, may take this many bytes at "
        "most; a larger call is refused at once with an isError (before the world model "
        "would spend seconds tokenizing it)",
        json_schema_extra=flag(TRANSPORT, "BYTES"),
    )
    ui: bool = Field(
        default=False,
        description="HTTP: a read-only page at /ui with the live episodes' timelines (same "
        "Host/Origin checks and bearer token as /mcp)",
        json_schema_extra=flag(TRANSPORT),
    )

    # Engine
    engine: Literal["llama-cpp", "transformers", "openai"] = Field(
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
    threads: int | None = Field(
        default=None,
        ge=1,
        description="CPU threads for local inference (default: all cores but one)",
        json_schema_extra=flag(ENGINE),
    )
    n_gpu_layers: int = Field(
        default=0,
        description="llama.cpp: layers to offload to the GPU (-1: all; needs a GPU build)",
        json_schema_extra=flag(ENGINE),
    )
    batch_slots: int = Field(
        default=1,
        ge=1,
        le=256,
        description="llama.cpp: episodes decoded together in one step (1: one at a time)",
        json_schema_extra=flag(ENGINE),
    )
    requantize: QuantType | None = Field(
        default=None,
        description="llama.cpp: serve a copy of the model re-quantized to this type, made "
        "once in ~/.cache/aw-mcp/models; q8_0 evaluates prompts ~1.8x and decodes ~1.2x faster "
        "than the embedded Q4_1 on x86 CPUs, for ~50 MB more memory",
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
    lora: list[Path] = Field(
        default_factory=list,
        description="a GGUF LoRA adapter applied to the model (llama-cpp engine; 'aw-mcp "
        "train' writes them); repeatable; given ones replace the bundled default adapter",
        json_schema_extra=flag(ENGINE, "FILE.gguf"),
    )
    no_lora: bool = Field(
        default=False,
        description="no LoRA adapter at all, not even the bundled one the embedded model gets "
        "by default for the domains it was trained on",
        json_schema_extra=flag(ENGINE),
    )

    # transformers engine
    hf_model: str | None = Field(
        default=None,
        description="Hugging Face model id or local folder (default: --model, or the "
        "embedded GGUF)",
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
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
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

    # OpenAI-compatible engine
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
    json_mode: Literal["json_schema", "json_object", "off"] = Field(
        default="json_schema",
        description="how outputSchema constraints are sent to the server",
        json_schema_extra=flag(OPENAI),
    )

    # Episodes and records
    record_dir: Path | None = Field(
        default=None,
        description="append every call to a JSONL record per episode in this folder",
        json_schema_extra=flag(EPISODES, "DIR"),
    )
    max_episodes: int = Field(
        default=10_000,
        ge=1,
        description="live episodes kept; the least recently used end past this",
        json_schema_extra=flag(EPISODES),
    )
    replay_read_only: bool = Field(
        default=True,
        description="repeat a read-only call's observation when nothing changed since "
        "(--no-replay-read-only: always ask the model)",
        json_schema_extra=flag(EPISODES),
    )
    sampling_seed: int = Field(
        default=0,
        description="base seed of the world model's sampling; each request's seed is derived "
        "from it, the episode id, the call index and the attempt, so the same seed replays "
        "the same episodes and episodes sending the same prompt still sample differently",
        json_schema_extra=flag(EPISODES),
    )
    retry_temperature: float = Field(
        default=0.7,
        ge=0.0,
        le=2.0,
        description="temperature of the retries of an answer that broke its tool's "
        "outputSchema (the first attempt uses the domain's temperature)",
        json_schema_extra=flag(EPISODES),
    )
    replay: Path | None = Field(
        default=None,
        description="a record directory (--record-dir output, real trajectories): calls that "
        "follow a recorded episode's calls get its recorded observations",
        json_schema_extra=flag(EPISODES, "DIR"),
    )
    replay_miss: Literal["model", "error"] = Field(
        default="model",
        description="with --replay, a call no recording matches: 'model' lets the world model "
        "answer it and the rest of the episode; 'error' returns an isError naming the mismatch",
        json_schema_extra=flag(EPISODES),
    )
    grounding: Path | None = Field(
        default=None,
        description="a record dir of real episodes: for each call, the most similar recorded "
        "real transitions (BM25) are shown to the model as examples",
        json_schema_extra=flag(ENGINE, "DIR"),
    )
    grounding_k: int = Field(
        default=3,
        ge=1,
        le=20,
        description="real transitions shown per call (--grounding)",
        json_schema_extra=flag(ENGINE),
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="logging to stderr", json_schema_extra=flag(EPISODES)
    )
