"""Everything ``aw-mcp serve`` can be told, defined once: each field IS a setting.

``ServeSettings`` is the union of the sections the parts define (``aw_mcp.sections``): the
server's (``server.settings``), each engine's (``engines.settings``), the simulation's
(``simulation.settings``), and the few below that only the wiring reads. A field's name gives
the command-line flag (``n_ctx`` -> ``--n-ctx``) and the environment variable
(``AW_MCP_N_CTX``); its ``description`` is the flag's help; its type gives the flag's kind
(choices, repeatable, on/off). ``aw-mcp serve --help`` is generated from this class
(``aw_mcp.commands.flags``), and a test checks that README's settings table agrees with it.
Precedence: command-line flags over ``AW_MCP_*`` variables over the defaults. List fields take
JSON in the environment (``AW_MCP_SIMULATOR='["web","search"]'``).

Rules between fields (``--lora`` with ``--no-lora``, ``--instances`` with an OpenAI-compatible
server, ...) are validators here, so a contradiction is refused with the settings, before
anything is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from aw_mcp.engines.settings import LlamaCppSettings, OpenAISettings, TransformersSettings
from aw_mcp.episode.prompt import ProfileName
from aw_mcp.sections import EPISODES, WHAT, Section, flag
from aw_mcp.server.settings import ServerSettings
from aw_mcp.simulation.settings import SimulationSettings


class WorldChoice(Section):
    """What to simulate: the domains, the world, the faults, the prompt format."""

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

    profile: ProfileName | None = Field(
        default=None,
        description="prompt format: default; small (short, for small trained models); or "
        "agentworld (the format Qwen-AgentWorld was trained on); unset: the profile the LoRA "
        "adapter was trained with, else default",
        json_schema_extra=flag(WHAT),
    )


class AssemblySettings(Section):
    """What only the wiring reads: episodes kept, records, logs."""

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

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="logging to stderr", json_schema_extra=flag(EPISODES)
    )


# The sections' fields, in --help and README they are ordered by group (``sections.GROUPS``).
class ServeSettings(
    BaseSettings,
    AssemblySettings,
    SimulationSettings,
    OpenAISettings,
    TransformersSettings,
    LlamaCppSettings,
    ServerSettings,
    WorldChoice,
):
    """Everything ``aw-mcp serve`` can be told."""

    model_config = SettingsConfigDict(env_prefix="AW_MCP_", extra="ignore")

    @model_validator(mode="after")
    def _consistent(self) -> ServeSettings:
        if self.lora and self.no_lora:
            raise ValueError("--lora and --no-lora contradict each other")
        if self.engine != "llama-cpp":
            if self.lora:
                raise ValueError("--lora adapters are applied by the llama-cpp engine only")
            if self.requantize:
                raise ValueError("--requantize converts GGUF files for the llama-cpp engine only")
        if self.episode and not self.record_dir:
            raise ValueError(
                "--episode keeps an episode across server processes through its records: "
                "give --record-dir DIR too"
            )
        if self.engine == "openai" and self.instances > 1:
            raise ValueError(
                "--instances is for local engines; an OpenAI-compatible server batches "
                "concurrent requests itself (raise --concurrency instead)"
            )
        return self
