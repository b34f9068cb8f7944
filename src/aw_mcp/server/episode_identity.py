"""Which episode a request belongs to, and whether the client asks to reset or end it.

The episode id, in order of precedence:
1. the ``Aw-Episode-Id`` HTTP header (any client that can set headers: the explicit way, and
   the only one that works for stateless 2026-07-28 HTTP clients);
2. ``_meta["aw-mcp/episode"]`` on the request (clients that cannot set headers, e.g. stdio);
3. the legacy MCP session id (``Mcp-Session-Id`` over HTTP, from the initialize handshake);
4. the connection: one episode per legacy stdio or in-memory connection
   (``connection-<run>-<n>``); stateless 2026-07-28 clients on stdio or in memory share the
   process's episode ``process-<run>``. ``<run>`` (start time, pid and a random part) is new
   in every server process, so separate runs never share an episode or a record file.
An HTTP request with none of 1-3 falls into the shared episode ``"http-default"``.

``serve --episode NAME`` names the episode of 4 and of that HTTP fallback: every request that
names none belongs to ``NAME``, which no connection ends, so a server started again with the
same name (and ``--record-dir``) resumes it from its records: clients that start a server
per call still see one world.

A client's id (1 or 2) is used exactly as sent, or refused with -32602 when it is longer than
``MAX_EPISODE_ID_LENGTH`` characters: cutting it short would merge two episodes whose ids
share the first characters.

Episodes named by 3 or 4 end when their connection closes (an HTTP ``DELETE`` of the session,
its idle timeout, the end of a stdio process). Any episode can be reset or ended from a
``tools/call`` with ``_meta`` flags, so the simulated tool surface stays the domain's own:
``"aw-mcp/reset": true`` begins a new episode before the call, ``"aw-mcp/end": true`` ends the
episode after it.
"""

from __future__ import annotations

import itertools
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from mcp import MCPError
from mcp.types import INVALID_PARAMS, RequestParamsMeta
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

EPISODE_HEADER = "aw-episode-id"
EPISODE_META_KEY = "aw-mcp/episode"
RESET_META_KEY = "aw-mcp/reset"
END_META_KEY = "aw-mcp/end"
# The world of this episode (a domain's ``world:`` block: facts, notes, replace_notes), layered
# on the served world from the episode's first call on: each rollout its own machine.
WORLD_META_KEY = "aw-mcp/world"
SESSION_HEADER = "mcp-session-id"
HTTP_FALLBACK_EPISODE = "http-default"
MAX_EPISODE_ID_LENGTH = 200
_WATCHED = "aw-mcp/episodes-ended-on-close"  # keys in the SDK's per-connection state
_CONNECTION_EPISODE = "aw-mcp/connection-episode"
# This server process: its start time (UTC), pid and a random part (pids are reused).
RUN = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{secrets.token_hex(2)}"
PROCESS_EPISODE = f"process-{RUN}"
_connections = itertools.count(1)


def episode_meta(episode: str) -> RequestParamsMeta:
    """A client's ``_meta`` for a ``tools/call`` of episode ``episode`` (way 2 above)."""
    return cast(RequestParamsMeta, {EPISODE_META_KEY: episode})


@dataclass(frozen=True)
class EpisodeRequest:
    """What one request says about its episode."""

    episode_id: str
    reset: bool = False  # begin a new episode before this call
    end: bool = False  # end the episode after this call
    connection: Any | None = None  # the legacy connection whose close ends the episode


def _meta_value(meta: Any, key: str) -> Any:
    if meta is None:
        return None
    if isinstance(meta, dict):
        return meta.get(key)
    extra = getattr(meta, "model_extra", None) or {}
    return extra.get(key, getattr(meta, key, None))


def episode_request(ctx: Any, unnamed: str | None = None) -> EpisodeRequest:
    """The episode of the request handled with context ``ctx`` (a ServerRequestContext);
    ``unnamed``: the episode of a request that names none (``serve --episode``)."""
    meta = getattr(ctx, "meta", None)
    episode_id, connection = _identify(ctx, meta, unnamed)
    return EpisodeRequest(
        episode_id,
        reset=_meta_value(meta, RESET_META_KEY) is True,
        end=_meta_value(meta, END_META_KEY) is True,
        connection=connection,
    )


def _identify(ctx: Any, meta: Any, unnamed: str | None) -> tuple[str, Any | None]:
    """(episode id, the legacy connection it is bound to, if any)."""
    headers = getattr(getattr(ctx, "request", None), "headers", None)
    if headers is not None and (value := headers.get(EPISODE_HEADER)):
        return _checked(value, "the Aw-Episode-Id header"), None
    value = _meta_value(meta, EPISODE_META_KEY)
    if isinstance(value, str) and value:
        return _checked(value, f"_meta[{EPISODE_META_KEY!r}]"), None
    if getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        # Stateless 2026-07-28: no connection outlives a request, so none can end an episode.
        return unnamed or (HTTP_FALLBACK_EPISODE if headers is not None else PROCESS_EPISODE), None
    # Handshake generation: the SDK builds a ServerSession per request, but the Connection
    # behind it lives as long as the HTTP session, stdio process or in-memory connection (no
    # public accessor in mcp 2.3, hence the private attribute).
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    if headers is not None:
        if session_id := headers.get(SESSION_HEADER):
            return f"session-{session_id}", connection
        return unnamed or HTTP_FALLBACK_EPISODE, None
    if connection is None or unnamed:  # a named episode outlives every connection
        return unnamed or PROCESS_EPISODE, None
    episode_id = connection.state.setdefault(
        _CONNECTION_EPISODE, f"connection-{RUN}-{next(_connections)}"
    )
    return episode_id, connection


def _checked(episode_id: str, where: str) -> str:
    if len(episode_id) > MAX_EPISODE_ID_LENGTH:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"The episode id in {where} is {len(episode_id)} characters long; this "
            f"server accepts at most {MAX_EPISODE_ID_LENGTH} (it would have to cut it, and two "
            "episodes whose ids begin alike would merge). Send a shorter id, e.g. a hash.",
        )
    return episode_id


def end_on_close(request: EpisodeRequest, end: Callable[[str], None]) -> None:
    """Call ``end(episode_id)`` when the request's legacy connection closes (once per id)."""
    connection = request.connection
    if connection is None:
        return
    watched: set[str] = connection.state.setdefault(_WATCHED, set())
    if request.episode_id in watched:
        return
    watched.add(request.episode_id)

    async def on_close() -> None:
        end(request.episode_id)

    connection.exit_stack.push_async_callback(on_close)


@contextmanager
def client_episode(
    ctx: Any, end: Callable[[str, str], None], unnamed: str | None = None
) -> Iterator[str]:
    """The episode id of request ``ctx``, with what the client asked done around the work
    in the block: a reset before, an end after, the end of a legacy connection's episode
    when the connection closes. ``end(episode_id, reason)`` ends an episode; ``unnamed``:
    the episode of a request that names none (``serve --episode``)."""
    request = episode_request(ctx, unnamed)
    end_on_close(request, lambda eid: end(eid, "its connection closed"))
    if request.reset:
        end(request.episode_id, "reset by the client")
    try:
        yield request.episode_id
    finally:
        if request.end:
            end(request.episode_id, "ended by the client")


def client_world(ctx: Any) -> Any | None:
    """The client's own world for the episode of request ``ctx`` (``_meta["aw-mcp/world"]``,
    as sent: the simulator validates it), or None."""
    return _meta_value(getattr(ctx, "meta", None), WORLD_META_KEY)


def connection_state(ctx: Any) -> dict[str, Any] | None:
    """The SDK's per-connection state dict behind request ``ctx`` (None without one): what a
    handshake connection keeps between requests (mcp 2.3 has no public accessor)."""
    connection = getattr(getattr(ctx, "session", None), "_connection", None)
    return getattr(connection, "state", None)
