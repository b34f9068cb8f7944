"""Log notifications to the client (``notifications/message``) about what the server simulated.

A deprecated feature since 2026-07-28 (SEP-2577) that handshake-era clients (the Inspector,
Claude Desktop) still show. One message per ``tools/call``: ``info`` for an answer,
``warning`` for an ``isError`` one, with the tool and the episode; before it, the messages the
tool declares it sends while it runs (``simulation.log_messages``: a mirrored server's own).
Sent only to a client that asked: on a handshake connection after ``logging/setLevel`` (at or
above that level); on 2026-07-28 the request's ``_meta`` log-level opt-in, which the SDK
applies itself.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import anyio
from mcp import types
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from aw_mcp.domain.models import LogMessageSpec, fill_template
from aw_mcp.server.episode_identity import connection_state

log = logging.getLogger(__name__)

LEVELS: list[types.LoggingLevel] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
]
_LEVEL_KEY = "aw-mcp/log-level"  # in the SDK's per-connection state


async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    """``logging/setLevel``: remember the level for this connection."""
    state = connection_state(ctx)
    if state is not None:
        state[_LEVEL_KEY] = params.level
    return types.EmptyResult()


async def send_tool_logs(
    ctx: Any, messages: list[LogMessageSpec], arguments: dict[str, Any]
) -> None:
    """The log messages a tool declares it sends while it runs (``simulation.log_messages``),
    each after its wait, to a client that asked for its level."""
    for message in messages:
        if message.after_seconds:
            await anyio.sleep(message.after_seconds)
        await log_to_client(ctx, message.level, fill_template(message.data, arguments))


async def log_to_client(ctx: Any, level: types.LoggingLevel, data: Any) -> None:
    """Send ``data`` as a log message of ``level`` if the client asked for that level."""
    if getattr(ctx, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
        chosen = (connection_state(ctx) or {}).get(_LEVEL_KEY)
        if chosen is None or LEVELS.index(level) < LEVELS.index(chosen):
            return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # we serve it on purpose
            await ctx.session.send_log_message(
                level, data, logger="aw-mcp", related_request_id=ctx.request_id
            )
    except Exception as exc:  # a client gone away must not fail the call
        log.debug("log notification not sent: %s", exc)
