"""`aw-mcp serve --replay DIR`: recorded observations while an episode follows a recording,
then the model or a clear error. Through real MCP clients (in memory and a stdio subprocess)."""

from __future__ import annotations

import os
import sys

import pytest
from mcp import Client, StdioServerParameters

from aw_mcp.cli import build_parser
from aw_mcp.commands.flags import settings_from_namespace
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import small_engine
from tests.helpers import TINY_DOMAIN, text_of

pytestmark = pytest.mark.anyio

CALLS = [
    ("run_command", {"command": "pwd"}),
    ("read_file", {"path": "notes.txt", "encoding": "utf-8"}),
    ("run_command", {"command": "ls"}),
]


def _numbered(request) -> str:
    return f"recorded answer {len(request.messages)}"


async def _call_all(server, calls, episode="ep"):
    async with Client(server) as client:
        return [
            await client.call_tool(tool, args, meta={EPISODE_META_KEY: episode})
            for tool, args in calls
        ]


async def _record(tmp_path):
    """One episode recorded with --record-dir (the fake engine answers)."""
    records = tmp_path / "records"
    settings = ServeSettings(simulator=[str(TINY_DOMAIN)], record_dir=records)
    simulator = build_simulator(settings, engine=FakeEngine(_numbered))
    results = await _call_all(build_server(simulator), CALLS, episode="recorded")
    return records, [text_of(r) for r in results]


def _replaying(records, miss, engine):
    settings = ServeSettings(simulator=[str(TINY_DOMAIN)], replay=records, replay_miss=miss)
    simulator = build_simulator(settings, engine=engine)
    return simulator, build_server(simulator)


async def test_a_recorded_episode_replays_identically_without_the_model(tmp_path):
    records, recorded = await _record(tmp_path)
    assert len(set(recorded)) == 3
    never = FakeEngine(fail_with="the model must not be called")
    simulator, server = _replaying(records, "error", never)
    # Same calls; the read_file arguments in another key order are the same call.
    reordered = [*CALLS]
    reordered[1] = ("read_file", {"encoding": "utf-8", "path": "notes.txt"})
    results = await _call_all(server, reordered)
    assert [text_of(r) for r in results] == recorded
    assert not any(r.is_error for r in results)
    assert never.requests == []
    assert [r.source for r in simulator.episodes.all()[0].records] == ["replay"] * 3


async def test_a_mismatch_names_the_call_and_what_the_recordings_expected(tmp_path):
    records, recorded = await _record(tmp_path)
    never = FakeEngine(fail_with="the model must not be called")
    simulator, server = _replaying(records, "error", never)
    calls = [CALLS[0], ("run_command", {"command": "ls -a"}), CALLS[1]]
    first, wrong, back_on_track = await _call_all(server, calls)
    assert text_of(first) == recorded[0]
    assert wrong.is_error
    assert text_of(wrong) == (
        'aw-mcp replay: call 2 (run_command {"command":"ls -a"}) matches no recording: '
        'recordings continue with: read_file {"encoding":"utf-8","path":"notes.txt"}'
    )
    # The refused call did not enter the history: the recorded next call still matches.
    assert text_of(back_on_track) == recorded[1]
    assert [r.source for r in simulator.episodes.all()[0].records] == [
        "replay",
        "replay-miss",
        "replay",
    ]
    assert never.requests == []
    past_the_end = await _call_all(server, [*CALLS, ("run_command", {"command": "exit"})], "b")
    assert "every matching recording ends before it" in text_of(past_the_end[-1])


async def test_after_a_mismatch_the_model_answers_the_rest_of_the_episode(tmp_path):
    records, recorded = await _record(tmp_path)
    model = FakeEngine("from the model")
    simulator, server = _replaying(records, "model", model)
    calls = [CALLS[0], ("run_command", {"command": "whoami"}), CALLS[1]]
    results = await _call_all(server, calls)
    assert [text_of(r) for r in results] == [recorded[0], "from the model", "from the model"]
    assert [r.source for r in simulator.episodes.all()[0].records] == [
        "replay",
        "model",
        "model",
    ]
    # The model saw the replayed observation as history.
    assert recorded[0] in model.last_prompt


async def test_the_embedded_model_answers_a_divergent_call(tmp_path):
    records, recorded = await _record(tmp_path)
    simulator, server = _replaying(records, "model", small_engine())
    results = await _call_all(server, [CALLS[0], ("run_command", {"command": "echo hi"})])
    assert text_of(results[0]) == recorded[0]
    assert results[1].is_error is False and text_of(results[1]).strip()
    assert [r.source for r in simulator.episodes.all()[0].records] == ["replay", "model"]


async def test_serve_flags_over_stdio(tmp_path):
    records, recorded = await _record(tmp_path)
    args = build_parser().parse_args(["serve", "--replay", str(records), "--replay-miss", "error"])
    settings = settings_from_namespace(ServeSettings, args)
    assert settings.replay == records and settings.replay_miss == "error"
    serve = ["-m", "aw_mcp", "serve", "--simulator", str(TINY_DOMAIN), "--threads", "1"]
    params = StdioServerParameters(
        command=sys.executable,
        args=[*serve, "--n-ctx", "2048", "--replay", str(records), "--replay-miss", "error"],
        env={**os.environ, "AW_MCP_LOG_LEVEL": "WARNING"},
    )
    async with Client(params) as client:
        first = await client.call_tool("run_command", {"command": "pwd"})
        wrong = await client.call_tool("run_command", {"command": "rm -rf /"})
    assert text_of(first) == recorded[0]
    assert wrong.is_error and "call 2" in text_of(wrong)


def test_a_missing_replay_folder_is_a_clear_error(tmp_path):
    from aw_mcp.cli import main

    missing = tmp_path / "nothing"
    with pytest.raises(ValueError, match="--replay: no record directory at"):
        build_simulator(ServeSettings(replay=missing), engine=FakeEngine())
    assert main(["serve", "--replay", str(missing)]) == 2
