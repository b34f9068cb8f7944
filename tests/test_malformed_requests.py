"""Requests the SDK cannot read still get a JSON-RPC error (a client must never wait forever).

Raw lines go to a real `aw-mcp serve` over stdio; only ping/tools/list and refused requests
are sent, so no model generates.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading

import httpx2
import pytest

from tests.helpers import TINY_DOMAIN
from tests.http_support import JSON_AND_SSE, NO_MODEL, SERVE, http_serve, initialize_body

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test-client", "version": "0"},
    },
}


def call(request_id: int, arguments: str) -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"run_command","arguments":{arguments}}}}}'
    )


# (line, the ids it must be answered under, JSON-RPC code, a phrase the error's data holds)
BAD_LINES = [
    ('{"jsonrpc":"1.0","id":1,"method":"ping"}', [1], -32600, '"jsonrpc" must be "2.0"'),
    (
        '[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"tools/list"}]',
        [2, 3],
        -32600,
        "batch",
    ),
    ('{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[1,2]}', [4], -32602, "object"),
    (call(5, '{"command":' + "[" * 250 + "]" * 250 + "}"), [5], -32602, "nested"),
    (call(6, '{"command":"\\ud800"}'), [6], -32700, "lone UTF-16 surrogate"),
    ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}', [7], -32602, "name"),
    (call(8, "[" * 5000 + "]" * 5000), [8], -32600, "nested"),
    ('{"jsonrpc":"2.0","id":"nine","method":7}', ["nine"], -32600, '"method" must be a string'),
    ("this is not JSON", [None], -32700, "not valid JSON"),
    ('{"jsonrpc":"2.0","id":10}', [10], -32600, 'a request needs a "method"'),
    ('{"jsonrpc":"2.0","id":"eleven","params":{}}', ["eleven"], -32600, 'needs a "method"'),
]


def read_replies(stdout, replies: queue.Queue) -> None:
    for line in stdout:
        replies.put(json.loads(line))


@pytest.fixture
def stdio_server():
    proc = subprocess.Popen(
        [*SERVE, *NO_MODEL, "--simulator", str(TINY_DOMAIN), "--log-level", "WARNING"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
        errors="surrogateescape",  # a line of bytes that are not UTF-8 can be sent as such
    )
    replies: queue.Queue = queue.Queue()
    threading.Thread(target=read_replies, args=(proc.stdout, replies), daemon=True).start()

    def send(line: str) -> None:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    try:
        yield send, replies
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait(timeout=20)


def replies_until(replies: queue.Queue, ids: list, timeout: float = 30) -> dict:
    """Replies by id until every one of ``ids`` has come (a missing one fails the test)."""
    got: dict = {}
    while not set(ids) <= set(got):
        try:
            reply = replies.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(
                f"no reply within {timeout} s for ids {sorted(set(ids) - set(got), key=str)}"
            )
        got[reply.get("id")] = reply
    return got


def test_every_unreadable_request_gets_an_error_that_says_what_is_wrong(stdio_server):
    send, replies = stdio_server
    send(json.dumps(INITIALIZE))
    assert "result" in replies_until(replies, ["init"])["init"]
    send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    for line, *_ in BAD_LINES:
        send(line)
    send('{"jsonrpc":"2.0","id":"after","method":"ping"}')
    expected_ids = [i for _, ids, *_ in BAD_LINES for i in ids]
    got = replies_until(replies, [*expected_ids, "after"])
    assert got["after"]["result"] == {}  # the server still serves
    for line, ids, code, phrase in BAD_LINES:
        for request_id in ids:
            error = got[request_id]["error"]
            assert error["code"] == code, (line[:80], error)
            assert phrase in error["data"], (line[:80], error)


def test_a_bad_notification_is_not_answered_and_changes_nothing(stdio_server):
    send, replies = stdio_server
    send('{"jsonrpc":"1.0","method":"notifications/initialized"}')
    send('[{"jsonrpc":"2.0","method":"notifications/initialized"}]')
    send('{"jsonrpc":"2.0","id":99,"result":5}')  # a malformed response: never answered
    send(json.dumps(INITIALIZE))
    send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    send('{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    send('{"jsonrpc":"2.0","id":"last","method":"ping"}')
    got = replies_until(replies, ["init", 1, "last"])
    assert set(got) == {"init", 1, "last"}  # no reply to the bad notifications or response
    assert [t["name"] for t in got[1]["result"]["tools"]] == ["run_command", "read_file"]


def test_over_http_the_same_requests_get_a_400_with_their_id_and_what_is_wrong(tmp_path):
    headers = {**JSON_AND_SSE, "Content-Type": "application/json"}
    with (
        http_serve(tmp_path / "server.log", "--simulator", str(TINY_DOMAIN)) as url,
        httpx2.Client(timeout=30) as http,
    ):
        for line, ids, code, phrase in [*BAD_LINES[:5], *BAD_LINES[-2:]]:
            if len(ids) > 1:
                continue  # a batch: covered on stdio
            response = http.post(url, content=line.encode(), headers=headers)
            assert response.status_code == 400, line[:80]
            reply = response.json()
            assert reply["id"] == ids[0]
            assert reply["error"]["code"] == code and phrase in reply["error"]["data"]
        # A well-formed request still reaches the server after the body was read.
        assert http.post(url, json=initialize_body(), headers=JSON_AND_SSE).status_code == 200


# Messages the SDK drops or misreads without an answer, and the error each is owed under the
# null id (its id is missing or unusable): (line, a phrase of the error's data, code).
NULL_ID_LINES = [
    ("[]", "an empty array is not a JSON-RPC message", -32600),
    ('{"jsonrpc":"2.0","id":1.5}', 'a request needs a "method"', -32600),
    *(
        (
            f'{{"jsonrpc":"2.0","id":{rid},"method":"ping"}}',
            f"string or an integer, got {rid}",
            -32600,
        )
        for rid in ("1.5", "true", "null")
    ),
]
# A method name with a byte that is not UTF-8 (0xff), sent as raw bytes.
NOT_UTF8 = b'{"jsonrpc":"2.0","id":9,"method":"tools/\xff"}'


def test_empty_batches_unusable_ids_and_bytes_that_are_not_utf8_are_answered(stdio_server):
    send, replies = stdio_server
    send(json.dumps(INITIALIZE))
    replies_until(replies, ["init"])
    send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    for n, (line, phrase, code) in enumerate(NULL_ID_LINES):
        send(line)
        send(json.dumps({"jsonrpc": "2.0", "id": f"after-{n}", "method": "ping"}))
        got = replies_until(replies, [None, f"after-{n}"])  # one answer each, in any order
        assert got[None]["error"]["code"] == code and phrase in got[None]["error"]["data"], line
    send(NOT_UTF8.decode("utf-8", errors="surrogateescape"))
    error = replies_until(replies, [9])[9]["error"]
    assert error["code"] == -32700 and "not valid UTF-8: byte 0xff" in error["data"]


def test_over_http_they_get_a_json_rpc_error_body_never_202_or_a_pydantic_dump(tmp_path):
    with (
        http_serve(tmp_path / "server.log", *NO_MODEL, "--simulator", str(TINY_DOMAIN)) as url,
        httpx2.Client(timeout=30) as http,
    ):
        session = http.post(url, json=initialize_body(), headers=JSON_AND_SSE)
        headers = {
            **JSON_AND_SSE,
            "Content-Type": "application/json",
            "mcp-session-id": session.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        bodies = [(line.encode(), None, phrase, code) for line, phrase, code in NULL_ID_LINES]
        bodies.append((NOT_UTF8, 9, "not valid UTF-8: byte 0xff", -32700))
        for body, rid, phrase, code in bodies:
            response = http.post(url, content=body, headers=headers)
            assert response.status_code == 400, (body, response.status_code, response.text)
            reply = response.json()
            assert reply["id"] == rid and reply["error"]["code"] == code
            assert phrase in reply["error"]["data"] and "validation error" not in response.text
