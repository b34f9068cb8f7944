"""Many episodes at once: fair turns, no cross-talk, KV state swapped instead of recomputed."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from aw_mcp.engines.scheduler import FairScheduler
from aw_mcp.records.sink import record_file_name
from aw_mcp.server.app import build_server
from aw_mcp.testing import RecordingEngine, free_port, serving_http
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import small_engine
from tests.engine_support import TEST_THREADS, running_process, write_tiny_domain

EPISODES = 16
STEPS = 3
TAG = re.compile(r"ep(\d+)-step\d+")


def _command(episode: int, step: int) -> str:
    return f"echo ep{episode}-step{step}"


# -- the fair queue ---------------------------------------------------------------------------


async def _hold(scheduler: FairScheduler, tg) -> anyio.Event:
    """Take the scheduler's turn in a background task until the returned event is set."""
    release = anyio.Event()

    async def holder() -> None:
        async with scheduler.turn("holder"):
            await release.wait()

    tg.start_soon(holder)
    await anyio.sleep(0.01)
    return release


@pytest.mark.anyio
async def test_turns_go_round_robin_across_episodes():
    scheduler = FairScheduler()
    order: list[str] = []

    async def request(key: str, label: str) -> None:
        async with scheduler.turn(key):
            order.append(label)
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        release = await _hold(scheduler, tg)
        # Episode A floods the queue before B and C ask once each.
        for label, key in [("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B"), ("c1", "C")]:
            tg.start_soon(request, key, label)
            await anyio.sleep(0.01)  # fixes the arrival order
        assert scheduler.waiting == 5
        release.set()
    assert order == ["a1", "b1", "c1", "a2", "a3"]
    assert scheduler.max_waiting == 5
    assert not scheduler.busy and scheduler.waiting == 0


@pytest.mark.anyio
async def test_a_cancelled_waiter_leaves_the_queue_and_loses_no_turn():
    scheduler = FairScheduler()
    served: list[str] = []

    async def request(key: str) -> None:
        async with scheduler.turn(key):
            served.append(key)

    async with anyio.create_task_group() as tg:
        release = await _hold(scheduler, tg)
        with anyio.move_on_after(0.05):
            await request("gives-up")  # waits behind the holder, then is cancelled
        tg.start_soon(request, "stays")
        await anyio.sleep(0.01)
        assert scheduler.waiting == 1
        release.set()
    assert served == ["stays"]
    assert not scheduler.busy


# -- 16 episodes over Streamable HTTP on the embedded model ----------------------------------


async def _run_episode(url: str, episode: int, observations: dict[int, list[str]]) -> None:
    headers = {"Aw-Episode-Id": f"ep-{episode}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(180.0)) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        for step in range(1, STEPS + 1):
            result = await client.call_tool("run_command", {"command": _command(episode, step)})
            assert not result.is_error, result.content[0].text
            observations.setdefault(episode, []).append(result.content[0].text)


@pytest.mark.anyio
@pytest.mark.slow
async def test_sixteen_concurrent_episodes_over_http(tmp_path):
    # reevaluate_below=0: a returning episode is always restored from its snapshot (by default
    # one that differs from a resident sequence in few tokens re-evaluates them instead).
    engine = small_engine(threads=TEST_THREADS, batch_slots=8, reevaluate_below=0)
    recorder = RecordingEngine(engine)
    settings = ServeSettings(simulator=[str(write_tiny_domain(tmp_path))])
    simulator = build_simulator(settings, engine=recorder)
    server = build_server(simulator)
    observations: dict[int, list[str]] = {}
    async with serving_http(server, free_port()) as url, anyio.create_task_group() as tg:
        for episode in range(EPISODES):
            tg.start_soon(_run_episode, url, episode, observations)

    # Every episode has its own complete history, in order, and nothing else.
    episodes = {e.episode_id: e for e in simulator.episodes.all()}
    assert sorted(episodes) == sorted(f"ep-{i}" for i in range(EPISODES))
    for i in range(EPISODES):
        episode = episodes[f"ep-{i}"]
        commands = [t.action.arguments["command"] for t in episode.turns]
        assert commands == [_command(i, s) for s in range(1, STEPS + 1)]
        assert [t.observation for t in episode.turns] == observations[i]

    # No cross-talk in what the model saw: each prompt holds its own episode's actions and
    # observations, in order, and nothing of another episode.
    assert len(recorder.requests) == EPISODES * STEPS
    for request in recorder.requests:
        owner = episodes[request.cache_key.split("\x1f")[0]]
        actions = [m.content for m in request.messages if m.role == "user"]
        answers = [m.content for m in request.messages if m.role == "assistant"]
        assert {f"ep-{n}" for a in actions for n in TAG.findall(a)} == {owner.episode_id}
        assert answers == [t.observation for t in owner.turns[: len(answers)]]
        assert len(actions) == len(answers) + 1

    # The model really was shared: episodes decoded together, as many per step as there are
    # sequences; with more episodes than sequences, idle ones were swapped out to KV
    # snapshots and back instead of evaluating each history again.
    extra = engine.counters.extra
    assert extra["max_step_sequences"] == engine.options.batch_slots < EPISODES
    assert extra["batched_steps"] > 0
    assert extra["decode_steps"] < engine.counters.completion_tokens
    assert engine.counters.snapshot_restores >= 1
    later = [r.stats for e in episodes.values() for r in e.records[1:]]
    for stats in later:
        assert stats.reused_prompt_tokens >= stats.prompt_tokens - 40
        assert stats.evaluated_prompt_tokens <= 40  # the new turn only, never the history
    await engine.aclose()  # its batch loop's thread and its model


# -- the command line, with a pool of two instances -------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
async def test_cli_http_server_with_two_instances(tmp_path):
    port = free_port()
    records = tmp_path / "records"
    args = [
        sys.executable,
        "-m",
        "aw_mcp",
        "serve",
        "--transport",
        "http",
        "--port",
        str(port),
        "--simulator",
        str(write_tiny_domain(tmp_path)),
        "--instances",
        "2",
        "--threads",
        "2",
        "--n-ctx",
        "2048",
        "--record-dir",
        str(records),
        "--log-level",
        "WARNING",
    ]
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    url = f"http://127.0.0.1:{port}/mcp"
    observations: dict[int, list[str]] = {}
    with running_process(args, url, env=env):
        async with anyio.create_task_group() as tg:
            for episode in range(4):
                tg.start_soon(_run_episode, url, episode, observations)
    for episode in range(4):
        lines = (records / record_file_name(f"ep-{episode}")).read_text().splitlines()
        calls = [json.loads(line) for line in lines]
        assert [c["arguments"]["command"] for c in calls] == [
            _command(episode, s) for s in range(1, STEPS + 1)
        ]
        assert [c["observation"] for c in calls] == observations[episode]
        assert all(c["source"] == "model" for c in calls)
        # Each instance keeps its episodes' KV state between steps.
        for call in calls[1:]:
            assert call["stats"]["evaluated_prompt_tokens"] <= 40
