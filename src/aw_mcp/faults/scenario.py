"""Pydantic models of a fault scenario file (``faults/*.yaml``) and how such files are found.

A scenario is a seed and an ordered list of rules. Each rule says which calls it looks at
(``match``: tool glob, argument conditions), on which of those calls it may fire (``when``:
n-th, every k-th, after n, a window), how likely it fires (``probability``), how often at most
(``max_fires``, per episode), and what happens when it does (``effects``).

Counting: occurrences count the calls of one episode (one episode id in one domain) that pass
the rule's ``match`` filter, from 1 (``count: matching``, the default: "the 3rd search call"),
or every call of the episode by its index (``count: all``: "from the 10th call on").

Effects come in four families:
- outcome effects replace the world model's answer: ``error`` (an ``isError`` result),
  ``result`` (canned content blocks), ``jsonrpc_error``, ``hang``;
- output effects damage the world model's answer: ``truncate``, ``empty``, ``corrupt``,
  ``schema_drift``;
- ``mislead`` asks the world model itself for a plausible but wrong answer (a stale value, a
  row left out, a count off by one, a success for a write that did not happen);
- additive effects: ``latency`` and ``world`` (a condition the world model must respect).
A rule has at most one outcome effect and never both an outcome and an output or mislead
effect. On one
call, only the first rule (file order, then ``--faults`` order) with an outcome or output effect
fires; later such rules wait for another call. Additive rules always combine.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from aw_mcp.domain.answers import CONTENT_BLOCK
from aw_mcp.files.bundled import bundled_names, resolve_data_file
from aw_mcp.files.yaml import load_yaml_file

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- which calls a rule looks at ----------------------------------------------------------


class ArgumentCondition(_Strict):
    """One test on one argument; exactly one of ``equals``, ``regex``, ``present``."""

    equals: Any | None = Field(default=None, description="The argument equals this value.")
    regex: str | None = Field(
        default=None,
        description="The argument (as text; JSON for non-strings) contains a match (re.search).",
    )
    present: bool | None = Field(
        default=None, description="true: the argument is given; false: it is absent."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> ArgumentCondition:
        given = [k for k in ("equals", "regex", "present") if k in self.model_fields_set]
        if len(given) != 1:
            raise ValueError("give exactly one of equals, regex, present")
        return self

    @field_validator("regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from None
        return pattern


class Match(_Strict):
    tool: str | list[str] = Field(
        default="*",
        description="Tool name(s) as served (glob patterns allowed: 'search*', '*_file').",
    )
    domain: str = Field(default="*", description="Domain name (glob).")
    arguments: dict[str, ArgumentCondition] = Field(
        default_factory=dict, description="Conditions on top-level arguments; all must hold."
    )

    def covers_tool(self, domain: str, tool: str) -> bool:
        """Whether the domain and tool filters admit this tool (arguments aside)."""
        patterns = [self.tool] if isinstance(self.tool, str) else self.tool
        return fnmatch.fnmatchcase(domain, self.domain) and any(
            fnmatch.fnmatchcase(tool, p) for p in patterns
        )


class When(_Strict):
    """On which counted calls a rule may fire; every condition given must hold."""

    nth: int | list[int] | None = Field(
        default=None, description="Only the n-th counted call (or any of a list)."
    )
    every: int | None = Field(default=None, ge=1, description="Every k-th counted call.")
    after: int | None = Field(default=None, ge=0, description="Counted calls after the n-th.")
    window: tuple[int, int] | None = Field(
        default=None, description="Counted calls from..to, both included: [3, 8]."
    )
    count: Literal["matching", "all"] = Field(
        default="matching",
        description="matching: count the episode's calls that pass the rule's match filter; "
        "all: use the call's index in the episode (every call it recorded, refused ones too).",
    )

    @field_validator("nth")
    @classmethod
    def _positive(cls, nth: int | list[int] | None) -> int | list[int] | None:
        values = [nth] if isinstance(nth, int) else (nth or [])
        if any(n < 1 for n in values):
            raise ValueError("calls are counted from 1")
        return nth

    @field_validator("window")
    @classmethod
    def _ordered(cls, window: tuple[int, int] | None) -> tuple[int, int] | None:
        if window is not None and not 1 <= window[0] <= window[1]:
            raise ValueError("a window is [from, to] with 1 <= from <= to")
        return window

    def admits(self, n: int) -> bool:
        if self.nth is not None and n not in (
            [self.nth] if isinstance(self.nth, int) else self.nth
        ):
            return False
        if self.every is not None and n % self.every:
            return False
        if self.after is not None and n <= self.after:
            return False
        return self.window is None or self.window[0] <= n <= self.window[1]


# --- what happens when a rule fires ---------------------------------------------------------

ErrorPreset = Literal[
    "http_400",
    "http_401",
    "http_403",
    "http_404",
    "http_409",
    "http_422",
    "http_429",
    "http_500",
    "http_502",
    "http_503",
    "http_504",
    "validation_error",
    "timeout",
    "connection_reset",
]


class ErrorEffect(_Strict):
    """An ``isError`` tool result, as a real server relaying a failure would return it."""

    kind: Literal["error"]
    preset: ErrorPreset | None = Field(
        default=None, description="A realistic error body (HTTP status pages, API errors...)."
    )
    text: str | None = Field(
        default=None,
        description="The error text; overrides the preset's. Placeholders: {tool}, "
        "{retry_after}, {field} (first argument's name), {args.NAME} (an argument's value).",
    )
    retry_after: int | None = Field(
        default=None, ge=0, description="Seconds in Retry-After (http_429, http_503)."
    )

    @model_validator(mode="after")
    def _has_text(self) -> ErrorEffect:
        if self.preset is None and self.text is None:
            raise ValueError("give a preset or a text")
        return self


class ResultEffect(_Strict):
    """A canned result instead of the world model's answer, in MCP content blocks.

    For fixtures and replays (a conformance suite's test tools, an image a real server would
    return); blocks are MCP ``ContentBlock`` objects: ``{type: text, text}``, ``{type: image,
    data, mimeType}``, ``{type: audio, ...}``, ``{type: resource, resource: {uri, ...}}``.
    """

    kind: Literal["result"]
    content: list[dict[str, Any]] = Field(min_length=1, description="MCP content blocks.")
    is_error: bool = Field(default=False, description="Answer as a failed call (isError).")

    @field_validator("content")
    @classmethod
    def _content_blocks(cls, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for position, block in enumerate(content):
            try:
                CONTENT_BLOCK.validate_python(block, by_name=False)
            except ValidationError as exc:
                raise ValueError(f"content[{position}]: {_content_block_problem(exc)}") from None
        return content

    def summary(self) -> str:
        """The result as text, for records and the episode's history."""
        parts = []
        for block in self.content:
            if block["type"] == "text":
                parts.append(block["text"])
            elif block["type"] == "resource":
                parts.append(f"[resource {block['resource'].get('uri', '')}]")
            else:
                parts.append(f"[{block['type']} {block.get('mimeType', '')}]".replace(" ]", "]"))
        return "\n".join(parts)


def _content_block_problem(error: ValidationError) -> str:
    """What is wrong with a block, in the terms of the block type it names."""
    problems = error.errors(include_url=False)
    wrong_type = {p["loc"][0] for p in problems if p["loc"][1:] == ("type",)}
    for p in problems:
        if p["loc"][0] not in wrong_type:  # the branch whose type the block names
            return f"{'.'.join(map(str, p['loc'][1:]))}: {p['msg']}"
    return "type must be one of text, image, audio, resource_link, resource"


class JsonRpcErrorEffect(_Strict):
    """The request fails with a JSON-RPC error instead of a result."""

    kind: Literal["jsonrpc_error"]
    code: int = Field(description="e.g. -32603 internal error, -32000..-32099 server errors.")
    message: str = Field(min_length=1)
    data: Any | None = None


class LatencyEffect(_Strict):
    """Added delay before the answer: fixed, or drawn (seeded) from a distribution."""

    kind: Literal["latency"]
    distribution: Literal["fixed", "uniform", "normal", "exponential"] = "fixed"
    seconds: float | None = Field(default=None, ge=0, description="fixed: the delay.")
    low: float | None = Field(default=None, ge=0, description="uniform: lower bound.")
    high: float | None = Field(default=None, ge=0, description="uniform: upper bound.")
    mean: float | None = Field(default=None, ge=0, description="normal, exponential: mean.")
    stddev: float | None = Field(default=None, ge=0, description="normal: standard deviation.")
    max_seconds: float = Field(default=120.0, gt=0, description="No draw goes above this.")

    @model_validator(mode="after")
    def _parameters_given(self) -> LatencyEffect:
        needed = {
            "fixed": ("seconds",),
            "uniform": ("low", "high"),
            "normal": ("mean", "stddev"),
            "exponential": ("mean",),
        }[self.distribution]
        missing = [name for name in needed if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a {self.distribution} latency needs {', '.join(missing)}")
        if self.distribution == "uniform" and self.low > self.high:  # type: ignore[operator]
            raise ValueError("low must not exceed high")
        return self


class HangEffect(_Strict):
    """No answer: the call hangs until the client gives up (its timeout cancels the call)."""

    kind: Literal["hang"]
    seconds: float | None = Field(
        default=None,
        gt=0,
        description="Give up after this long with a 504 Gateway Timeout result, for clients "
        "without a timeout (an endless hang holds the episode's later calls too). "
        "Unset: hang until cancelled.",
    )


class TruncateEffect(_Strict):
    """The answer stops early, as a cut-off response body would."""

    kind: Literal["truncate"]
    keep: float = Field(default=0.5, gt=0, lt=1, description="Fraction kept.")
    marker: str | None = Field(
        default=None, description="Appended to truncated text, e.g. '... [output truncated]'."
    )


class EmptyEffect(_Strict):
    """The answer comes back empty (structured answers: empty strings and lists)."""

    kind: Literal["empty"]


class CorruptEffect(_Strict):
    """Characters of the answer are garbled (seeded): malformed JSON, mojibake."""

    kind: Literal["corrupt"]
    rate: float = Field(default=0.05, gt=0, le=1, description="Fraction of characters garbled.")


class SchemaDriftEffect(_Strict):
    """Fields of the answer are renamed or missing, as after an unannounced API change."""

    kind: Literal["schema_drift"]
    rename: dict[str, str] = Field(default_factory=dict, description="old name: new name")
    remove: list[str] = Field(default_factory=list, description="Field names dropped.")

    @model_validator(mode="after")
    def _does_something(self) -> SchemaDriftEffect:
        if not self.rename and not self.remove:
            raise ValueError("give rename and/or remove")
        return self


class WorldEffect(_Strict):
    """A condition the world model must respect from the firing call on ("the disk is full")."""

    kind: Literal["world"]
    condition: str = Field(min_length=1, description="The condition, in words.")
    calls: int | None = Field(
        default=None,
        ge=1,
        description="How many calls it lasts, the firing call included. Unset: sticky "
        "(the rest of the episode).",
    )


MisleadWrongness = Literal["stale", "missing-row", "off-by-one", "false-success"]


class MisleadEffect(_Strict):
    """The world model answers, told to make its observation look right but be wrong in the
    described way (``aw_mcp.faults.mislead`` words the instruction). The record names it."""

    kind: Literal["mislead"]
    wrongness: MisleadWrongness | None = Field(
        default=None,
        description="stale: a value from before the latest change; missing-row: one item of "
        "a listing left out; off-by-one: a count or number off by one; false-success: a "
        "success message for a write that did not happen.",
    )
    instruction: str | None = Field(
        default=None,
        description="How the observation is wrong, in words; overrides the wrongness's "
        "wording (a wrongness, if given, still names the kind in the record).",
    )
    sticky: bool = Field(
        default=False,
        description="Keep the rest of the episode consistent with the lie (later "
        "observations agree with it). Unset: later calls see the true state again.",
    )

    @model_validator(mode="after")
    def _says_how(self) -> MisleadEffect:
        if self.wrongness is None and not (self.instruction or "").strip():
            raise ValueError("give a wrongness or an instruction")
        return self


Effect = Annotated[
    ErrorEffect
    | ResultEffect
    | JsonRpcErrorEffect
    | LatencyEffect
    | HangEffect
    | TruncateEffect
    | EmptyEffect
    | CorruptEffect
    | SchemaDriftEffect
    | MisleadEffect
    | WorldEffect,
    Field(discriminator="kind"),
]

OUTCOME_KINDS = frozenset({"error", "result", "jsonrpc_error", "hang"})
OUTPUT_KINDS = frozenset({"truncate", "empty", "corrupt", "schema_drift"})
ANSWER_KINDS = OUTCOME_KINDS | OUTPUT_KINDS | {"mislead"}  # one such rule per call


class Rule(_Strict):
    id: str = Field(pattern=NAME_PATTERN, description="Names the rule in records and logs.")
    description: str = ""
    match: Match = Field(default_factory=Match)
    when: When = Field(default_factory=When)
    probability: float = Field(default=1.0, ge=0, le=1)
    max_fires: int | None = Field(default=None, ge=1, description="Per episode; unset: no cap.")
    effects: list[Effect] = Field(min_length=1)

    @model_validator(mode="after")
    def _effects_compatible(self) -> Rule:
        kinds = [e.kind for e in self.effects]
        outcomes = [k for k in kinds if k in OUTCOME_KINDS]
        if len(outcomes) > 1:
            raise ValueError(
                f"at most one of error, result, jsonrpc_error, hang per rule ({outcomes})"
            )
        if outcomes and any(k in OUTPUT_KINDS for k in kinds):
            raise ValueError(f"{outcomes[0]} replaces the answer; output effects cannot apply")
        if outcomes and "mislead" in kinds:
            raise ValueError(f"{outcomes[0]} replaces the answer; the world model cannot mislead")
        for kind in ("latency", "mislead"):
            if kinds.count(kind) > 1:
                raise ValueError(f"at most one {kind} effect per rule")
        return self

    @property
    def decides_output(self) -> bool:
        """Whether this rule replaces, damages or falsifies the answer (only one such rule
        per call)."""
        return any(e.kind in ANSWER_KINDS for e in self.effects)


class Scenario(_Strict):
    """A fault scenario file."""

    name: str = Field(pattern=NAME_PATTERN, description="Names the scenario in records.")
    description: str = ""
    seed: int = Field(default=0, description="Same seed + same calls = same faults.")
    rules: list[Rule] = Field(min_length=1)

    @model_validator(mode="after")
    def _rule_ids_unique(self) -> Scenario:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.id in seen:
                raise ValueError(f"rule id {rule.id!r} is used twice")
            seen.add(rule.id)
        return self


def bundled_scenario_names() -> list[str]:
    return bundled_names("faults")


def resolve_scenario_path(name_or_path: str | Path) -> Path:
    """A path as given, or a bundled scenario by name (``disk-full``)."""
    return resolve_data_file("faults", str(name_or_path), "fault scenario")


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a scenario by bundled name or path; raise DataFileError naming file and line."""
    return load_yaml_file(resolve_scenario_path(name_or_path), Scenario)


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of scenario files, for editors (YAML language servers)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "aw-mcp fault scenario",
        **Scenario.model_json_schema(),
    }
