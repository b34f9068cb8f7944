"""Tools that call back the MCP client: sampling, elicitation and roots, declared as data.

A tool's ``simulation.client_requests`` (``aw_mcp.domain.models.ClientRequestSpec``) lists
what the tool asks the client during a call: the user (``elicitation/create``), the client's
LLM (``sampling/createMessage``) or the client's roots (``roots/list``), with texts templated
from the call's arguments. The client's answers become part of the call's action in the
episode's history, so the world model answers in their light ("the user confirmed", "the
client's LLM summarised it as ...", "the client's roots are ...").

How the requests reach the client follows the protocol generation of the request:

- handshake sessions (up to 2025-11-25): each request is sent to the client during the call,
  in order, as a server-to-client request tied to the ``tools/call``;
- 2026-07-28 (stateless, SEP-2322): the call answers with an ``input_required`` result that
  carries the requests (``inputRequests``) and a ``requestState``; the client calls again
  with its ``inputResponses`` and the state. The state holds the answers of earlier rounds
  and is sealed (AES-GCM, ``RequestStateBoundary``), so a tampered one is refused (-32602).

A request needs a capability the client declares (``sampling``, ``elicitation``, ``roots``).
A client without it gets a clear error, never a crash: -32021 (MissingRequiredClientCapability,
HTTP 400) on 2026-07-28, an ``isError`` result naming the capability on a handshake session;
a request declared ``required: false`` is left out instead, and the world model is told.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import jsonschema
from mcp import MCPError, types
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field, ValidationError

from aw_mcp.domain.models import (
    ClientExchange,
    ClientRequestKind,
    ClientRequestSpec,
    fill_template,
)
from aw_mcp.json_schemas import validator_class

log = logging.getLogger(__name__)

# The first revision whose client requests travel in input_required results (SEP-2322).
INPUT_REQUIRED_VERSION = "2026-07-28"

_RESULT_TYPES: dict[ClientRequestKind, type[BaseModel]] = {
    "sampling": types.CreateMessageResult,
    "elicitation": types.ElicitResult,
    "roots": types.ListRootsResult,
}


class CallState(BaseModel):
    """The plaintext of a ``requestState``: the answers of the rounds before this one."""

    v: Literal[1] = 1
    answers: dict[str, dict[str, Any]] = Field(default_factory=dict)


class ClientCannotAnswer(Exception):
    """A handshake-session call whose client cannot take a request: the call ends with an
    ``isError`` result carrying this message."""


def missing_capability_message(spec: ClientRequestSpec, tool: str) -> str:
    return (
        f"Tool {tool} asks the client for {spec.method} ({spec.key!r}), but this client did "
        f"not declare the {spec.kind!r} capability. Connect with a client that supports "
        f"{spec.kind} to use this tool."
    )


def wire_request(
    spec: ClientRequestSpec, arguments: dict[str, Any]
) -> types.ElicitRequest | types.CreateMessageRequest | types.ListRootsRequest:
    """The MCP request ``spec`` describes, its texts filled from the call's ``arguments``."""
    if spec.kind == "elicitation":
        return types.ElicitRequest(
            params=types.ElicitRequestFormParams(
                message=fill_template(spec.message or "", arguments),
                requested_schema=spec.requested_schema,
            )
        )
    if spec.kind == "sampling":
        text = types.TextContent(type="text", text=fill_template(spec.message or "", arguments))
        return types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=[types.SamplingMessage(role="user", content=text)],
                max_tokens=spec.max_tokens,
                system_prompt=fill_template(spec.system_prompt, arguments)
                if spec.system_prompt
                else None,
            )
        )
    return types.ListRootsRequest()


def request_params(request: BaseModel) -> dict[str, Any]:
    params = getattr(request, "params", None)
    if params is None:
        return {}
    dumped: dict[str, Any] = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def client_can(capabilities: types.ClientCapabilities | None, kind: ClientRequestKind) -> bool:
    """Whether a client with ``capabilities`` takes requests of ``kind``."""
    if capabilities is None:
        return False
    if kind == "sampling":
        return capabilities.sampling is not None
    if kind == "roots":
        return capabilities.roots is not None
    elicitation = capabilities.elicitation
    # A bare `elicitation: {}` (before modes existed) means forms; url-only does not.
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def missing_capability_error(spec: ClientRequestSpec, tool: str) -> MCPError:
    """MissingRequiredClientCapabilityError (-32021) naming the capability (2026-07-28)."""
    required = types.ClientCapabilities.model_validate({spec.kind: {}})
    data = types.MissingRequiredClientCapabilityErrorData(required_capabilities=required)
    return MCPError(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=missing_capability_message(spec, tool),
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


def answer_problem(spec: ClientRequestSpec, response: dict[str, Any]) -> str | None:
    """What is wrong with the client's answer to ``spec`` (None: nothing)."""
    try:
        parsed = _RESULT_TYPES[spec.kind].model_validate(response, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the result"
        return f"not a {spec.method} result ({where}: {first['msg']})"
    if isinstance(parsed, types.ElicitResult) and parsed.action == "accept":
        if parsed.content is None:
            return "an accepted elicitation without content"
        validator = validator_class(spec.requested_schema)(spec.requested_schema)
        errors = sorted(validator.iter_errors(parsed.content), key=jsonschema.exceptions.relevance)
        if errors:
            return f"content that does not match the requested schema: {errors[0].message}"
    return None


def exchange(
    spec: ClientRequestSpec,
    arguments: dict[str, Any],
    response: dict[str, Any] | None = None,
    error: str | None = None,
) -> ClientExchange:
    return ClientExchange(
        key=spec.key,
        kind=spec.kind,
        request=request_params(wire_request(spec, arguments)),
        response=response,
        error=error,
    )


def uses_input_required(ctx: Any) -> bool:
    version = getattr(ctx, "protocol_version", None)
    return isinstance(version, str) and is_version_at_least(version, INPUT_REQUIRED_VERSION)


def client_capabilities(ctx: Any) -> types.ClientCapabilities | None:
    return getattr(ctx.session, "client_capabilities", None)


async def ask_during_call(
    ctx: Any, tool: str, specs: list[ClientRequestSpec], arguments: dict[str, Any]
) -> list[ClientExchange]:
    """Handshake sessions: send each request to the client now, round by round, and collect
    the answers. A refusal or an error from the client is an answer too (the world model is
    told); a missing required capability raises ClientCannotAnswer."""
    capabilities = client_capabilities(ctx)
    exchanges: list[ClientExchange] = []
    for spec in sorted(specs, key=lambda s: s.round):
        if not client_can(capabilities, spec.kind):
            if spec.required:
                raise ClientCannotAnswer(missing_capability_message(spec, tool))
            exchanges.append(exchange(spec, arguments, error=f"no {spec.kind} capability"))
            continue
        request = wire_request(spec, arguments)
        try:
            result = await ctx.session.send_request(
                request,
                _RESULT_TYPES[spec.kind],
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except NoBackChannelError:
            raise ClientCannotAnswer(
                f"Tool {tool} asks the client for {spec.method}, but this connection cannot "
                "carry requests from the server to the client."
            ) from None
        except MCPError as exc:
            log.info("%s: the client answered %s with an error: %s", tool, spec.method, exc)
            exchanges.append(exchange(spec, arguments, error=f"client error: {exc}"))
            continue
        except ValidationError as exc:
            exchanges.append(exchange(spec, arguments, error=f"invalid answer: {exc.title}"))
            continue
        response = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        problem = answer_problem(spec, response)
        if problem:
            exchanges.append(exchange(spec, arguments, response, error=problem))
        else:
            exchanges.append(exchange(spec, arguments, response))
    return exchanges


def resume(
    tool: str,
    specs: list[ClientRequestSpec],
    arguments: dict[str, Any],
    capabilities: types.ClientCapabilities | None,
    input_responses: dict[str, Any] | None,
    request_state: str | None,
) -> list[ClientExchange] | types.InputRequiredResult:
    """2026-07-28: the exchanges, once every request of every round is answered; until
    then the ``input_required`` result that asks for the next round's requests.

    ``request_state`` is the plaintext the server sealed in the previous round (the
    ``RequestStateBoundary`` middleware has already verified it). Answers to keys the tool
    does not ask are ignored; an answer that is not a result of its request's kind, or an
    accepted form that breaks the requested schema, is -32602. A key the client left out is
    asked again.
    """
    state = CallState()
    if request_state:
        try:
            state = CallState.model_validate_json(request_state)
        except ValidationError:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid requestState") from None
    answers = dict(state.answers)
    by_key = {s.key: s for s in specs}
    for key, response in (input_responses or {}).items():
        spec = by_key.get(key)
        if spec is None or key in answers:  # unknown keys are ignored (SEP-2322)
            continue
        wire = (
            response.model_dump(by_alias=True, mode="json", exclude_none=True)
            if isinstance(response, BaseModel)
            else response
        )
        problem = answer_problem(spec, wire) if isinstance(wire, dict) else "not an object"
        if problem:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"inputResponses[{key!r}] answers {spec.method} with {problem}",
                data={"key": key},
            )
        answers[key] = wire
    exchanges: list[ClientExchange] = []
    for round_ in sorted({s.round for s in specs}):
        pending: dict[str, types.InputRequest] = {}
        for spec in (s for s in specs if s.round == round_):
            if spec.key in answers:
                exchanges.append(exchange(spec, arguments, answers[spec.key]))
            elif client_can(capabilities, spec.kind):
                pending[spec.key] = wire_request(spec, arguments)
            elif spec.required:
                raise missing_capability_error(spec, tool)
            else:
                exchanges.append(exchange(spec, arguments, error=f"no {spec.kind} capability"))
        if pending:
            return types.InputRequiredResult(
                input_requests=pending,
                request_state=CallState(answers=answers).model_dump_json(),
            )
    return exchanges


async def gather(
    ctx: Any,
    name: str,
    specs: list[ClientRequestSpec],
    arguments: dict[str, Any],
    input_responses: dict[str, Any] | None,
    request_state: str | None,
) -> list[ClientExchange] | types.InputRequiredResult:
    """The client's answers to ``specs`` for the request ``ctx`` (a tool call or a prompt
    get named ``name``), by the request's protocol generation: asked now on a handshake
    session (ClientCannotAnswer when it cannot be), or the next ``input_required`` round on
    2026-07-28 (-32021 for a missing capability)."""
    if uses_input_required(ctx):
        return resume(
            name, specs, arguments, client_capabilities(ctx), input_responses, request_state
        )
    return await ask_during_call(ctx, name, specs, arguments)
