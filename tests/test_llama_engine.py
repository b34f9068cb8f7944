"""The embedded llama.cpp engine on the real SmolLM2 GGUF: KV reuse, snapshots, cancellation."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.engines.base import ChatMessage, GenerationControl, GenerationRequest
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.engines.sequences import common_prefix
from aw_mcp.errors import EngineError
from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.simulation.simulator import SimulatorOptions, WorldSimulator
from aw_mcp.testing import small_model_path
from tests.conftest import small_engine
from tests.helpers import make_server, text_of

pytestmark = pytest.mark.anyio

COUNTING = [
    ChatMessage(role="user", content="Write the numbers from 1 to 400, separated by commas.")
]


def test_the_embedded_model_ships_with_the_package():
    path = small_model_path()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000


async def test_a_call_is_answered_by_the_real_model_through_mcp(small_model_engine):
    simulator, server = make_server(small_model_engine)
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("run_command", {"command": "echo hello"})
        (record,) = simulator.episodes.all()[0].records  # a legacy connection's ends with it
    assert result.is_error is False
    assert record.source == "model"
    assert record.stats.completion_tokens > 0
    assert text_of(result) == record.observation  # what the model said is what the agent got


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_second_step_evaluates_only_the_tokens_added_since_the_first(
    small_model_engine, mode
):
    simulator, server = make_server(small_model_engine)
    async with Client(server, mode=mode) as client:
        await client.call_tool("run_command", {"command": "pwd"})
        await client.call_tool("run_command", {"command": "ls -la"})
        first, second = simulator.episodes.all()[0].records
    assert first.stats.reused_prompt_tokens == 0
    assert first.stats.evaluated_prompt_tokens == first.stats.prompt_tokens
    # The whole first prompt is reused; only the observation and new action are evaluated.
    assert second.stats.reused_prompt_tokens >= first.stats.prompt_tokens
    assert second.stats.evaluated_prompt_tokens == (
        second.stats.prompt_tokens - second.stats.reused_prompt_tokens
    )
    assert second.stats.evaluated_prompt_tokens < second.stats.prompt_tokens / 4


async def test_switching_episodes_restores_kv_snapshots_instead_of_re_evaluating():
    # One sequence (no batching): every switch saves one episode's KV and restores the other's.
    # The batched path keeps each in its own sequence (tests/test_batching.py).
    small_model_engine = small_engine(batch_slots=1)
    simulator, server = make_server(small_model_engine)
    async with Client(server) as client:
        for episode, command in [("a", "pwd"), ("b", "whoami"), ("a", "ls"), ("b", "date")]:
            await client.call_tool(
                "run_command", {"command": command}, meta={EPISODE_META_KEY: episode}
            )
    episodes = {e.episode_id: e for e in simulator.episodes.all()}
    for episode_id in ("a", "b"):
        first, second = episodes[episode_id].records
        assert second.stats.restored_snapshot, episode_id
        assert second.stats.reused_prompt_tokens >= first.stats.prompt_tokens
    assert small_model_engine.counters.snapshot_restores >= 2


async def test_a_new_episode_starts_from_the_kept_state_that_shares_most_of_its_prompt():
    """Two worlds served side by side (two domains: two long system prompts). A new episode
    of the first world, begun while the other world's episode holds the live state, copies
    the kept state of the first world's episode and evaluates only what follows their shared
    prefix, instead of that world's whole prefix again; the copied state stays kept, so its
    own episode still restores it (issue 47)."""
    engine = small_engine(batch_slots=1)
    await engine.start()
    systems = {
        world: ChatMessage(
            role="system",
            content=f"You simulate the {world} machine. "
            + " ".join(f"Fact {i}: {world} has the file notes-{i}.txt." for i in range(30)),
        )
        for world in ("alpha", "beta")
    }
    stats = {}
    for episode, world, command in [
        ("a1", "alpha", "pwd"),
        ("b1", "beta", "pwd"),
        ("a2", "alpha", "ls"),
        ("a1", "alpha", "whoami"),
    ]:
        messages = [systems[world], ChatMessage(role="user", content=command)]
        result = await engine.generate(
            GenerationRequest(messages=messages, cache_key=episode, max_tokens=4)
        )
        stats[episode, command] = result.stats
    shared = common_prefix(
        *(
            engine._tokenize([systems["alpha"], ChatMessage(role="user", content=c)])
            for c in ("pwd", "ls")
        )
    )
    second = stats["a2", "ls"]
    assert shared > 300  # the system turn and more
    assert second.reused_prompt_tokens == shared
    assert second.evaluated_prompt_tokens == second.prompt_tokens - shared < 20
    assert not second.restored_snapshot  # a copy of another episode's state, not its own
    assert engine.counters.extra["cache_forks"] == 1
    again = stats["a1", "whoami"]
    assert again.restored_snapshot and again.reused_prompt_tokens >= shared


async def test_a_server_of_several_worlds_warms_each_up_for_its_first_episode():
    """Every world's prompt prefix is evaluated at start and kept under a key of its own, so
    the first episode of each world evaluates only its own action, not the first world's
    whole prefix again because a later world's warm-up took the live state (issue 47)."""
    engine = small_engine(batch_slots=1)
    catalogue = Catalogue([load_domain("terminal"), load_domain("os")])
    simulator = WorldSimulator(catalogue, engine, options=SimulatorOptions(warm_up_prompts=True))
    await simulator.warm_up()
    try:
        for episode, tool, arguments in [
            ("t1", "run_command", {"command": "pwd"}),
            ("o1", "list_allowed_directories", {}),
        ]:
            served = next(t for t in catalogue if t.spec.name == tool)
            await simulator.call(episode, served, arguments)
            [found] = simulator.episodes.find(episode)
            stats = found.records[-1].stats
            assert stats is not None
            assert stats.reused_prompt_tokens > 300, (tool, stats)
            assert stats.evaluated_prompt_tokens < 40, (tool, stats)
    finally:
        await engine.aclose()


async def test_a_snapshot_budget_too_small_evicts_and_still_answers():
    engine = small_engine(kv_snapshot_mb=0)
    simulator, server = make_server(engine)
    async with Client(server) as client:
        for episode in ("a", "b", "a"):
            result = await client.call_tool(
                "run_command", {"command": "pwd"}, meta={EPISODE_META_KEY: episode}
            )
            assert result.is_error is False
    assert engine.counters.snapshot_restores == 0
    third = {e.episode_id: e for e in simulator.episodes.all()}["a"].records[1]
    assert not third.stats.restored_snapshot  # re-evaluated: correct, just slower


async def test_cancelling_the_control_stops_generation_promptly(small_model_engine):
    control = GenerationControl()
    seen = []

    def on_token(n: int) -> None:
        seen.append(n)
        if n == 10:
            control.cancel()

    control.on_token = on_token
    request = GenerationRequest(messages=COUNTING, max_tokens=600)
    result = await small_model_engine.generate(request, control)
    assert result.finish_reason == "cancelled"
    assert result.stats.completion_tokens == 10


async def test_a_cancelled_mcp_request_stops_its_generation_and_the_server_goes_on(tmp_path):
    engine = small_engine()
    domain = tmp_path / "slow.yaml"
    # A world whose every answer is long, so the call is still generating when cancelled.
    domain.write_text(
        (Path(__file__).parent / "data" / "tiny_domain.yaml")
        .read_text()
        .replace("max_tokens: 24", "max_tokens: 3000")
        .replace(
            "You are a Linux bash terminal.",
            "Whatever the command, write the numbers from 1 to 5000, separated by commas.",
        )
        .split("demonstrations:")[0]
    )
    simulator, server = make_server(engine, domain)
    async with Client(server, mode="legacy") as client:
        with anyio.move_on_after(1.5) as scope:
            await client.call_tool("run_command", {"command": "seq 1 100000"})
        assert scope.cancelled_caught
        # The worker notices the cancel flag at its next token and leaves the model.
        deadline = time.monotonic() + 10
        while engine._model_lock.locked() and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert not engine._model_lock.locked()
        generated = engine.counters.completion_tokens
        assert generated < 3000
        result = await client.call_tool("read_file", {"path": "/etc/hostname"})
        assert result.is_error is False
        (episode,) = simulator.episodes.all()
    assert [r.source for r in episode.records] == ["cancelled", "model"]
    assert len(episode.turns) == 1  # the cancelled call left no turn


async def test_a_missing_model_file_is_a_clear_error_for_every_call(tmp_path):
    engine = LlamaCppEngine(LlamaCppOptions(model=str(tmp_path / "nope.gguf"), threads=2))
    _, server = make_server(engine)
    async with Client(server) as client:
        listed = await client.list_tools()  # listing never waits for the model
        assert listed.tools
        result = await client.call_tool("run_command", {"command": "ls"})
    assert result.is_error is True
    assert "model file not found" in text_of(result)
    assert "nope.gguf" in text_of(result)


async def test_a_file_that_is_not_a_gguf_model_is_a_clear_error(tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a model")
    engine = LlamaCppEngine(LlamaCppOptions(model=str(bogus), threads=2))
    with pytest.raises(EngineError, match="could not load the model"):
        await engine.count_tokens(COUNTING)


async def test_a_call_renders_and_tokenizes_its_prompt_once(small_model_engine):
    simulator, _ = make_server(small_model_engine)
    await small_model_engine.start()
    calls = []
    tokenize = small_model_engine._render_and_tokenize
    small_model_engine._render_and_tokenize = lambda messages: calls.append(1) or tokenize(messages)
    tool = simulator.catalogue.get("run_command")
    async with anyio.create_task_group() as tg:  # concurrent episodes interleave their calls
        for episode in ("a", "b", "c"):
            tg.start_soon(simulator.call, episode, tool, {"command": f"echo {episode}"})
    # each prompt counted for the context window, then generated from: tokenized once
    assert len(calls) == 3


def test_stop_strings_are_found_from_the_newest_tokens():
    from aw_mcp.engines.decoding import StopStrings

    decoded = []

    def detokenize(tokens):  # one character a token; records how much was decoded
        decoded.append(len(tokens))
        return "".join(chr(t) for t in tokens)

    stops = StopStrings(["<|im_end|>", "###", ""], detokenize)
    long_answer = [ord("x")] * 5000
    assert stops.cut(long_answer) is None
    assert decoded == [len("<|im_end|>") + 8]  # only the tail was decoded
    answer = [ord(c) for c in "é" * 3000 + "done<|im_end|>"]
    assert stops.cut(answer) == "é" * 3000 + "done"
    assert stops.cut([ord(c) for c in "a ### b ### c"]) == "a "  # the earliest occurrence


async def test_a_prompt_the_chat_template_refuses_is_a_clear_engine_error(small_model_engine):
    from aw_mcp.engines.chat_format import ChatRenderer

    await small_model_engine.start()
    small_model_engine._renderer = ChatRenderer(
        template="{{ raise_exception('roles must alternate') }}"
    )
    with pytest.raises(EngineError, match="could not render or tokenize the prompt: roles must"):
        await small_model_engine.count_tokens(COUNTING)
