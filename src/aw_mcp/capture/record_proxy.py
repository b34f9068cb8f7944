"""``aw-mcp record``: a transparent MCP proxy that records a real server's episodes.

A client connects to the proxy as to the real server: the proxy lists the same tools (the real
``tools/list``, every page), forwards each ``tools/call`` unchanged and hands back what the
server answered: results as they are (``isError`` ones included) and JSON-RPC errors with
their code, message and data. Each call is appended to its episode's record (the
``--record-dir`` format, source ``"real"``), so real episodes become replay, evaluation and
training data.

- A JSON-RPC error is recorded with source ``"rpc-error"`` (observation ``"JSON-RPC error
  <code>: <message>"``, ``structured`` = ``{"code", "message", "data"}``); like a refused
  call, it is not part of the episode's history.
- A call the client cancels is recorded with source ``"cancelled"``.
- The real server's ``tools/list`` is saved as ``<out>/tools/<domain>.json`` (the
  ``aw-mcp capture`` shape) so ``aw-mcp export`` can render a domain that is not bundled.
- Call numbers continue an episode's record file if it already has calls.
- Episodes: an episode id the client sends (``Aw-Episode-Id`` header, ``_meta``
  ``aw-mcp/episode``) names the episode; otherwise the whole connection is one episode, named
  by ``--episode``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters, types
from mcp.server import Server

import aw_mcp
from aw_mcp.capture.tools_list import write_capture
from aw_mcp.records.calls import CallRecord, ObservationSource
from aw_mcp.records.folder import CAPTURES_FOLDER
from aw_mcp.records.sink import RecordSink
from aw_mcp.server.app import progress_reporter
from aw_mcp.server.episode_identity import EPISODE_HEADER, EPISODE_META_KEY, episode_request
from aw_mcp.state.steps import StepState

log = logging.getLogger(__name__)


def proxy_target(out: Path, command: list[str], *options: str) -> StdioServerParameters:
    """How to launch ``aw-mcp record --out OUT OPTIONS -- COMMAND`` from this source tree (the
    generators and tests drive the real proxy as a client would)."""
    src = str(Path(aw_mcp.__file__).resolve().parents[1])
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "aw_mcp", "record", "--out", str(out), *options, "--", *command],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
        },
    )


def domain_name_for(server_name: str | None) -> str:
    """A domain name (``[a-z0-9][a-z0-9_-]*``) from the real server's name: ``mcp-time``."""
    name = re.sub(r"[^a-z0-9_\-]+", "-", (server_name or "").lower()).strip("-_")
    return name or "recorded"


def observation_of(result: types.CallToolResult) -> str:
    """The text an agent reads in a result: its text blocks, one a line; other blocks named."""
    parts = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        else:
            mime = getattr(block, "mime_type", None) or getattr(block, "mimeType", None)
            parts.append(f"[{block.type} content{f' ({mime})' if mime else ''}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


class EpisodeRecorder:
    """Numbers each episode's calls in arrival order and writes their records."""

    def __init__(self, sink: RecordSink, domain: str, default_episode: str):
        self.sink = sink
        self.domain = domain
        self.default_episode = default_episode
        self._next_index: dict[str, int] = {}

    def episode_for(self, ctx: Any) -> str:
        """The client's own episode id if it sent one; else this proxy's episode."""
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        meta = getattr(ctx, "meta", None)
        sent = (headers is not None and headers.get(EPISODE_HEADER)) or (
            meta is not None and _meta_has(meta, EPISODE_META_KEY)
        )
        return episode_request(ctx).episode_id if sent else self.default_episode

    def next_index(self, episode: str) -> int:
        """The next call number of ``episode``. A record file that already holds calls of it
        (an earlier recording, or another proxy of the same episode called in turn, as the
        SWE generator does with the git and filesystem servers) is continued, not restarted."""
        path = self.sink.path_for(episode)
        on_file = sum(1 for _ in path.open(encoding="utf-8")) if path.exists() else 0
        index = max(self._next_index.get(episode, 0), on_file) + 1
        self._next_index[episode] = index
        return index

    def write(
        self,
        episode: str,
        index: int,
        tool: str,
        arguments: dict[str, Any],
        observation: str,
        *,
        structured: Any = None,
        is_error: bool,
        source: ObservationSource,
        started: float,
        state: StepState | None = None,
    ) -> CallRecord:
        record = CallRecord(
            index=index,
            episode=episode,
            domain=self.domain,
            tool=tool,
            arguments=arguments,
            observation=observation,
            structured=structured,
            is_error=is_error,
            source=source,
            started_at=started,
            seconds=round(time.time() - started, 4),
            state=state,
        )
        self.sink.write(record)
        return record


def _meta_has(meta: Any, key: str) -> bool:
    if isinstance(meta, dict):
        return bool(meta.get(key))
    return bool((getattr(meta, "model_extra", None) or {}).get(key))


async def list_all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def build_proxy_server(
    client: Client, tools: list[types.Tool], recorder: EpisodeRecorder
) -> Server:
    """A low-level Server that serves ``tools`` and forwards every call to ``client``."""
    info = client.server_info

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None):
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        episode = recorder.episode_for(ctx)
        index = recorder.next_index(episode)
        arguments = params.arguments if params.arguments is not None else {}
        started = time.time()

        def record(observation: str, source: ObservationSource, **fields: Any) -> None:
            recorder.write(
                episode,
                index,
                params.name,
                arguments,
                observation,
                source=source,
                started=started,
                **fields,
            )

        try:
            result = await client.call_tool(
                params.name, params.arguments, progress_callback=progress_reporter(ctx)
            )
        except MCPError as exc:
            record(
                f"JSON-RPC error {exc.code}: {exc.message}",
                "rpc-error",
                structured={"code": exc.code, "message": exc.message, "data": exc.data},
                is_error=True,
            )
            raise MCPError(code=exc.code, message=exc.message, data=exc.data) from None
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                record("(cancelled by the client)", "cancelled", is_error=True)
            raise
        except Exception as exc:  # the SDK refused the server's answer (e.g. its outputSchema)
            message = f"aw-mcp record: the real server's answer was unusable: {exc}"
            record(
                message,
                "rpc-error",
                is_error=True,
                structured={"code": types.INTERNAL_ERROR, "message": message, "data": None},
            )
            raise MCPError(code=types.INTERNAL_ERROR, message=message) from None
        record(
            observation_of(result),
            "real",
            structured=result.structured_content,
            is_error=bool(result.is_error),
        )
        return result

    return Server(
        info.name if info else "aw-mcp-record",
        version=info.version if info else "",
        instructions=client.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def save_tools(tools: list[types.Tool], recorder: EpisodeRecorder) -> None:
    capture = {
        "tools": [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]
    }
    write_capture(capture, recorder.sink.directory / CAPTURES_FOLDER / f"{recorder.domain}.json")


async def run_record_proxy(
    target: str | StdioServerParameters,
    sink: RecordSink,
    domain: str | None,
    episode: str | None,
    serve: Any,
) -> None:
    """Connect to the real server, then serve the proxy with ``serve(server)`` until the
    client goes away (``serve`` is a transport: aw_mcp.server.transports.serve_stdio...)."""
    async with Client(target) as client:
        tools = await list_all_tools(client)
        name = domain or domain_name_for(client.server_info.name if client.server_info else None)
        recorder = EpisodeRecorder(sink, name, episode or f"{name}-{int(time.time())}")
        save_tools(tools, recorder)
        log.info(
            "recording %d tools of %s as domain %s into %s",
            len(tools),
            client.server_info.name if client.server_info else "the server",
            name,
            sink.directory,
        )
        await serve(build_proxy_server(client, tools, recorder))
