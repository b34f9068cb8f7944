"""Pydantic models of a domain file: the tools a simulated world offers and how to simulate it.

A domain is data (``simulators/*.yaml``), never a code path of its own. Tool fields use the
MCP wire names (``inputSchema``, ``outputSchema``) so a ``tools/list`` capture of a real server
pastes in unchanged.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import jsonschema
from mcp_types import Prompt, Resource, ResourceTemplate
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from aw_mcp.engines.loop_guard import LoopGuardSettings
from aw_mcp.engines.text_grammars import TextGrammar
from aw_mcp.json_schemas import schema_errors, validator_class

TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.\-/]{1,128}$"


def _check_json_schema(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    try:
        validator_class(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
    return schema


ClientRequestKind = Literal["sampling", "elicitation", "roots"]

# How a real server writes a JSON value as its text content: Python's json.dumps (``compact``,
# ", " and ": "), JavaScript's JSON.stringify (``minified``) or either with an indent of 2.
JsonTextStyle = Literal["compact", "minified", "indented"]


def json_text(value: Any, style: JsonTextStyle) -> str:
    """``value`` written as JSON the way a server of ``style`` writes it."""
    if style == "indented":
        return json.dumps(value, ensure_ascii=False, indent=2)
    if style == "minified":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, ensure_ascii=False)


# The MCP method of each kind of request a tool sends to its client.
CLIENT_REQUEST_METHODS: dict[str, str] = {
    "sampling": "sampling/createMessage",
    "elicitation": "elicitation/create",
    "roots": "roots/list",
}

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill_template(template: str, arguments: dict[str, Any]) -> str:
    """``template`` with each ``{name}`` that names a call argument replaced by its value
    (a string as it is, anything else as JSON); other braces are left alone, so a message
    may quote JSON."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in arguments:
            return match.group(0)
        found = arguments[name]
        return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

    return _PLACEHOLDER.sub(value, template)


class ClientRequestSpec(BaseModel):
    """A request a tool sends back to the MCP client during a call: ask the user
    (``elicitation``), use the client's LLM (``sampling``) or list the client's roots
    (``roots``). The client's answers join the episode's history with the call, so the world
    model answers in their light. Text fields are templates: ``{name}`` is the call's
    argument ``name``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    key: str = Field(
        pattern=r"^[A-Za-z0-9_.\-]{1,64}$",
        description="Names the request (the key of a 2026-07-28 inputRequests entry).",
    )
    kind: ClientRequestKind
    message: str | None = Field(
        default=None,
        description="elicitation: what the user is asked; sampling: the user message sent "
        "to the client's LLM.",
    )
    requested_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        alias="requestedSchema",
        description="elicitation: the form's flat JSON Schema (MCP's restricted subset).",
    )
    system_prompt: str | None = Field(default=None, alias="systemPrompt")
    max_tokens: int = Field(default=256, ge=1, le=32768, alias="maxTokens")
    required: bool = Field(
        default=True,
        description="A client without the capability gets an error (-32021 on 2026-07-28, "
        "an isError result on a handshake session); when false the request is left out and "
        "the world model is told the client cannot answer it.",
    )
    round: int = Field(
        default=1,
        ge=1,
        le=16,
        description="Requests of round n+1 are sent once every request of round n is answered "
        "(a second question that follows the first).",
    )

    _check_schema = field_validator("requested_schema")(_check_json_schema)

    @model_validator(mode="after")
    def _message_where_needed(self) -> ClientRequestSpec:
        if self.kind != "roots" and not self.message:
            raise ValueError(f"a {self.kind} request needs a message")
        return self

    @property
    def method(self) -> str:
        return CLIENT_REQUEST_METHODS[self.kind]


def _unique_request_keys(requests: list[ClientRequestSpec]) -> list[ClientRequestSpec]:
    keys = [r.key for r in requests]
    if len(set(keys)) != len(keys):
        raise ValueError(f"client request keys must be unique: {keys}")
    return requests


class ClientExchange(BaseModel):
    """What one client request of a call asked, and what the client answered."""

    key: str
    kind: ClientRequestKind
    request: dict[str, Any] = Field(description="The request's params, as sent.")
    response: dict[str, Any] | None = Field(default=None, description="The client's result.")
    error: str | None = Field(
        default=None,
        description="Why there is no response: the client refused, failed, or lacks the "
        "capability.",
    )


class LogMessageSpec(BaseModel):
    """A log message a tool sends during a call (``simulation.log_messages``)."""

    model_config = ConfigDict(extra="forbid")

    level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    data: str = Field(description="The message; a template of the call's arguments ({name}).")
    after_seconds: float = Field(
        default=0.0, ge=0, le=10, description="How long the tool runs before sending it."
    )


class ToolSimulation(BaseModel):
    """Hints for the world model about one tool (ours, not part of the MCP wire format)."""

    model_config = ConfigDict(extra="forbid")

    guidance: str | None = Field(
        default=None, description="What a real observation of this tool looks like."
    )
    max_tokens: int | None = Field(default=None, ge=1, le=32768)
    reserved_tokens: int | None = Field(
        default=None,
        ge=1,
        le=32768,
        description="Tokens the prompt always leaves for an answer (default: max_tokens); a "
        "longer answer, up to max_tokens, runs into what the context has left. For a tool "
        "whose answers are mostly short and rarely long, so history is not given up for "
        "every call.",
    )
    answer_grammar: TextGrammar | None = Field(
        default=None,
        description="For a tool answered in text: the form of its answers, kept to while "
        "decoding (aw_mcp/engines/text_grammars.py), so that a small model cannot break it (a page "
        "snapshot's YAML). Not applied while a world condition is active, whose answers "
        "may take another form (an error).",
    )
    text_field: str | None = Field(
        default=None,
        description="For a tool whose real server sends its structured answer's one string "
        "property as the text too (the filesystem server: text TEXT, structuredContent "
        '{"content": TEXT}): that property. The world model then writes the text, as the '
        "records show it, and the server builds the structured answer from it. None: the "
        "model writes the structured answer as JSON, which is also the text.",
    )
    fixed_fields: dict[str, Any] = Field(
        default_factory=dict,
        description="For a text_field tool whose structured answer also holds properties "
        "that never change (the memory server's deletes: text TEXT, structuredContent "
        '{"success": true, "message": TEXT}): those properties and their values, learned '
        "from its records. The server adds them to the structured answer it builds.",
    )
    json_text: JsonTextStyle = Field(
        default="compact",
        description="For a tool answered in JSON: how its real server writes the JSON as "
        "text (compact: Python's json.dumps; minified: JavaScript's JSON.stringify; indented: "
        "either with an indent of 2). The world model writes it so, as the records show it.",
    )
    json_text_of: str | None = Field(
        default=None,
        description="For a tool whose real server's text is the JSON of one property of its "
        "structured answer (the memory server: text [...], structuredContent "
        '{"entities": [...]}): that property. The world model then writes that value and '
        "the server builds the structured answer around it.",
    )
    read_only: bool | None = Field(
        default=None,
        description="Whether the tool only reads the world (for replaying a repeated call); "
        "None: the tool's readOnlyHint annotation decides. For real tools whose captured "
        "annotations leave it out, such as Brave's and Tavily's searches.",
    )
    client_requests: list[ClientRequestSpec] = Field(
        default_factory=list,
        description="Requests the tool sends to the MCP client during a call (sampling, "
        "elicitation, roots); the answers are part of the call's action in the history.",
    )
    log_messages: list[LogMessageSpec] = Field(
        default_factory=list,
        description="Log messages the real tool sends while it runs (notifications/message, "
        "to a client that asked for that level), in order, before its answer; texts are "
        "templates of the call's arguments like client_requests'.",
    )

    _keys_unique = field_validator("client_requests")(_unique_request_keys)


class PromptSimulation(BaseModel):
    """Our hints about one prompt (never on the wire)."""

    model_config = ConfigDict(extra="forbid")

    client_requests: list[ClientRequestSpec] = Field(
        default_factory=list,
        description="Requests a prompts/get sends to the MCP client first (as a tool's do).",
    )

    _keys_unique = field_validator("client_requests")(_unique_request_keys)


class PromptSpec(Prompt):
    """An MCP prompt as ``prompts/list`` has it, plus our ``simulation`` block, which is left
    out of what the client sees."""

    simulation: PromptSimulation = Field(default_factory=PromptSimulation, exclude=True)


class ToolSpec(BaseModel):
    """One tool, as on the wire in ``tools/list``, plus optional simulation hints."""

    # Domain files are written by hand: an unknown key is a typo, not a field to drop.
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    title: str | None = None
    description: str = ""
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}, alias="inputSchema"
    )
    output_schema: dict[str, Any] | None = Field(default=None, alias="outputSchema")
    annotations: dict[str, Any] | None = None
    simulation: ToolSimulation = Field(default_factory=ToolSimulation)

    _check_schemas = field_validator("input_schema", "output_schema")(_check_json_schema)

    @field_validator("input_schema")
    @classmethod
    def _input_is_object(cls, schema: dict[str, Any]) -> dict[str, Any]:
        if schema.get("type", "object") != "object":
            raise ValueError('an MCP inputSchema must have "type": "object"')
        return schema

    @model_validator(mode="after")
    def _text_hints_in_schema(self) -> ToolSpec:
        """``text_field`` and ``json_text_of`` name the one property the outputSchema
        requires (a string for ``text_field``) besides ``fixed_fields``: the answer is built
        around it."""
        simulation = self.simulation
        if simulation.text_field is not None and simulation.json_text_of is not None:
            raise ValueError("simulation.text_field and json_text_of exclude each other")
        if simulation.fixed_fields and simulation.text_field is None:
            raise ValueError("simulation.fixed_fields is for a tool with a text_field")
        if simulation.text_field in simulation.fixed_fields:
            raise ValueError("simulation.fixed_fields cannot hold the text_field itself")
        schema = self.output_schema or {}
        required = set(schema.get("required", [])) - set(simulation.fixed_fields)
        for key, field, must_be_string in (
            ("text_field", simulation.text_field, True),
            ("json_text_of", simulation.json_text_of, False),
        ):
            if field is None:
                continue
            found = schema.get("properties", {}).get(field)
            if (
                found is None
                or (must_be_string and found.get("type") != "string")
                or required - {field}
            ):
                kind = "a string" if must_be_string else "a"
                raise ValueError(
                    f"simulation.{key} {field!r} must name {kind} property of the tool's "
                    "outputSchema, the only one it requires besides fixed_fields"
                )
        if simulation.fixed_fields:
            problems = schema_errors({**schema, "required": []}, simulation.fixed_fields)
            if problems:
                raise ValueError(f"simulation.fixed_fields break the outputSchema: {problems[0]}")
        return self

    @model_validator(mode="after")
    def _grammar_for_text_answers(self) -> ToolSpec:
        if self.simulation.answer_grammar is not None and self.model_output_schema is not None:
            raise ValueError(
                "simulation.answer_grammar is for a tool answered in text; this one's answer "
                "is JSON of its outputSchema, which constrains it already"
            )
        return self

    @property
    def model_output_schema(self) -> dict[str, Any] | None:
        """The schema the world model's answer must meet: the outputSchema; none for a tool
        answered in text (``simulation.text_field``), and the one property's schema for a
        tool whose text is that property's JSON (``simulation.json_text_of``). The server
        builds the structured answer from what the model wrote."""
        if self.simulation.text_field is not None or self.output_schema is None:
            return None
        if (of := self.simulation.json_text_of) is not None:
            return {
                **{k: v for k, v in self.output_schema.items() if k.startswith("$")},
                **self.output_schema["properties"][of],
            }
        return self.output_schema

    def structured_answer(self, observation: str) -> Any | None:
        """The structured answer behind an observation the world model wrote: built from the
        text for a text-answered tool, parsed for a tool answered in JSON (around its one
        property's value for ``json_text_of``), None without an outputSchema."""
        if self.simulation.text_field is not None:
            return {**self.simulation.fixed_fields, self.simulation.text_field: observation}
        if self.output_schema is None:
            return None
        return self.structured_around(json.loads(observation))

    def structured_around(self, value: Any) -> Any:
        """The structured answer of a value the world model wrote in JSON."""
        of = self.simulation.json_text_of
        return value if of is None else {of: value}

    def answer_text(self, structured: Any) -> str:
        """The text the real server sends with a structured answer (the inverse of
        ``structured_answer``)."""
        if self.simulation.text_field is not None:
            return str(structured[self.simulation.text_field])
        of = self.simulation.json_text_of
        return json_text(structured if of is None else structured[of], self.simulation.json_text)

    @property
    def read_only(self) -> bool:
        if self.simulation.read_only is not None:
            return self.simulation.read_only
        return bool((self.annotations or {}).get("readOnlyHint", False))


class ToolCall(BaseModel):
    """An action: a tool name and its arguments, and what the tool asked the client and
    was answered (``simulation.client_requests``) before it answered itself."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    client: list[ClientExchange] = Field(default_factory=list)


class Demonstration(ToolCall):
    """A worked example turn shown to the world model before the episode's own history."""

    model_config = ConfigDict(extra="forbid")

    observation: str


class WorldSpec(BaseModel):
    """The initial world: facts the model must respect for the whole episode."""

    model_config = ConfigDict(extra="forbid")

    facts: dict[str, Any] = Field(
        default_factory=dict, description="Named facts: host name, user, working directory..."
    )
    notes: list[str] = Field(default_factory=list, description="Free-form facts, one a line.")
    replace_notes: bool = Field(
        default=False,
        description="In a --world file: drop the domain's own notes instead of adding to them "
        "(they may contradict this world, e.g. a project folder that starts empty).",
    )

    def merged(self, other: WorldSpec) -> WorldSpec:
        """This world with ``other``'s facts layered on top (a user's --world file wins)."""
        notes = other.notes if other.replace_notes else [*self.notes, *other.notes]
        return WorldSpec(facts={**self.facts, **other.facts}, notes=notes)


class GenerationDefaults(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_tokens: int = Field(default=256, ge=1, le=32768)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    stop: list[str] = Field(default_factory=list)
    loop_guard: LoopGuardSettings | None = Field(
        default=None,
        description="A loop-guard rule of this domain's, checked beside the default one "
        "(engines/loop_guard.py).",
    )


class DomainSpec(BaseModel):
    """A simulated world: its tools, the world model's instructions and its initial state.

    It may also offer MCP resources, resource templates and prompts, written in their wire
    shapes (``uri``, ``name``, ``mimeType``; ``uriTemplate``; ``arguments``) as a
    ``resources/list`` etc. capture has them; the world model answers their reads and gets.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    title: str | None = None
    description: str = ""
    instructions: str = Field(min_length=1, description="The world model's system prompt.")
    world: WorldSpec = Field(default_factory=WorldSpec)
    generation: GenerationDefaults = Field(default_factory=GenerationDefaults)
    tools: list[ToolSpec] = Field(min_length=1)
    demonstrations: list[Demonstration] = Field(default_factory=list)
    resources: list[Resource] = Field(
        default_factory=list, description="MCP resources the world offers (resources/list)."
    )
    resource_templates: list[ResourceTemplate] = Field(
        default_factory=list,
        alias="resourceTemplates",
        description="MCP resource templates (resources/templates/list), RFC 6570 level 1-2.",
    )
    prompts: list[PromptSpec] = Field(
        default_factory=list, description="MCP prompts the world offers (prompts/list)."
    )
    simulated_like: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9_\-]*$",
        description="The bundled domain this one is simulated like (a mirrored capture: mcp). "
        "LoRA adapters know every such domain by one name (adapter_domain): one trained on "
        "mirrored servers serves any mirrored server, seen in training or not.",
    )

    @property
    def adapter_domain(self) -> str:
        """The domain name adapters record and are matched by: a bundled domain's own name, and
        one shared name for every mirror (``mcp-mirror``). Mirrors are matched apart from the
        bundled world they are simulated like: its tools and guidance are its own, and
        adapters trained on mirrors lost it (docs/training.md, runs m1 and m2)."""
        return f"{self.simulated_like}-mirror" if self.simulated_like else self.name

    @model_validator(mode="after")
    def _names_unique_and_demos_known(self) -> DomainSpec:
        seen: set[str] = set()
        for tool in self.tools:
            if tool.name in seen:
                raise ValueError(f"tool {tool.name!r} is defined twice")
            seen.add(tool.name)
        for demo in self.demonstrations:
            if demo.tool not in seen:
                raise ValueError(f"demonstration uses unknown tool {demo.tool!r}")
        return self

    @model_validator(mode="after")
    def _reserves_within_budgets(self) -> DomainSpec:
        for tool in self.tools:
            reserved, budget = tool.simulation.reserved_tokens, self.answer_budget(tool)
            if reserved is not None and reserved > budget:
                raise ValueError(
                    f"tool {tool.name!r}: reserved_tokens {reserved} is more than the "
                    f"{budget} tokens its answers may take (max_tokens)"
                )
        return self

    def answer_budget(self, tool: ToolSpec) -> int:
        """The most tokens an answer of ``tool`` may take: its own max_tokens, else the
        domain's."""
        return tool.simulation.max_tokens or self.generation.max_tokens

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)
