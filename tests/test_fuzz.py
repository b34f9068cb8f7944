"""Fuzzing the server's edges with hypothesis: tool arguments, raw JSON-RPC, data files.

Properties (what must hold for every generated case):
- a tool call ends in a result (isError or not) or a -32602, never -32603 or an exception;
- every JSON-RPC request on stdio or HTTP gets exactly one answer with its id, and the server
  is still answering afterwards;
- a mutated domain or scenario file loads, or fails with a DataFileError that names the file.

Example counts keep the module to about half a minute on two busy cores;
``AW_MCP_FUZZ_SCALE=20`` runs twenty times as many. ``derandomize`` makes CI runs
reproducible (the same examples every run).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError, types

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import bundled_domain_names, load_domain
from aw_mcp.engines.base import GenerationRequest
from aw_mcp.faults.scenario import bundled_scenario_names, load_scenario
from aw_mcp.files.bundled import bundled_dir
from aw_mcp.files.yaml import DataFileError
from aw_mcp.server.app import build_server
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from tests.fuzz_support import (
    ANSWER_EVERY_CALL,
    RawStdioServer,
    WireLine,
    arguments_for,
    wire_lines,
    wrong_arguments_for,
)
from tests.helpers import TINY_DOMAIN
from tests.http_support import RawHttpSession, http_serve

SCALE = int(os.environ.get("AW_MCP_FUZZ_SCALE", "1"))


def fuzz(examples: int):
    return settings(
        max_examples=examples * SCALE,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# --- (a) tool arguments, in memory, fake engine --------------------------------------------

DOMAINS = {name: load_domain(name) for name in bundled_domain_names()}
TOOLS = [(name, tool) for name, domain in DOMAINS.items() for tool in domain.tools]


def fake_reply(request: GenerationRequest) -> str:
    """Plumbing only: an empty object where JSON is asked for, a line of text otherwise."""
    return "{}" if request.json_schema else "done"


SERVERS = {
    name: build_server(WorldSimulator(Catalogue([domain]), FakeEngine(fake_reply)))
    for name, domain in DOMAINS.items()
}


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, str, Any]:
    domain, tool = draw(st.sampled_from(TOOLS))
    schema = tool.input_schema
    arguments = draw(st.one_of(arguments_for(schema), wrong_arguments_for(schema)))
    return domain, tool.name, arguments


async def call_raw(domain: str, tool: str, arguments: Any) -> dict[str, Any] | MCPError:
    """The raw result of the call, or the JSON-RPC error it got."""
    async with Client(SERVERS[domain]) as client:
        try:
            # The raw request, so that arguments the SDK's own client would refuse to send
            # (a list, a number) reach the server as a careless client would send them.
            return await client.session._dispatcher.send_raw_request(
                "tools/call", {"name": tool, "arguments": arguments}
            )
        except MCPError as exc:
            return exc


@fuzz(examples=500)
@given(tool_calls())
def test_any_tool_arguments_end_in_a_result_or_invalid_params(call: tuple[str, str, Any]):
    raw = anyio.run(call_raw, *call)
    if isinstance(raw, MCPError):
        assert raw.code == types.INVALID_PARAMS, (raw.code, str(raw), call)
        return
    result = types.CallToolResult.model_validate(raw)
    assert result.content, call
    if result.is_error:
        assert "internal error" not in result.content[0].text, result.content[0].text


# --- (b) raw JSON-RPC on stdio and over HTTP ---------------------------------------------


@pytest.fixture(scope="module")
def stdio_server() -> Iterator[RawStdioServer]:
    with tempfile.TemporaryDirectory() as folder:
        server = RawStdioServer(Path(folder) / "server.log")
        try:
            server.initialize()
            yield server
        finally:
            server.close()


@fuzz(examples=400)
@given(wire_lines())
def test_every_stdio_request_gets_one_answer_with_its_id(stdio_server, line: WireLine):
    before = stdio_server.answer_counts()
    stdio_server.send(line.text)
    for request_id in line.ids:
        stdio_server.wait_for(request_id)
    # The requests' answers came; a ping after them shows no second answer is on its way
    # (stdio answers in order only per request, so this is checked once more at the end).
    after = stdio_server.answer_counts()
    for request_id in line.ids:
        key = json.dumps(request_id)
        assert after[key] - before[key] == line.ids.count(request_id), (key, line.text[:300])


def test_the_stdio_server_answers_after_the_fuzzing(stdio_server):
    stdio_server.send(json.dumps({"jsonrpc": "2.0", "id": "final-ping", "method": "ping"}))
    stdio_server.wait_for("final-ping")
    call = {"name": "run_command", "arguments": {"command": "echo still here"}}
    stdio_server.send(
        json.dumps({"jsonrpc": "2.0", "id": "final-call", "method": "tools/call", "params": call})
    )
    stdio_server.wait_for("final-call")
    assert stdio_server.proc.poll() is None
    assert not stdio_server.unparsable, stdio_server.unparsable[:3]
    repeated = {k: n for k, n in stdio_server.answer_counts().items() if n > 1 and k != "null"}
    assert not repeated, repeated  # fuzzed ids are unique: none may be answered twice


@pytest.fixture(scope="module")
def http_session() -> Iterator[RawHttpSession]:
    with tempfile.TemporaryDirectory() as folder:
        args = ["--simulator", str(TINY_DOMAIN), "--faults", str(ANSWER_EVERY_CALL)]
        with http_serve(Path(folder) / "server.log", *args) as url:
            session = RawHttpSession(url)
            yield session
            session.close()


@pytest.mark.slow
@fuzz(examples=400)
@given(wire_lines())
def test_every_http_request_gets_one_answer_with_its_id(http_session, line: WireLine):
    status, messages = http_session.post(line.text)
    assert status < 500, (status, messages, line.text[:300])
    answered = Counter(json.dumps(m.get("id")) for m in messages if isinstance(m, dict))
    for request_id in line.ids:
        key = json.dumps(request_id)
        assert answered[key] == line.ids.count(request_id), (status, messages, line.text[:300])
    for message in messages:
        error = message.get("error") if isinstance(message, dict) else None
        assert error is None or error["code"] != types.INTERNAL_ERROR, (message, line.text[:300])


def test_the_http_server_answers_after_the_fuzzing(http_session):
    status, messages = http_session.post(
        json.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping"})
    )
    assert status == 200 and messages[0]["id"] == "p" and "result" in messages[0]


# --- (c) data files -------------------------------------------------------------------------

BUNDLED_FILES = [
    *(("domain", bundled_dir("simulators") / f"{n}.yaml") for n in bundled_domain_names()),
    *(("scenario", bundled_dir("faults") / f"{n}.yaml") for n in bundled_scenario_names()),
]
YAML_NOISE = ["", ":", "- ", "  ", "\t", "&a", "*a", "!!python/object:os.system", "{", "]", "'"]
YAML_NOISE += ["null", "~", "-1", "1e999", "yes", "\x00", "\ufeff", "\ud800", "<<: *a", "? "]


@st.composite
def mutated_files(draw: st.DrawFn) -> tuple[str, str, str]:
    kind, path = draw(st.sampled_from(BUNDLED_FILES))
    lines = path.read_text(encoding="utf-8").splitlines()
    rng = random.Random(draw(st.integers(0, 2**32)))
    for _ in range(draw(st.integers(1, 4))):
        at = rng.randrange(len(lines))
        how = draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "splice", "cut"]))
        if how == "delete":
            del lines[at]
        elif how == "duplicate":
            lines.insert(at, lines[at])
        elif how == "swap":
            other = rng.randrange(len(lines))
            lines[at], lines[other] = lines[other], lines[at]
        elif how == "insert":
            lines.insert(at, draw(st.sampled_from(YAML_NOISE)) + draw(st.text(max_size=10)))
        elif how == "splice":  # noise inside a line: a value, a key, the indentation
            line = lines[at]
            cut = rng.randrange(len(line) + 1)
            lines[at] = line[:cut] + draw(st.sampled_from(YAML_NOISE)) + line[cut:]
        else:
            lines = lines[: at + 1]
        if not lines:
            lines = [""]
    return kind, path.name, "\n".join(lines) + "\n"


@pytest.mark.filterwarnings("error::DeprecationWarning")  # today's warning, tomorrow's error
@fuzz(examples=400)
@given(mutated_files())
def test_a_mutated_data_file_loads_or_fails_with_an_error_naming_it(case: tuple[str, str, str]):
    kind, name, text = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            (load_domain if kind == "domain" else load_scenario)(str(path))
        except DataFileError as exc:
            message = str(exc)
            assert message.startswith(str(path)), message
            if "invalid YAML" in message:
                assert exc.problems[0][0] is not None, message  # the line of the problem
