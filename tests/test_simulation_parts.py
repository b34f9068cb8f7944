"""Each part of a call (aw_mcp.simulation) on its own. FakeEngine where an engine is needed."""

from __future__ import annotations

import dataclasses
import json
import logging

import anyio
import pytest

from aw_mcp.domain.answers import ToolAnswer
from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.models import ToolCall
from aw_mcp.engines.base import GenerationRequest
from aw_mcp.episode.episode import Episode
from aw_mcp.episode.prompt import PromptProfile
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.errors import EngineError
from aw_mcp.faults.layer import FaultDecision, JsonRpcFault, NoFaults
from aw_mcp.records.calls import Turn
from aw_mcp.simulation.context_window import ContextFitter, PromptTooLongError
from aw_mcp.simulation.fault_step import FaultStep, RpcFaultError
from aw_mcp.simulation.observation import ObservationGenerator, parse_structured
from aw_mcp.simulation.progress import PROGRESS_INTERVAL_S, generate_with_progress
from aw_mcp.simulation.read_repeats import ReadRepeats
from aw_mcp.simulation.recording import PendingRecord
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.faults_support import ITEM, ITEM_SCHEMA, SHOP
from tests.helpers import TINY_DOMAIN

CATALOGUE = Catalogue([load_domain(str(TINY_DOMAIN))])
RUN, READ = CATALOGUE.get("run_command"), CATALOGUE.get("read_file")
SHOP_CATALOGUE = Catalogue([SHOP])
GET_ITEM = SHOP_CATALOGUE.get("get_item")


def episode_with(*steps: tuple[str, dict, str], **turn_fields) -> Episode:
    """An episode whose history is ``(tool, arguments, observation)`` steps."""
    episode = Episode("ep", "tiny")
    for index, (tool, arguments, observation) in enumerate(steps, start=1):
        action = ToolCall(tool=tool, arguments=arguments)
        episode.add_turn(Turn(index=index, action=action, observation=observation, **turn_fields))
    return episode


# -- faults ---------------------------------------------------------------------------------


class _Broken(NoFaults):
    def decide(self, call):
        raise KeyError("a rule's bug")


class _Seeing(NoFaults):
    def __init__(self):
        self.calls = []

    def decide(self, call):
        self.calls.append(call)
        return super().decide(call)


def test_a_failing_fault_layer_means_no_faults(caplog):
    decision = FaultStep(_Broken()).decide(Episode("ep", "tiny"), RUN, {"command": "ls"})
    assert decision == FaultDecision()
    assert "the fault layer failed" in caplog.text


def test_the_fault_layer_sees_the_episode_run_and_the_next_call_index():
    layer = _Seeing()
    store = EpisodeStore()
    episode = store.get("ep", "tiny")
    PendingRecord(store, episode, RUN, {"command": "ls"}).finish(ToolAnswer(text="x"), "model")
    FaultStep(layer).decide(episode, RUN, {"command": "pwd"})
    [call] = layer.calls
    assert (call.episode_id, call.domain, call.tool, call.call_index) == (
        "ep",
        "tiny",
        "run_command",
        2,
    )
    assert call.episode_key == episode.key


def test_a_broken_output_fault_leaves_the_answer_as_it_is(caplog):
    def explode(answer):
        raise ValueError("bad transform")

    decision = FaultDecision(transforms=[explode, lambda a: ToolAnswer(text=a.text.upper())])
    damaged = FaultStep.damage(decision, ToolAnswer(text="hello"), "run_command")
    assert damaged.text == "HELLO"
    assert "an output fault failed on run_command" in caplog.text


@pytest.mark.anyio
async def test_act_waits_then_fails_with_the_json_rpc_error():
    decision = FaultDecision(delay_seconds=0.2, rpc_error=JsonRpcFault(-32000, "down"))
    started = anyio.current_time()
    with pytest.raises(RpcFaultError) as err:
        await FaultStep.act(decision)
    assert anyio.current_time() - started >= 0.2
    assert err.value.fault.message == "down"


# -- replay ---------------------------------------------------------------------------------


def test_replay_repeats_a_read_only_observation_until_something_may_have_changed():
    replay = ReadRepeats()
    episode = episode_with(("read_file", {"path": "/a"}, "alpha"))
    assert replay.lookup(episode, READ, {"path": "/a"}) == ToolAnswer(text="alpha")
    assert replay.lookup(episode, READ, {"path": "/b"}) is None  # never read
    assert replay.lookup(episode, RUN, {"command": "x"}) is None  # not read-only
    episode.add_turn(
        Turn(index=2, action=ToolCall(tool="run_command", arguments={}), observation="")
    )
    assert replay.lookup(episode, READ, {"path": "/a"}) is None  # a command ran since
    assert (
        ReadRepeats(enabled=False).lookup(
            episode_with(("read_file", {"path": "/a"}, "a")), READ, {"path": "/a"}
        )
        is None
    )


def test_replay_skips_errors_damaged_answers_and_changed_conditions():
    replay = ReadRepeats()
    for fields in ({"is_error": True}, {"damaged": True}, {"conditions": ["disk full"]}):
        episode = episode_with(("read_file", {"path": "/a"}, "alpha"), **fields)
        assert replay.lookup(episode, READ, {"path": "/a"}) is None, fields


def test_replay_of_a_structured_tool_returns_its_structured_content():
    spec = GET_ITEM.spec.model_copy(update={"annotations": {"readOnlyHint": True}})
    served = dataclasses.replace(GET_ITEM, spec=spec)
    text = json.dumps(ITEM)
    episode = Episode("ep", "shop")
    action = ToolCall(tool="get_item", arguments={"id": "42"})
    episode.add_turn(Turn(index=1, action=action, observation=text))
    replayed = ReadRepeats().lookup(episode, served, {"id": "42"})
    assert replayed == ToolAnswer(text=text, structured=ITEM)


# -- context window -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_context_fitter_summarizes_the_oldest_turns_to_fit():
    engine = FakeEngine(context_window=1000)
    fitter = ContextFitter(engine, PromptProfile())
    steps = [
        ("run_command", {"command": f"echo {i} " + "x" * 80}, f"{i} " + "x" * 80) for i in range(20)
    ]
    episode = episode_with(*steps)
    messages = (
        await fitter.fit(
            episode, RUN, ToolCall(tool="run_command", arguments={"command": "ls"}), 24
        )
    ).messages
    assert await engine.count_tokens(messages) <= 1000 - 24
    assert 0 < episode.omitted_turns < 20
    assert "earlier steps are not shown in full" in messages[0].content
    assert '"command": "ls"' in messages[-1].content


@pytest.mark.anyio
async def test_a_window_shorter_than_the_context_is_what_the_prompt_fits_in():
    """--window-tokens bounds the prompt and its answer below the context window (from the
    serve settings on); a window above the context window bounds nothing."""
    steps = [
        ("run_command", {"command": f"echo {i} " + "x" * 80}, f"{i} " + "x" * 80) for i in range(20)
    ]
    action = ToolCall(tool="run_command", arguments={"command": "ls"})
    engine = FakeEngine(context_window=100_000)
    whole = episode_with(*steps)
    everything = (await ContextFitter(engine, PromptProfile()).fit(whole, RUN, action, 24)).messages
    assert whole.omitted_turns == 0 and await engine.count_tokens(everything) > 1000
    windowed = episode_with(*steps)
    fitter = ContextFitter(engine, PromptProfile(), window=1000)
    messages = (await fitter.fit(windowed, RUN, action, 24)).messages
    assert await engine.count_tokens(messages) <= 1000 - 24
    assert 0 < windowed.omitted_turns < 20
    assert (
        ContextFitter(FakeEngine(context_window=800), PromptProfile(), window=1000).window_tokens
        == 800
    )
    served = build_simulator(ServeSettings(window_tokens=1000), engine=engine)
    assert served.context.window_tokens == 1000
    with pytest.raises(PromptTooLongError, match="--window-tokens leaves"):
        too_long = ToolCall(tool="run_command", arguments={"command": "z" * 8000})
        await fitter.fit(Episode("ep", "tiny"), RUN, too_long, 24)


@pytest.mark.anyio
async def test_a_budget_sized_for_long_answers_leaves_a_small_window_its_prompt():
    """A tool's budget may be most of a small context (a shell's 1,664 tokens in --n-ctx
    2048): the prompt keeps two thirds of the window, and the answer's budget is the room the
    context has left; where the window is large the whole budget is kept free."""
    engine = FakeEngine(context_window=2048)
    fitter = ContextFitter(engine, PromptProfile())
    action = ToolCall(tool="run_command", arguments={"command": "git diff --stat"})
    steps = [("run_command", {"command": f"echo {i} " + "x" * 40}, str(i)) for i in range(10)]
    prompt = await fitter.fit(episode_with(*steps), RUN, action, 1664)
    used = await engine.count_tokens(prompt.messages)
    assert 2048 - used < 1664  # the old rule, the whole budget kept free, refused it
    assert prompt.answer_tokens == 2048 - used
    roomy = FakeEngine(context_window=100_000)
    prompt = await ContextFitter(roomy, PromptProfile()).fit(
        episode_with(*steps), RUN, action, 1664
    )
    assert prompt.answer_tokens == 1664


@pytest.mark.anyio
async def test_a_tool_that_reserves_less_than_its_budget_keeps_its_history():
    """reserved_tokens: a shell keeps 256 tokens of its 1,664 free of the prompt, so a history
    that fits beside 256 is shown whole (beside its whole budget it would be cut), and the
    answer may still run to 1,664 where the context has room."""
    steps = [
        ("run_command", {"command": f"echo {i} " + "x" * 80}, f"{i} " + "x" * 80) for i in range(20)
    ]
    action = ToolCall(tool="run_command", arguments={"command": "ls"})
    engine = FakeEngine(context_window=100_000)
    whole = await ContextFitter(engine, PromptProfile()).fit(episode_with(*steps), RUN, action, 1)
    window = await engine.count_tokens(whole.messages) + 300
    fitter = ContextFitter(engine, PromptProfile(), window=window)
    reserving = episode_with(*steps)
    prompt = await fitter.fit(reserving, RUN, action, 1664, reserved_tokens=256)
    assert reserving.omitted_turns == 0 and prompt.messages == whole.messages
    assert prompt.answer_tokens == 1664
    budgeted = episode_with(*steps)
    await fitter.fit(budgeted, RUN, action, 1664)
    assert budgeted.omitted_turns > 0


@pytest.mark.anyio
async def test_a_prompt_that_cannot_fit_is_a_clear_error():
    fitter = ContextFitter(FakeEngine(context_window=300), PromptProfile())
    action = ToolCall(tool="run_command", arguments={"command": "z" * 4000})
    with pytest.raises(PromptTooLongError, match="context window"):
        await fitter.fit(Episode("ep", "tiny"), RUN, action, 24)


# -- progress -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_progress_is_reported_while_generating_and_failures_come_out_unwrapped():
    seen = []

    async def progress(done, total, message):
        seen.append((done, total, message))

    request = GenerationRequest(messages=[], max_tokens=7)
    engine = FakeEngine("done", delay=PROGRESS_INTERVAL_S * 2.5)
    result = await generate_with_progress(engine, request, progress)
    assert result.text == "done"
    # When it starts (out of max_tokens), then done: the generated count is the total.
    assert seen[0][:2] == (0.0, 7.0) and seen[-1][:2] == (1.0, 1.0)
    assert [done for done, _, _ in seen] == sorted({done for done, _, _ in seen})  # increasing
    seen.clear()
    # An answer faster than the interval still shows its start and its end.
    await generate_with_progress(FakeEngine("quick"), request, progress)
    assert [(d, t) for d, t, _ in seen] == [(0.0, 7.0), (1.0, 1.0)]
    failing = FakeEngine(delay=PROGRESS_INTERVAL_S * 1.5, fail_with="backend died")
    with pytest.raises(EngineError, match="backend died"):
        await generate_with_progress(failing, request, progress)


# -- generation -----------------------------------------------------------------------------


def test_parse_structured_finds_the_json_object_and_checks_the_schema():
    assert parse_structured('Result: {"id": "1", "name": "x"} trailing', ITEM_SCHEMA) == (
        {"id": "1", "name": "x"},
        "",
    )
    value, problem = parse_structured('{"id": "1"}', ITEM_SCHEMA)
    assert value is None and "'name' is a required property" in problem
    value, problem = parse_structured('{"id": "1", "name', ITEM_SCHEMA)
    assert value is None and problem.startswith("not JSON")


@pytest.mark.anyio
async def test_a_schema_breaking_answer_is_retried_with_a_fresh_sample():
    replies = iter(['{"id": 5}', json.dumps(ITEM)])
    engine = FakeEngine(lambda request: next(replies))
    generator = ObservationGenerator(engine, PromptProfile(), retries=2)
    answer, _ = await generator.generate(Episode("ep", "shop"), GET_ITEM, [], 64)
    assert answer.structured == ITEM and answer.text == json.dumps(ITEM, ensure_ascii=False)
    first, retry = engine.requests
    assert first.json_schema == ITEM_SCHEMA
    assert retry.temperature > 0 and retry.seed != first.seed


@pytest.mark.anyio
async def test_a_plain_tool_is_asked_once_and_keyed_by_the_episode_run():
    engine = FakeEngine("hello")
    episode = Episode("ep", "tiny")
    answer, stats = await ObservationGenerator(engine, PromptProfile()).generate(
        episode, RUN, [], 24
    )
    assert answer == ToolAnswer(text="hello") and stats.completion_tokens == 1
    [request] = engine.requests
    assert request.cache_key == episode.key and request.max_tokens == 24


# -- recording ------------------------------------------------------------------------------


def test_a_record_holds_the_call_its_faults_and_its_episode_run(caplog):
    store = EpisodeStore()
    episode = store.get("ep", "tiny")
    pending = PendingRecord(store, episode, RUN, {"command": "ls"})
    pending.faults = [{"scenario": "s", "rule": "r", "effect": "latency"}]
    record = pending.finish(ToolAnswer(text="out"), "model")
    assert episode.records == [record] and episode.state == "active"
    assert (record.index, record.episode, record.tool, record.source) == (
        1,
        "ep",
        "run_command",
        "model",
    )
    assert record.faults[0]["rule"] == "r" and record.seconds >= 0
    assert record.episode_started_at == episode.started_at
    store.end("ep", reason="test")
    caplog.set_level(logging.WARNING)
    PendingRecord(store, episode, RUN, {"command": "late"}).finish(ToolAnswer(text="x"), "model")
    assert len(episode.records) == 1 and "is not recorded" in caplog.text


@pytest.mark.anyio
async def test_a_refused_oversized_call_leaves_the_history_whole():
    """A call too large to fit is refused; the turns before it stay shown in full for the
    next call (they were summarized for good before)."""
    engine = FakeEngine(context_window=1000)
    fitter = ContextFitter(engine, PromptProfile())
    episode = episode_with(*[("run_command", {"command": f"echo {i}"}, str(i)) for i in range(3)])
    huge = ToolCall(tool="run_command", arguments={"command": "z" * 8000})
    with pytest.raises(PromptTooLongError):
        await fitter.fit(episode, RUN, huge, 24)
    assert episode.omitted_turns == 0
    small = ToolCall(tool="run_command", arguments={"command": "ls"})
    messages = (await fitter.fit(episode, RUN, small, 24)).messages
    assert "earlier steps are not shown in full" not in messages[0].content
    assert all(f"echo {i}" in "".join(m.content for m in messages) for i in range(3))
