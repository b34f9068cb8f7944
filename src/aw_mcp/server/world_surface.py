"""Resources, resource templates, prompts and completions: the MCP surface beyond tools.

What a domain offers is data (``resources``, ``resourceTemplates`` and ``prompts`` in its
YAML, or in a capture served with ``--tools-from``); the lists are served as declared. What a
read or a get returns comes from the world model, as a step of the requesting client's
episode: ``resources/read`` is the action ``resources/read {"uri": ...}`` in that episode's
history, so a resource reads back what the episode's tool calls wrote, and a repeated read
with nothing changed in between is replayed. ``prompts/get`` and ``completion/complete`` are
actions too. Fault rules match them by those names (``match: {tool: "resources/read"}``).

Subscriptions (``resources/subscribe``, handshake generation): which resources a tool call
changed is the world model's secret, so after every call of a tool that is not read-only the
connection's subscribed resources get ``notifications/resources/updated`` (a client re-reads,
and the world model answers in line with the call). 2026-07-28 clients, which have no
``resources/subscribe``, listen on ``subscriptions/listen`` instead (``aw_mcp.server.listen``).

A prompt's ``simulation.client_requests`` (never on the wire) ask the client first, as a
tool's do (``aw_mcp.server.client_requests``): a 2026-07-28 ``prompts/get`` may answer
``input_required``.

Errors: an unknown resource URI or prompt name -> -32602 with the URI or name in ``data``;
a missing required prompt argument -> -32602 naming it; a read the world model or a fault
fails -> a JSON-RPC error whose message says why (MCP has no ``isError`` for these).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from mcp import MCPError, types

from aw_mcp.domain.answers import CONTENT_BLOCK, ToolAnswer
from aw_mcp.domain.catalogue import Catalogue, ServedTool
from aw_mcp.domain.models import ClientExchange, DomainSpec, ToolSimulation, ToolSpec
from aw_mcp.records.calls import COMPLETE, GET_PROMPT, READ_RESOURCE
from aw_mcp.server.client_requests import ClientCannotAnswer, gather
from aw_mcp.server.episode_identity import client_episode, connection_state
from aw_mcp.simulation.simulator import RpcFaultError, WorldSimulator

log = logging.getLogger(__name__)

READ = READ_RESOURCE
MAX_COMPLETIONS = 100  # the spec's limit per answer

# The actions the world model is asked for, as tools of each domain (never in tools/list).
ACTIONS = {
    READ: ToolSpec(
        name=READ,
        description="Read an MCP resource of this environment by its URI.",
        inputSchema={
            "type": "object",
            "properties": {"uri": {"type": "string"}, "mimeType": {"type": "string"}},
            "required": ["uri"],
        },
        annotations={"readOnlyHint": True},
        simulation=ToolSimulation(
            guidance="The resource's full content exactly as the server returns it (its "
            "mimeType says the format), consistent with every earlier step. Nothing else."
        ),
    ),
    GET_PROMPT: ToolSpec(
        name=GET_PROMPT,
        description="Get an MCP prompt of this environment, filled in with its arguments.",
        inputSchema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name"],
        },
        annotations={"readOnlyHint": True},
        simulation=ToolSimulation(
            guidance="The text of the user message this prompt produces for these "
            "arguments, as the server's prompt template would write it. Nothing else."
        ),
    ),
    COMPLETE: ToolSpec(
        name=COMPLETE,
        description="Suggest values for an argument of a prompt or resource template.",
        inputSchema={"type": "object", "properties": {"ref": {}, "argument": {}}},
        annotations={"readOnlyHint": True},
        # validated from data: its answer_grammar's model lives in engines, which the
        # server layer does not import (tests/test_architecture.py)
        simulation=ToolSimulation.model_validate(
            {
                "guidance": "Up to 10 values that complete the argument's current value, one "
                "a line, most likely first. Nothing else.",
                "max_tokens": 128,
                # values, one a line; never a fence line (a small model wraps lists in fences)
                "answer_grammar": {"lark": 'start: value{0,10}\nvalue: /[^`\\s][^\\n]*/ "\\n"'},
            }
        ),
    ),
}


def template_pattern(uri_template: str) -> re.Pattern[str]:
    """A regex for the URIs an RFC 6570 template (levels 1-2) expands to: ``{x}`` is one
    path segment, ``{+x}`` and ``{#x}`` anything."""
    parts = re.split(r"(\{[^}]*\})", uri_template)
    regex = ""
    for part in parts:
        if part.startswith("{") and part.endswith("}"):
            regex += "(.+)" if part[1:2] in ("+", "#") else "([^/?#]+)"
        else:
            regex += re.escape(part)
    return re.compile(regex + r"\Z")


@dataclass(frozen=True)
class _Readable:
    domain: DomainSpec
    mime_type: str | None


class WorldSurface:
    """The resources, templates and prompts of a catalogue's domains, and their answers."""

    def __init__(self, simulator: WorldSimulator, unnamed: str | None = None):
        self.simulator = simulator
        self.unnamed = unnamed  # the episode of a request that names none (serve --episode)
        catalogue = simulator.catalogue
        self.resources = [r for d in catalogue.domains for r in d.resources]
        self.templates = [t for d in catalogue.domains for t in d.resource_templates]
        self.prompts: list[types.Prompt] = [p for d in catalogue.domains for p in d.prompts]
        self._by_uri = {
            r.uri: _Readable(d, r.mime_type) for d in catalogue.domains for r in d.resources
        }
        self._patterns = [
            (template_pattern(t.uri_template), _Readable(d, t.mime_type), t)
            for d in catalogue.domains
            for t in d.resource_templates
        ]
        self._prompts = {p.name: (d, p) for d in catalogue.domains for p in d.prompts}
        self._actions = _served_actions(catalogue)

    @property
    def offers_resources(self) -> bool:
        return bool(self.resources or self.templates)

    @property
    def offers_prompts(self) -> bool:
        return bool(self.prompts)

    def _readable(self, uri: str) -> _Readable | None:
        found = self._by_uri.get(uri)
        if found is None:
            found = next((r for p, r, _ in self._patterns if p.match(uri)), None)
        return found

    async def read(self, ctx: Any, uri: str) -> types.ReadResourceResult:
        readable = self._readable(uri)
        if readable is None:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Resource not found: {uri}",
                data={"uri": uri},
            )
        arguments = {"uri": uri, **({"mimeType": readable.mime_type} if readable.mime_type else {})}
        answer = await self._simulate(ctx, readable.domain, READ, arguments)
        if answer.content:  # a canned result's blocks (a fault rule's): binary content too
            contents = [resource_contents(b, uri, readable.mime_type) for b in answer.content]
        else:
            text = unfenced(answer.text)
            mime = readable.mime_type
            contents = [types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        return types.ReadResourceResult(contents=contents)

    async def get_prompt(
        self, ctx: Any, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        name, arguments = params.name, params.arguments
        found = self._prompts.get(name)
        if found is None:
            known = ", ".join(self._prompts) or "none"
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown prompt: {name!r}. This server's prompts are: {known}",
                data={"name": name},
            )
        domain, prompt = found
        given = arguments or {}
        missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in given]
        if missing:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Prompt {name!r} needs the argument(s): {', '.join(missing)}",
            )
        client = None
        if requests := prompt.simulation.client_requests:  # asked as a tool's are
            try:
                outcome = await gather(
                    ctx, name, requests, given, params.input_responses, params.request_state
                )
            except ClientCannotAnswer as exc:
                raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
            if isinstance(outcome, types.InputRequiredResult):
                return outcome
            client = outcome
        answer = await self._simulate(
            ctx, domain, GET_PROMPT, {"name": name, "arguments": given}, client
        )
        blocks = answer.content or [{"type": "text", "text": unfenced(answer.text)}]
        messages = [
            types.PromptMessage(
                role="user", content=CONTENT_BLOCK.validate_python(b, by_name=False)
            )
            for b in blocks
        ]
        return types.GetPromptResult(description=prompt.description, messages=messages)

    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            found = self._prompts.get(ref.name)
            domain = found[0] if found else None
            what = {"prompt": ref.name}
        else:
            domain = next(
                (r.domain for _, r, t in self._patterns if t.uri_template == ref.uri), None
            )
            what = {"resourceTemplate": ref.uri}
        if domain is None:
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"Nothing to complete for {what}", data=what
            )
        arguments = {
            "ref": what,
            "argument": {"name": params.argument.name, "value": params.argument.value},
        }
        if params.context and params.context.arguments:
            arguments["context"] = params.context.arguments
        answer = await self._simulate(ctx, domain, COMPLETE, arguments)
        lines = (v.strip() for v in answer.text.splitlines())
        values = list(dict.fromkeys(v for v in lines if v and not FENCE_LINE.match(v)))
        return types.CompleteResult(
            completion=types.Completion(values=values[:MAX_COMPLETIONS], has_more=False)
        )

    async def _simulate(
        self,
        ctx: Any,
        domain: DomainSpec,
        action: str,
        arguments: dict[str, Any],
        client: list[ClientExchange] | None = None,
    ) -> ToolAnswer:
        served = self._actions[(domain.name, action)]
        with client_episode(ctx, self.simulator.end_episode, self.unnamed) as episode_id:
            try:
                answer = await self.simulator.call(episode_id, served, arguments, client=client)
            except RpcFaultError as exc:
                raise MCPError(
                    code=exc.fault.code, message=exc.fault.message, data=exc.fault.data
                ) from None
        if answer.is_error:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{action} failed: {answer.text}")
        return answer


FENCE_LINE = re.compile(r"(`{3,}|~{3,})[\w+.-]*\Z")


def unfenced(text: str) -> str:
    """A resource's or prompt's text without a markdown fence wrapped around all of it: the
    content is raw (a small model fences it anyway, although told not to)."""
    lines = text.strip("\n").split("\n")
    opening = FENCE_LINE.match(lines[0].strip())
    if len(lines) < 2 or opening is None or lines[-1].strip() != opening.group(1):
        return text
    inner = lines[1:-1]
    if any(line.lstrip().startswith(opening.group(1)) for line in inner):
        return text  # more than one block: the fences are the content's own
    return "\n".join(inner)


def resource_contents(
    block: dict[str, Any], uri: str, mime_type: str | None
) -> types.TextResourceContents | types.BlobResourceContents:
    """A content block of a canned answer as the contents of the resource ``uri``: an embedded
    resource as it is, text as text, an image or audio as a blob."""
    if block["type"] == "resource":
        resource = block["resource"]
        kind = types.BlobResourceContents if "blob" in resource else types.TextResourceContents
        return kind.model_validate(resource, by_name=False)
    if block["type"] == "text":
        return types.TextResourceContents(uri=uri, mime_type=mime_type, text=block["text"])
    if block["type"] in ("image", "audio"):
        mime = block.get("mimeType") or mime_type
        return types.BlobResourceContents(uri=uri, mime_type=mime, blob=block["data"])
    raise MCPError(  # a resource link: not the content of a resource
        code=types.INTERNAL_ERROR, message=f"a {block['type']} block cannot be read as {uri}"
    )


_SUBSCRIBED = "aw-mcp/subscribed-resources"  # in the SDK's per-connection state


def _subscriptions(ctx: Any) -> set[str] | None:
    state = connection_state(ctx)
    return state.setdefault(_SUBSCRIBED, set()) if state is not None else None


async def notify_changed_resources(ctx: Any) -> None:
    """After a state-changing call: the resources this connection subscribed to may have
    changed; tell the client (a client gone away must not fail the call)."""
    for uri in sorted(_subscriptions(ctx) or ()):
        try:
            await ctx.session.send_resource_updated(uri)
        except Exception as exc:
            log.debug("resources/updated for %s not sent: %s", uri, exc)


def _served_actions(catalogue: Catalogue) -> dict[tuple[str, str], ServedTool]:
    worlds = {t.domain.name: t.world for t in catalogue}
    return {
        (domain.name, name): ServedTool(name, spec, domain, worlds.get(domain.name, domain.world))
        for domain in catalogue.domains
        for name, spec in ACTIONS.items()
    }


def offered_actions(catalogue: Catalogue) -> list[tuple[str, str]]:
    """(domain, action) of the surface actions a client can reach: a resource read where the
    domain has resources or templates, a prompt get where it has prompts, a completion where
    it has prompts or templates (a fault rule may match these as tools)."""
    offered = []
    for domain in catalogue.domains:
        readable = bool(domain.resources or domain.resource_templates)
        if readable:
            offered.append((domain.name, READ))
        if domain.prompts:
            offered.append((domain.name, GET_PROMPT))
        if domain.prompts or domain.resource_templates:
            offered.append((domain.name, COMPLETE))
    return offered


def surface_handlers(
    simulator: WorldSimulator, listen: Any = None, unnamed: str | None = None
) -> dict[str, Any]:
    """``Server`` handler arguments for what the catalogue's domains offer (none: {}), so
    the capabilities a client sees are the ones that answer. ``listen`` serves
    ``subscriptions/listen`` (``aw_mcp.server.listen``) where there are resources to update;
    ``unnamed``: the episode of a request that names none (``serve --episode``)."""
    surface = WorldSurface(simulator, unnamed)
    handlers: dict[str, Any] = {}

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        return await surface.complete(ctx, params)

    if surface.offers_resources:

        async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
            return types.ListResourcesResult(resources=surface.resources)

        async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
            return types.ListResourceTemplatesResult(resource_templates=surface.templates)

        async def read(
            ctx: Any, params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            return await surface.read(ctx, params.uri)

        async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
            if surface._readable(params.uri) is None:
                raise MCPError(
                    code=types.INVALID_PARAMS,
                    message=f"Resource not found: {params.uri}",
                    data={"uri": params.uri},
                )
            subscribed = _subscriptions(ctx)
            if subscribed is not None:
                subscribed.add(params.uri)
            return types.EmptyResult()

        async def unsubscribe(
            ctx: Any, params: types.UnsubscribeRequestParams
        ) -> types.EmptyResult:
            (_subscriptions(ctx) or set()).discard(params.uri)
            return types.EmptyResult()

        handlers.update(
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
        )
        if listen is not None:
            handlers["on_subscriptions_listen"] = listen
    if surface.offers_prompts:

        async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
            return types.ListPromptsResult(prompts=surface.prompts)

        async def get_prompt(
            ctx: Any, params: types.GetPromptRequestParams
        ) -> types.GetPromptResult | types.InputRequiredResult:
            return await surface.get_prompt(ctx, params)

        handlers.update(on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    if surface.prompts or surface.templates:
        handlers["on_completion"] = complete
    return handlers
