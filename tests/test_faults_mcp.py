"""Each fault kind through a real MCP client (in memory) on the real server.

FakeEngine stands in for the world model here: protocol faults do not involve the model, and
the prompt it records shows what the model would have been told. World faults against the
real embedded model are in test_faults_world.py.
"""

from __future__ import annotations

import json
import logging
import time

import anyio
import pytest
from mcp import MCPError

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.faults.layer import CallContext, FaultDecision, FiredFault, NoFaults
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from tests.faults_support import (
    ITEM,
    PLAIN_OUTPUT,
    SHOP,
    client_for,
    fake_reply,
    fired,
    in_episode,
    make_simulator,
)

pytestmark = pytest.mark.anyio

FLAKY_SEARCH = """
name: flaky
seed: 1
rules:
  - id: third-search-502
    match: {tool: "sea*"}
    when: {nth: 3}
    effects: [{kind: error, preset: http_502}]
"""


async def test_502_on_the_third_search_is_recorded_and_seen_as_a_failed_request(caplog):
    engine = FakeEngine(fake_reply)
    simulator = make_simulator(FLAKY_SEARCH, engine=engine)
    caplog.set_level(logging.INFO, logger="aw_mcp.simulation")
    async with client_for(simulator) as client:
        results = []
        for n in range(4):
            meta = in_episode("ep")
            results.append(await client.call_tool("search", {"query": f"mug {n}"}, meta=meta))
        other = await client.call_tool("write_file", {"path": "a"}, meta=in_episode("ep"))

    assert [r.is_error for r in results] == [False, False, True, False]
    assert "502 Bad Gateway" in results[2].content[0].text
    assert results[0].content[0].text == PLAIN_OUTPUT
    assert not other.is_error
    faults = fired(simulator, "ep")
    assert faults[2] == [
        {"scenario": "flaky", "rule": "third-search-502", "effect": "error", "preset": "http_502"}
    ]
    assert [f for i, f in enumerate(faults) if i != 2] == [[], [], [], []]
    [episode] = simulator.episodes.find("ep")
    assert episode.records[2].source == "fault"
    # The model did not answer the faulted call, and never sees it afterwards: neither the
    # fault's text nor any stand-in for it (it would copy either as if the environment had
    # printed it). The calls around it are in the history.
    assert len(engine.requests) == 4
    assert "502 Bad Gateway" not in engine.last_prompt
    assert "mug 2" not in engine.last_prompt
    assert "mug 1" in engine.last_prompt and "mug 3" in engine.last_prompt
    assert "reached the environment" not in engine.last_prompt
    assert any(
        "fault fired" in r.message and "third-search-502" in r.message for r in caplog.records
    )


async def test_rate_limit_text_carries_retry_after_and_argument_placeholders():
    simulator = make_simulator(
        """
name: limits
rules:
  - id: burst
    when: {window: [2, 3], count: all}
    effects: [{kind: error, preset: http_429, retry_after: 17}]
  - id: denied
    match:
      tool: write_file
      arguments: {path: {regex: "^/etc/"}}
    effects:
      - kind: error
        text: "Error: EACCES: permission denied, open '{args.path}' ({tool})"
"""
    )
    async with client_for(simulator) as client:
        texts = []
        for args in ({"query": "a"}, {"query": "b"}, {"query": "c"}, {"query": "d"}):
            result = await client.call_tool("search", args, meta=in_episode("ep"))
            texts.append((result.is_error, result.content[0].text))
        denied = await client.call_tool("write_file", {"path": "/etc/hosts"}, meta=in_episode("ep"))
        allowed = await client.call_tool("write_file", {"path": "notes.txt"}, meta=in_episode("ep"))
    assert [is_error for is_error, _ in texts] == [False, True, True, False]
    assert "429 Too Many Requests (Retry-After: 17)" in texts[1][1]
    assert "Retry after 17 seconds" in texts[1][1]
    assert denied.is_error
    assert (
        denied.content[0].text == "Error: EACCES: permission denied, open '/etc/hosts' (write_file)"
    )
    assert not allowed.is_error


async def test_jsonrpc_error_reaches_the_client_with_its_code_and_the_server_keeps_serving():
    simulator = make_simulator(
        """
name: rpc
rules:
  - id: boom
    match: {tool: search}
    when: {nth: 1}
    effects: [{kind: jsonrpc_error, code: -32050, message: "Upstream exploded", data: {x: 1}}]
"""
    )
    async with client_for(simulator) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("search", {"query": "a"}, meta=in_episode("ep"))
        after = await client.call_tool("search", {"query": "b"}, meta=in_episode("ep"))
    assert caught.value.error.code == -32050
    assert caught.value.error.message == "Upstream exploded"
    assert not after.is_error
    faults = fired(simulator, "ep")
    assert faults[0] == [
        {"scenario": "rpc", "rule": "boom", "effect": "jsonrpc_error", "code": -32050}
    ]


async def test_fixed_latency_delays_the_answer_and_records_the_delay():
    simulator = make_simulator(
        """
name: slow
rules:
  - id: wait
    match: {tool: search}
    effects: [{kind: latency, seconds: 0.3}]
"""
    )
    async with client_for(simulator) as client:
        started = time.perf_counter()
        result = await client.call_tool("search", {"query": "a"}, meta=in_episode("ep"))
        elapsed = time.perf_counter() - started
    assert not result.is_error and result.content[0].text == PLAIN_OUTPUT
    assert fired(simulator, "ep")[0][0]["seconds"] == 0.3
    assert elapsed >= 0.3  # the delay happened (a functional check, not a speed measurement)


async def test_hang_is_cancelled_by_the_client_timeout_and_the_episode_goes_on():
    simulator = make_simulator(
        """
name: stuck
rules:
  - id: hang-first
    when: {nth: 1}
    effects: [{kind: hang}]
"""
    )
    for mode in ("auto", "legacy"):
        async with client_for(simulator, mode=mode) as client:
            episode = f"ep-{mode}"
            with pytest.raises(MCPError) as caught:
                await client.call_tool(
                    "search", {"query": "a"}, read_timeout_seconds=0.5, meta=in_episode(episode)
                )
            with anyio.fail_after(10):  # the episode's lock was released by the cancellation
                after = await client.call_tool("search", {"query": "b"}, meta=in_episode(episode))
        assert "timed out" in caught.value.error.message.lower()
        assert not after.is_error and after.content[0].text == PLAIN_OUTPUT
        [record_hung, record_after] = simulator.episodes.find(episode)[0].records
        assert record_hung.source == "cancelled"
        assert record_hung.faults[0]["effect"] == "hang"
        assert record_after.source == "model"


async def test_hang_with_a_limit_ends_as_a_gateway_timeout():
    simulator = make_simulator(
        """
name: gateway
rules:
  - id: slow-upstream
    effects: [{kind: hang, seconds: 0.2}]
"""
    )
    async with client_for(simulator) as client:
        result = await client.call_tool("search", {"query": "a"}, meta=in_episode("ep"))
    assert result.is_error and "504 Gateway Time-out" in result.content[0].text


OUTPUT_FAULTS = """
name: damage
seed: 5
rules:
  - id: cut
    when: {nth: 1, count: all}
    effects: [{kind: truncate, keep: 0.5, marker: "...[truncated]"}]
  - id: nothing
    when: {nth: 2, count: all}
    effects: [{kind: empty}]
  - id: garble
    when: {nth: 3, count: all}
    effects: [{kind: corrupt, rate: 0.2}]
  - id: drift
    when: {nth: 4, count: all}
    effects: [{kind: schema_drift, rename: {size: size_bytes}, remove: [owner]}]
"""


async def test_output_faults_on_a_plain_text_tool():
    simulator = make_simulator(OUTPUT_FAULTS)
    async with client_for(simulator) as client:
        texts = []
        for n in range(4):
            result = await client.call_tool("search", {"query": f"q{n}"}, meta=in_episode("ep"))
            assert not result.is_error
            texts.append(result.content[0].text)
    truncated, empty, corrupted, drifted = texts
    assert truncated == PLAIN_OUTPUT[: len(PLAIN_OUTPUT) // 2] + "...[truncated]"
    assert empty == ""
    assert len(corrupted) == len(PLAIN_OUTPUT) and corrupted != PLAIN_OUTPUT
    assert sum(a != b for a, b in zip(corrupted, PLAIN_OUTPUT, strict=True)) >= 3
    assert drifted == "name: report.txt\nsize_bytes: 2048\nstatus: ok"
    assert [f[0]["effect"] for f in fired(simulator, "ep")] == [
        "truncate",
        "empty",
        "corrupt",
        "schema_drift",
    ]


async def test_schema_drift_in_json_text_stays_well_formed_json():
    engine = FakeEngine(json.dumps({"results": [{"title": "A", "url": "u1"}], "total": 1}))
    simulator = make_simulator(
        """
name: drift
rules:
  - id: rename
    effects: [{kind: schema_drift, rename: {url: link}, remove: [total]}]
""",
        engine=engine,
    )
    async with client_for(simulator) as client:
        result = await client.call_tool("search", {"query": "a"}, meta=in_episode("ep"))
    assert json.loads(result.content[0].text) == {"results": [{"title": "A", "link": "u1"}]}


async def test_output_faults_on_a_structured_tool_keep_the_result_valid_or_say_why():
    """The client validates structuredContent: damage that breaks the schema becomes the
    isError 'Output validation error' SDK servers send; damage that fits stays a result."""
    simulator = make_simulator(
        """
name: structured
rules:
  - id: optional-field-drifts
    when: {nth: 1}
    effects: [{kind: schema_drift, rename: {description: summary}}]
  - id: required-field-missing
    when: {nth: 2}
    effects: [{kind: schema_drift, remove: [name]}]
  - id: cut
    when: {nth: 3}
    effects: [{kind: truncate, keep: 0.5}]
  - id: nothing
    when: {nth: 4}
    effects: [{kind: empty}]
"""
    )
    async with client_for(simulator) as client:  # the SDK client raises on invalid structure
        results = [
            await client.call_tool("get_item", {"id": str(n)}, meta=in_episode("ep"))
            for n in range(4)
        ]
    drifted, missing, truncated, empty = results
    expected = {k: v for k, v in ITEM.items() if k != "description"}
    assert drifted.structured_content == {**expected, "summary": ITEM["description"]}
    assert json.loads(drifted.content[0].text) == drifted.structured_content
    assert missing.is_error
    assert missing.content[0].text == "Output validation error: 'name' is a required property"
    assert truncated.structured_content["tags"] == ["kitchen"]
    assert truncated.structured_content["name"] == "Blue mug"  # short strings stay whole
    description = ITEM["description"]
    assert truncated.structured_content["description"] == description[: len(description) // 2]
    assert empty.structured_content == {"id": "", "name": "", "tags": [], "description": ""}


async def test_a_faulted_observation_is_not_replayed_as_the_world_state():
    """A read-only call repeated after a damaged answer goes back to the world model."""
    read_only = SHOP.model_copy(deep=True)
    read_only.tools[0].annotations = {"readOnlyHint": True}
    engine = FakeEngine(fake_reply)
    layer_yaml = """
name: once
rules:
  - id: cut-first
    when: {nth: 1}
    effects: [{kind: truncate, keep: 0.3}]
"""
    simulator = make_simulator(layer_yaml, engine=engine, domain=read_only)
    async with client_for(simulator) as client:
        first = await client.call_tool("search", {"query": "a"}, meta=in_episode("ep"))
        second = await client.call_tool("search", {"query": "a"}, meta=in_episode("ep"))
        third = await client.call_tool("search", {"query": "a"}, meta=in_episode("ep"))
    assert first.content[0].text != PLAIN_OUTPUT
    assert second.content[0].text == third.content[0].text == PLAIN_OUTPUT
    sources = [r.source for r in simulator.episodes.find("ep")[0].records]
    assert sources == ["model", "model", "replay"]


class _BrokenTransformLayer(NoFaults):
    def decide(self, call: CallContext) -> FaultDecision:
        def explode(answer: ToolAnswer) -> ToolAnswer:
            raise RuntimeError("bug in a transform")

        return FaultDecision(fired=[FiredFault("x", "y", "corrupt")], transforms=[explode])


async def test_a_failing_output_fault_never_crashes_the_call():
    simulator = WorldSimulator(
        Catalogue([SHOP]), FakeEngine(fake_reply), faults=_BrokenTransformLayer()
    )
    async with client_for(simulator) as client:
        result = await client.call_tool("search", {"query": "a"})
    assert not result.is_error and result.content[0].text == PLAIN_OUTPUT


def test_damage_to_a_text_answered_tool_keeps_its_text_and_structure_in_step():
    """The filesystem tools answer TEXT with {"content": TEXT}: a damaged answer is damaged in
    both the same way, never JSON text beside a structured value."""
    from aw_mcp.domain.loader import load_domain
    from aw_mcp.faults.output import damage
    from aw_mcp.faults.scenario import TruncateEffect

    tool = load_domain("os").tool("read_text_file")
    assert tool is not None and tool.output_schema is not None
    text = "line one of the file\n" * 10
    answer = ToolAnswer(text=text, structured=tool.structured_answer(text))
    cut = damage(answer, TruncateEffect(kind="truncate"), tool.output_schema, 1, tool.answer_text)
    assert not cut.is_error and cut.text != text and text.startswith(cut.text[:20])
    assert cut.structured == {"content": cut.text}
