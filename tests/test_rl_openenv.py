"""Rollouts from a real RL framework: OpenEnv (openenv-core from PyPI) runs 16 concurrent
rollouts against `aw-mcp serve --transport http` with a fault scenario on, each rollout its
own aw-mcp episode, a scripted policy and a reward from the episode (examples/openenv_rollouts.py).

OpenEnv lives in its own virtual environment (it brings gradio and fastmcp, which aw-mcp does
not need): ``AW_MCP_OPENENV_PYTHON`` names its python; ``.ci/run`` installs it, and without it
this test is skipped. The world model is a fake OpenAI-compatible server (plumbing only: it
prints ``hello`` for ``cat`` and ``ok`` otherwise), behind aw-mcp's real OpenAI engine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from aw_mcp.records.reader import load_record_dir
from tests.eval_support import fake_openai_server
from tests.http_support import start_http_server

REPO = Path(__file__).resolve().parents[1]
OPENENV_PYTHON = os.environ.get("AW_MCP_OPENENV_PYTHON", "")
ROLLOUTS = 16
EXAMPLE = REPO / "examples" / "openenv_rollouts.py"

pytestmark = [
    pytest.mark.external,
    pytest.mark.skipif(
        not Path(OPENENV_PYTHON or "/nonexistent").is_file(),
        reason="OpenEnv is not installed: set AW_MCP_OPENENV_PYTHON to the python of a venv with "
        "openenv-core==0.3.0 (.ci/run installs one)",
    ),
]


def fake_world_model(messages: list[dict[str, str]]) -> str:
    return "hello" if "cat notes.txt" in messages[-1]["content"] else "ok"


def test_sixteen_concurrent_openenv_rollouts_with_faults_kept_apart(tmp_path: Path):
    records = tmp_path / "records"
    with (
        fake_openai_server(fake_world_model) as (base_url, _seen),
        (tmp_path / "server.log").open("w") as log,
    ):
        server, url = start_http_server(
            log,
            "--simulator",
            "terminal",
            "--engine",
            "openai",
            "--base-url",
            base_url,
            "--faults",
            str(REPO / "examples" / "rl-faults.yaml"),
            "--record-dir",
            str(records),
        )
        try:
            done = subprocess.run(
                [OPENENV_PYTHON, str(EXAMPLE), "--aw-url", url, "--rollouts", str(ROLLOUTS)],
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            server.terminate()
            server.wait(timeout=20)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {r["episode"]: r for r in json.loads(done.stdout)["rollouts"]}
    assert len(results) == ROLLOUTS

    episodes = {e.episode: e for e in load_record_dir(records)}
    assert set(episodes) == set(results)  # one episode per rollout, nothing else
    assert len({e.path for e in episodes.values()}) == ROLLOUTS  # each in its own file
    faulted = 0
    for episode_id, result in results.items():
        calls = episodes[episode_id].records
        # No cross-talk: the episode's record is exactly this rollout's calls, in order.
        assert [r.arguments["command"] for r in calls] == [s["command"] for s in result["steps"]]
        assert [r.is_error for r in calls] == [s["failed"] for s in result["steps"]]
        assert [r.index for r in calls] == list(range(1, len(calls) + 1))
        assert result["reward"] == pytest.approx(sum(not r.is_error for r in calls) / len(calls))
        faulted += any(r.faults for r in calls)
    assert 0 < faulted < ROLLOUTS  # the scenario fired in some rollouts, not all
    assert len({r["reward"] for r in results.values()}) > 1
