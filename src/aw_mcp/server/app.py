"""The MCP surface: tools/list and tools/call on the low-level ``mcp.server.Server``.

Tools come from data (domain files, captures), so the low-level server is used: it serves
inputSchema/outputSchema exactly as given. This module owns the MCP error contract:
- unknown tool -> JSON-RPC -32602 (a protocol error, as the spec asks);
- arguments over ``max_argument_bytes`` -> an ``isError`` result at once, naming size and limit;
- arguments that break the inputSchema -> an ``isError`` result naming each problem;
- world-model failure -> an ``isError`` result with the reason (and a log line);
- anything unexpected -> an ``isError`` result too: a call never ends as an opaque -32603;
- a tool that asks the client (``simulation.client_requests``) and a client without the
  capability -> -32021 on 2026-07-28, an ``isError`` result on a handshake session
  (``aw_mcp.server.client_requests``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import MCPError, types
from mcp.server import Server
from mcp.server.lowlevel.server import lifespan as no_lifespan
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.dispatcher import ProgressFnT

from aw_mcp import __version__
from aw_mcp.domain.answers import CONTENT_BLOCK, ToolAnswer
from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.server.arguments import (
    argument_errors,
    oversize_error,
    oversize_summary,
    parse_world,
)
from aw_mcp.server.client_logging import log_to_client, send_tool_logs, set_level
from aw_mcp.server.client_requests import ClientCannotAnswer, gather
from aw_mcp.server.episode_identity import WORLD_META_KEY, client_episode, client_world
from aw_mcp.server.listen import EpisodeSubscriptions, ListsNeverChange
from aw_mcp.server.malformed import ExplainInvalidParams
from aw_mcp.server.settings import DEFAULT_MAX_ARGUMENT_BYTES
from aw_mcp.server.world_surface import notify_changed_resources, surface_handlers
from aw_mcp.simulation.simulator import RpcFaultError, WorldSimulator

log = logging.getLogger(__name__)

SERVER_NAME = "aw-mcp"


def wire_tool(served: ServedTool) -> types.Tool:
    spec = served.spec
    return types.Tool(
        name=served.public_name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations.model_validate(spec.annotations)
        if spec.annotations
        else None,
    )


def call_result(answer: ToolAnswer) -> types.CallToolResult:
    content: list[types.ContentBlock] = (
        [CONTENT_BLOCK.validate_python(block, by_name=False) for block in answer.content]
        if answer.content
        else [types.TextContent(type="text", text=answer.text)]
    )
    return types.CallToolResult(
        content=content,
        structured_content=answer.structured,
        is_error=answer.is_error,
    )


def error_result(message: str) -> types.CallToolResult:
    return call_result(ToolAnswer(text=message, is_error=True))


def progress_reporter(ctx: Any) -> ProgressFnT:
    """Progress notifications to the client of request ``ctx`` (a no-op unless it asked)."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        try:
            await ctx.session.report_progress(progress, total, message)
        except Exception as exc:  # a client gone away must not fail the call
            log.debug("progress notification not sent: %s", exc)

    return report


@asynccontextmanager
async def engine_running(simulator: WorldSimulator) -> AsyncIterator[dict[str, Any]]:
    """The server's lifespan when it owns the engine: load the model and evaluate the
    domains' prompt prefixes in the background (tools/list answers at once, calls wait for
    the model) and close the engine (models, pools,
    HTTP clients) when serving ends, however it ends."""
    engine = simulator.engine
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(simulator.warm_up)
            try:
                yield {}
            finally:
                tg.cancel_scope.cancel()  # a load still running is abandoned
    finally:
        with anyio.CancelScope(shield=True):
            await engine.aclose()


def build_server(
    simulator: WorldSimulator,
    name: str = SERVER_NAME,
    *,
    owns_engine: bool = False,
    max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
    request_state_keys: list[str] | None = None,
    episode: str | None = None,
) -> Server:
    """The MCP server for ``simulator``. With ``owns_engine`` the engine is started and closed
    by the server's lifespan (``aw-mcp serve``: once for stdio's one connection, once for the
    HTTP app); without it the caller manages the engine (tests share one across servers).
    Calls whose arguments take more than ``max_argument_bytes`` as JSON are refused.
    ``request_state_keys`` seal the 2026-07-28 ``requestState`` of tools that ask the client
    (the first seals, all open; replicas share them); without them, a key of this process.
    ``episode`` names the episode of every request that names none (``serve --episode``)."""
    catalogue = simulator.catalogue
    tools = [wire_tool(t) for t in catalogue]
    subscriptions = EpisodeSubscriptions(episode)  # 2026-07-28 listen streams, per episode

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None):
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        served = catalogue.get(params.name)
        if served is None:
            known = ", ".join(catalogue.names())
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Unknown tool: {params.name!r}. This server's tools are: {known}",
            )
        with client_episode(ctx, simulator.end_episode, episode) as episode_id:
            result = await simulate(ctx, served, params, episode_id, client_world(ctx))
        if isinstance(result, types.InputRequiredResult):
            return result  # not a call yet: the client answers and calls again
        if not served.spec.read_only and not result.is_error:
            await notify_changed_resources(ctx)
            await subscriptions.resources_changed(episode_id)
        level: types.LoggingLevel = "warning" if result.is_error else "info"
        await log_to_client(
            ctx, level, {"tool": params.name, "episode": episode_id, "isError": result.is_error}
        )
        return result

    async def simulate(
        ctx: Any,
        served: ServedTool,
        params: types.CallToolRequestParams,
        episode_id: str,
        world: Any = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        arguments = params.arguments if params.arguments is not None else {}
        # Size first: schema errors may quote the value, and the record would copy it.
        if too_large := oversize_error(params.name, arguments, max_argument_bytes):
            log.info("episode %r: %s", episode_id, too_large)
            await simulator.reject(episode_id, served, oversize_summary(arguments), too_large)
            return error_result(too_large)
        problems = argument_errors(served.spec.input_schema, arguments)
        what = f"arguments for tool {params.name}"
        episode_world = None
        if not problems and world is not None:
            (episode_world, problems), what = parse_world(world), f"_meta {WORLD_META_KEY}"
        if problems:
            message = f"Invalid {what}: " + "; ".join(problems)
            log.info("episode %r: %s", episode_id, message)
            await simulator.reject(episode_id, served, arguments, message)
            return error_result(message)

        client = None
        if requests := served.spec.simulation.client_requests:
            try:
                outcome = await gather(
                    ctx,
                    params.name,
                    requests,
                    arguments,
                    params.input_responses,
                    params.request_state,
                )
            except ClientCannotAnswer as exc:
                await simulator.reject(episode_id, served, arguments, str(exc))
                return error_result(str(exc))
            if isinstance(outcome, types.InputRequiredResult):
                return outcome  # 2026-07-28: the client answers and calls again
            client = outcome

        await send_tool_logs(ctx, served.spec.simulation.log_messages, arguments)
        try:
            answer = await simulator.call(
                episode_id,
                served,
                arguments,
                progress_reporter(ctx),
                episode_world,
                client,
            )
        except RpcFaultError as exc:
            raise MCPError(
                code=exc.fault.code, message=exc.fault.message, data=exc.fault.data
            ) from None
        except Exception as exc:
            log.exception("unexpected failure in %s (episode %r)", params.name, episode_id)
            return error_result(
                f"aw-mcp internal error while simulating {params.name}: {type(exc).__name__}: {exc}"
            )
        return call_result(answer)

    server = ListsNeverChange(
        name,
        version=__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda n: t.spec.input_schema if (t := catalogue.get(n)) else None,
        lifespan=(lambda _server: engine_running(simulator)) if owns_engine else no_lifespan,
        # resources (and listen streams for their updates), prompts, completions
        **surface_handlers(simulator, subscriptions.listen, episode),
    )
    server.middleware.append(ExplainInvalidParams())
    # Seals and verifies the requestState of input_required results (2026-07-28).
    security = (
        RequestStateSecurity(keys=request_state_keys)
        if request_state_keys
        else RequestStateSecurity.ephemeral()
    )
    server.middleware.append(RequestStateBoundary(security, default_audience=name))
    # Registered, not a constructor argument: that one warns that logging is deprecated.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    return server
