"""Replicas behind a real load balancer: HAProxy (Debian's package) hashing Aw-Episode-Id onto
two `aw-mcp serve --transport http` replicas (examples/haproxy.cfg, as docs/deployment.md
gives it), one shared record dir, one OpenAI-compatible model server. 32 episodes run
concurrently; one replica is killed mid-run and its episodes go on on the other, rebuilt from
their records, with nothing lost and no cross-talk.

The model server is a fake OpenAI-compatible one in the 32-episode test (plumbing only: it
answers from the prompt alone, so the test can check every answer and prompt), and
llama-cpp-python's server with the real embedded model in a smaller one. Skipped when haproxy
is not installed (.ci/run installs it)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from aw_mcp.records.reader import RecordedEpisode, load_record_dir
from aw_mcp.server.episode_identity import EPISODE_HEADER
from aw_mcp.testing import small_model_path
from tests.engine_support import llama_cpp_server
from tests.eval_support import fake_openai_server
from tests.helpers import TINY_DOMAIN
from tests.http_support import free_port, start_http_server

REPO = Path(__file__).resolve().parents[1]
HAPROXY_CFG = REPO / "examples" / "haproxy.cfg"
EPISODES = 32

pytestmark = [
    pytest.mark.external,
    pytest.mark.skipif(
        shutil.which("haproxy") is None,
        reason="haproxy is not installed (apt-get install haproxy; .ci/run installs it)",
    ),
]


def fake_world_model(messages: list[dict[str, str]]) -> str:
    """The command's words back, as `echo` prints them (a function of the prompt only)."""
    found = re.findall(r'"command": "echo ([^"]*)"', messages[-1]["content"])
    return found[-1] if found else "ok"


def command(episode: str, step: int) -> str:
    return f"echo {episode} step {step}"


@contextmanager
def haproxy(replicas: list[str], log: Path) -> Iterator[str]:
    """HAProxy with the documented configuration; yields the balancer's /mcp URL."""
    bind = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "AW_LB_BIND": bind}
    env.update({f"AW_REPLICA_{i}": r for i, r in enumerate(replicas, start=1)})
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["haproxy", "-db", "-f", str(HAPROXY_CFG)], env=env, stdout=out, stderr=out
        )
        try:
            host, port = bind.split(":")
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection((host, int(port)), timeout=0.5).close()
                    break
                except OSError:
                    assert proc.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, "haproxy did not start"
                    time.sleep(0.1)
            yield f"http://{bind}/mcp"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


async def run_calls(url: str, episode: str, steps: range) -> list[str]:
    """One phase of an episode: a client (as a rollout worker reconnecting) and its calls."""
    http = httpx2.AsyncClient(headers={EPISODE_HEADER: episode}, timeout=60)
    answers = []
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        for step in steps:
            result = await client.call_tool("run_command", {"command": command(episode, step)})
            assert not result.is_error, result
            answers.append(result.content[0].text if result.content else "")
    return answers


async def all_episodes(url: str, count: int, steps: range) -> dict[str, list[str]]:
    answers: dict[str, list[str]] = {}

    async def one(episode: str) -> None:
        answers[episode] = await run_calls(url, episode, steps)

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, f"ep-{i:02d}")
    return answers


@dataclass
class ReplicaRun:
    answers: dict[str, list[str]]  # per episode, every call's answer (both phases)
    records: dict[str, RecordedEpisode]
    first_log: str  # the killed replica's
    survivor_log: str


def run_with_a_replica_killed(
    tmp_path: Path, model_url: str, serve: list[str], episodes: int, before: int, after: int
) -> ReplicaRun:
    """Two replicas behind HAProxy; ``episodes`` concurrent episodes make ``before`` calls,
    replica 1 is killed, then they make ``after`` more."""
    records = tmp_path / "records"
    serve = [*serve, "--engine", "openai", "--base-url", model_url, "--record-dir", str(records)]
    logs = [(tmp_path / f"replica{i}.log").open("w") for i in (1, 2)]
    procs: list[Any] = []
    try:
        for log in logs:
            proc, url = start_http_server(log, *serve)
            procs.append((proc, url.removeprefix("http://").removesuffix("/mcp")))
        with haproxy([address for _, address in procs], tmp_path / "haproxy.log") as lb:
            first = anyio.run(all_episodes, lb, episodes, range(1, before + 1))
            procs[0][0].kill()  # replica 1 dies without a word; no episode of it ended
            procs[0][0].wait()
            second = anyio.run(all_episodes, lb, episodes, range(before + 1, before + after + 1))
    finally:
        for proc, _ in procs:
            proc.kill()
            proc.wait()
        for log in logs:
            log.close()
    return ReplicaRun(
        answers={e: first[e] + second[e] for e in first},
        records={e.episode: e for e in load_record_dir(records)},
        first_log=(tmp_path / "replica1.log").read_text(),
        survivor_log=(tmp_path / "replica2.log").read_text(),
    )


def check_nothing_lost(run: ReplicaRun, episodes: int, total: int) -> None:
    """Each record is exactly its episode's calls, indices 1..N across the failover, and the
    survivor resumed exactly the episodes the killed replica held."""
    assert len(run.records) == episodes
    for episode_id, episode in run.records.items():
        assert [r.index for r in episode.records] == list(range(1, total + 1))
        assert [r.arguments["command"] for r in episode.records] == [
            command(episode_id, k) for k in range(1, total + 1)
        ]
        assert [r.observation for r in episode.records] == run.answers[episode_id]
    resumed = set(re.findall(r"episode '(ep-\d\d)' \(\w+\) resumed", run.survivor_log))
    assert 0 < len(resumed) < episodes
    assert resumed == set(re.findall(r"new episode '(ep-\d\d)'", run.first_log))


def test_two_replicas_32_episodes_one_replica_killed(tmp_path: Path):
    with fake_openai_server(fake_world_model) as (base_url, seen):
        run = run_with_a_replica_killed(
            tmp_path, base_url, ["--simulator", "terminal"], EPISODES, 3, 3
        )
    check_nothing_lost(run, EPISODES, 6)
    for episode_id, answers in run.answers.items():
        assert answers == [f"{episode_id} step {k}" for k in range(1, 7)]
    # The world model's prompt for each episode's last call holds that episode's whole
    # history (across the failover) and nothing of any other episode.
    last_prompts = {}
    for request in seen:
        text = "\n".join(m["content"] for m in request["messages"])
        [episode_id] = set(re.findall(r"echo (ep-\d\d) step", request["messages"][-1]["content"]))
        last_prompts[episode_id] = text
    assert len(last_prompts) == EPISODES
    for episode_id, text in last_prompts.items():
        assert set(re.findall(r"echo (ep-\d\d) step", text)) == {episode_id}
        assert all(command(episode_id, k) in text for k in range(1, 7))


def test_replicas_share_llama_cpp_python_s_model_server(tmp_path: Path):
    """The same deployment with the real embedded model behind llama-cpp-python's
    OpenAI-compatible server (as .ci/run starts it); fewer episodes: it answers one at a time."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] (the test extra)")
    with llama_cpp_server(small_model_path()) as base_url:
        run = run_with_a_replica_killed(
            tmp_path, base_url, ["--simulator", str(TINY_DOMAIN)], 4, 1, 1
        )
    check_nothing_lost(run, 4, 2)
