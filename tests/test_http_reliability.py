"""What one HTTP client must not be able to do to the others: wedge an episode by hanging up
on a hung call, stall the event loop with a huge body, or end their sessions with a flood of
initializes.

Every call is answered by a fault rule (no model); servers are real `aw-mcp serve --transport
http` subprocesses on loopback, except the unit test of the body limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from mcp.server.transport_security import TransportSecuritySettings

from aw_mcp.records.sink import record_file_name
from aw_mcp.server import http_app
from aw_mcp.server.episode_identity import EPISODE_HEADER
from aw_mcp.server.http_app import ScreenedBodies
from aw_mcp.server.settings import ServerSettings
from tests.helpers import TINY_DOMAIN
from tests.http_support import NO_MODEL, RawHttpSession, http_serve

T = TypeVar("T")
HANG_THEN_ANSWER = """
name: hang-first
rules:
  - id: hang
    when: {nth: 1, count: all}
    effects: [{kind: hang}]
  - id: answer
    effects: [{kind: result, content: [{type: text, text: answered}]}]
"""
ANSWER = """
name: answer
rules:
  - id: answer
    effects: [{kind: result, content: [{type: text, text: answered}]}]
"""


def serve_args(tmp_path, scenario: str, *more: str) -> list[str]:
    faults = tmp_path / "faults.yaml"
    faults.write_text(scenario)
    return [*NO_MODEL, "--simulator", str(TINY_DOMAIN), "--faults", str(faults), *more]


def answered(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``, failing the test if it has no answer within a minute (an SSE stream's
    keep-alive pings would keep a plain read timeout from ever firing)."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(call, *args).result(timeout=60)
    except FutureTimeout:
        pytest.fail("no answer within 60 s: the episode is still held by the hung call")
    finally:
        pool.shutdown(wait=False)  # the server's end closes a stream still waiting


def test_a_client_that_hangs_up_on_a_hung_call_does_not_wedge_its_episode(tmp_path):
    """The repro of the issue: a `hang` rule on the first call, a client that gives up after
    a second without notifications/cancelled, then the same episode again (same session, and
    a new session with the same Aw-Episode-Id): both are answered, not held until the
    session's idle timeout (30 minutes)."""
    records = tmp_path / "records"
    args = serve_args(tmp_path, HANG_THEN_ANSWER, "--record-dir", str(records))
    with http_serve(tmp_path / "server.log", *args) as url:
        impatient = RawHttpSession(url, headers={EPISODE_HEADER: "x"}, timeout=1)
        with pytest.raises(httpx2.TimeoutException):
            impatient.call_tool(2, "run_command", {"command": "sleep 1000"})
        impatient.http.timeout = httpx2.Timeout(20)
        same_session = answered(impatient.call_tool, 3, "run_command", {"command": "ls"})
        other = RawHttpSession(url, headers={EPISODE_HEADER: "x"}, timeout=20)
        new_session = answered(other.call_tool, 4, "run_command", {"command": "pwd"})
    assert same_session["content"][0]["text"] == "answered"
    assert new_session["content"][0]["text"] == "answered"
    lines = (records / record_file_name("x")).read_text().splitlines()
    assert [json.loads(line)["source"] for line in lines] == ["cancelled", "fault", "fault"]


def test_a_body_over_the_limit_is_refused_before_anything_parses_it(monkeypatch):
    """The limit is checked on the byte count; the JSON is never parsed (a 3.5 MB body with
    330k keys took 2.3 s of the event loop to parse, from every other client)."""
    parsed: list[str] = []
    monkeypatch.setattr(http_app, "screen_line", lambda text: parsed.append(text))
    reached: list[dict] = []

    async def sdk(scope, receive, send) -> None:
        reached.append(scope)

    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = ScreenedBodies(sdk, security, max_body=1000)
    head = b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"arguments":{'
    body = head + b",".join(b'"k%d":1' % i for i in range(400)) + b"}}}"
    sent: list[dict] = []

    async def send(message) -> None:
        sent.append(message)

    async def run(declared: bool) -> None:
        parts = [body[i : i + 300] for i in range(0, len(body), 300)]
        messages = [
            {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
            for i, part in enumerate(parts)
        ]

        async def receive():
            return messages.pop(0)

        headers = [(b"content-type", b"application/json")]
        if declared:
            headers.append((b"content-length", str(len(body)).encode()))
        scope = {"type": "http", "method": "POST", "headers": headers, "path": "/mcp"}
        await app(scope, receive, send)

    for declared in (True, False):
        sent.clear()
        anyio.run(run, declared)
        start, answer = sent
        assert start["status"] == 413
        error = json.loads(answer["body"])
        assert error["id"] == "big" and error["error"]["message"] == "Request body too large"
        assert "at most 1000" in error["error"]["data"]
    assert parsed == [] and reached == []


def test_the_body_limit_follows_the_argument_limit():
    def body_limit(argument_bytes: int) -> int:
        return ServerSettings(max_argument_bytes=argument_bytes).max_body_bytes

    assert body_limit(256 * 1024) == 2 * 256 * 1024 + 64 * 1024
    assert body_limit(100 * 1024 * 1024) == 4 * 1024 * 1024  # never past the SDK's


def test_a_huge_body_is_refused_while_other_clients_are_served(tmp_path):
    """A 3.5 MB body of 330k keys gets 413 with its id, and the server answers others."""
    arguments = ",".join(f'"k{i}":1' for i in range(330_000))
    body = (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_command",'
        f'"arguments":{{"command":"ls",{arguments}}}}}}}'
    )
    assert len(body) > 3_500_000
    with http_serve(tmp_path / "server.log", *serve_args(tmp_path, ANSWER)) as url:
        session = RawHttpSession(url)
        status, [error] = session.post(body)
        assert status == 413 and error["id"] == 7
        assert "--max-argument-bytes" in error["error"]["data"]
        assert session.call_tool(8, "run_command", {"command": "ls"})["isError"] is False
        RawHttpSession(url).close()  # a new client is admitted


def test_a_flood_of_initializes_does_not_close_a_working_clients_session(tmp_path):
    """At --max-sessions, sessions that never sent a request after initialize make room
    first: a client that is working keeps its session (and its episode) through a flood."""
    args = serve_args(tmp_path, ANSWER, "--max-sessions", "3")
    with http_serve(tmp_path / "server.log", *args) as url:
        worker = RawHttpSession(url)
        assert worker.call_tool(2, "run_command", {"command": "ls"})["isError"] is False
        flood = [RawHttpSession(url) for _ in range(10)]  # 10 initializes, never used
        status, messages = worker.post(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        assert status == 200 and messages[0]["result"] == {}
        assert worker.call_tool(4, "run_command", {"command": "pwd"})["isError"] is False
        # the flood evicted its own kind: the last of them still has its session
        assert flood[-1].post(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}))[0] == 200
        assert flood[0].post(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}))[0] == 404


def test_an_episode_named_by_its_client_outlives_the_eviction_of_its_session(tmp_path):
    """When every session is established, the least recently used goes; an episode named with
    Aw-Episode-Id does not end with it: the client initializes again and continues it."""
    records = tmp_path / "records"
    args = serve_args(tmp_path, ANSWER, "--max-sessions", "2", "--record-dir", str(records))
    with http_serve(tmp_path / "server.log", *args) as url:
        named = RawHttpSession(url, headers={EPISODE_HEADER: "keep"})
        named.call_tool(2, "run_command", {"command": "touch a"})
        other = RawHttpSession(url)
        other.call_tool(2, "run_command", {"command": "ls"})
        RawHttpSession(url)  # a third client: the named one's session is the oldest idle one
        ping = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert named.post(ping)[0] == 404
        again = RawHttpSession(url, headers={EPISODE_HEADER: "keep"})
        again.call_tool(4, "run_command", {"command": "ls a"})
    lines = (records / record_file_name("keep")).read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [1, 2]  # one episode, continued
