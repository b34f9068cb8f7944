"""Many episodes at once over Streamable HTTP, and a server killed with SIGKILL mid-run.

Every call is answered by a fault rule (tests/data/answer-every-call.faults.yaml), so what is
tested is the server, its sessions and its records, not the model. Loopback only; every loop
is bounded in count and in time.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from aw_mcp.records.sink import record_file_name
from aw_mcp.server.episode_identity import EPISODE_HEADER
from tests.fuzz_support import ANSWER_EVERY_CALL
from tests.helpers import TINY_DOMAIN, text_of
from tests.http_support import RawHttpSession, http_serve, start_http_server

EPISODES = 100
CALLS = 20
SERVED_BY_FAULTS = ["--simulator", str(TINY_DOMAIN), "--faults", str(ANSWER_EVERY_CALL)]


def command(episode: str, n: int) -> str:
    return f"echo {episode} call {n}"


def read_records(path: Path) -> list[dict]:
    """Every line of a record file, each of which must be a whole JSON object."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_hundred_concurrent_episodes_are_each_recorded_in_order(tmp_path):
    records = tmp_path / "records"
    args = [*SERVED_BY_FAULTS, "--record-dir", str(records), "--log-level", "WARNING"]
    answers: dict[str, list[str]] = {}

    async def run_episode(episode: str) -> None:
        http = httpx2.AsyncClient(headers={EPISODE_HEADER: episode}, timeout=120)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            for n in range(1, CALLS + 1):
                result = await client.call_tool("run_command", {"command": command(episode, n)})
                answers[episode].append(text_of(result))

    with http_serve(tmp_path / "server.log", *args) as url:
        with anyio.fail_after(300):  # 2,000 calls; a few seconds' work, minutes on a busy box
            async with anyio.create_task_group() as tg:
                for e in range(EPISODES):
                    answers[f"load-{e}"] = []
                    tg.start_soon(run_episode, f"load-{e}")

    assert all(texts == ["canned answer"] * CALLS for texts in answers.values())
    assert len(list(records.glob("*.jsonl"))) == EPISODES  # one file per episode, no strays
    for episode in answers:
        lines = read_records(records / record_file_name(episode))
        assert [r["episode"] for r in lines] == [episode] * CALLS  # no cross-talk
        assert [r["index"] for r in lines] == list(range(1, CALLS + 1))
        assert [r["arguments"]["command"] for r in lines] == [
            command(episode, n) for n in range(1, CALLS + 1)
        ]
        assert {r["source"] for r in lines} == {"fault"}


def test_kill_9_mid_run_loses_no_answered_call_and_a_restart_serves_the_same_records(tmp_path):
    records = tmp_path / "records"
    args = [*SERVED_BY_FAULTS, "--record-dir", str(records), "--log-level", "WARNING"]
    workers, calls_before_kill, most_calls_each = 8, 60, 500
    answered: dict[str, list[str]] = {f"crash-{w}": [] for w in range(workers)}
    lock = threading.Lock()
    enough = threading.Event()

    def keep_calling(episode: str, url: str) -> None:
        """Call until the server dies (or the bound is reached); keep what was answered."""
        try:
            session = RawHttpSession(url, headers={EPISODE_HEADER: episode}, timeout=30)
            for n in range(1, most_calls_each + 1):
                session.call_tool(n, "run_command", {"command": command(episode, n)})
                with lock:
                    answered[episode].append(command(episode, n))
                    if sum(map(len, answered.values())) >= calls_before_kill:
                        enough.set()
        except (httpx2.HTTPError, AssertionError, ValueError):
            return  # the server was killed: a call in flight gets no answer

    with (tmp_path / "server.log").open("w") as log:
        proc, url = start_http_server(log, *args)
        try:
            with ThreadPoolExecutor(workers) as pool:
                for episode in answered:
                    pool.submit(keep_calling, episode, url)
                assert enough.wait(timeout=120), "the calls before the kill took over 120 s"
                os.kill(proc.pid, signal.SIGKILL)  # while the workers' calls are in flight
                proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()

    total = sum(map(len, answered.values()))
    assert calls_before_kill <= total < workers * most_calls_each  # killed mid-run
    for episode, commands in answered.items():
        lines = read_records(records / record_file_name(episode))  # every line whole JSON
        recorded = [r["arguments"]["command"] for r in lines]
        # Every answered call is on disk, in order; at most the call in flight is extra.
        assert recorded[: len(commands)] == commands
        assert len(recorded) - len(commands) <= 1

    # A restarted server appends to the same records.
    with http_serve(tmp_path / "restart.log", *args) as url:
        session = RawHttpSession(url, headers={EPISODE_HEADER: "crash-0"})
        result = session.call_tool(1, "run_command", {"command": "echo after restart"})
        session.close()
    assert result["content"][0]["text"] == "canned answer"
    lines = read_records(records / record_file_name("crash-0"))
    assert lines[-1]["arguments"]["command"] == "echo after restart"
    assert [r["arguments"]["command"] for r in lines[: len(answered["crash-0"])]] == answered[
        "crash-0"
    ]
