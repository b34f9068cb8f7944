"""Reading record directories back (the one reader replay, export, eval and training share)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aw_mcp.files.yaml import DataFileError
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.reader import load_record_dir, read_record_file
from aw_mcp.records.sink import RecordSink


def _record(index: int, episode: str, source: str = "real", **extra) -> CallRecord:
    return CallRecord(
        index=index,
        episode=episode,
        domain="terminal",
        tool="run_command",
        arguments={"command": f"echo {index}"},
        observation=f"{index}\n[exit code: 0]",
        is_error=False,
        source=source,
        started_at=0.0,
        seconds=0.0,
        **extra,
    )


def test_sink_output_reads_back_in_call_order_with_history_turns(tmp_path: Path):
    sink = RecordSink(tmp_path)
    for record in [_record(1, "a"), _record(2, "a", "invalid-arguments"), _record(3, "a")]:
        sink.write(record)
    sink.write(_record(1, "b", "model"))
    episodes = {e.episode: e for e in load_record_dir(tmp_path)}
    assert sorted(episodes) == ["a", "b"]
    assert [r.index for r in episodes["a"].records] == [1, 2, 3]
    # The refused call never entered the history the world model saw.
    assert [t.index for t in episodes["a"].turns()] == [1, 3]
    assert episodes["a"].turns()[1].observation == "3\n[exit code: 0]"


def test_bad_line_names_file_and_line(tmp_path: Path):
    path = tmp_path / "x.jsonl"
    good = json.dumps(_record(1, "x").model_dump(mode="json"))
    path.write_text(good + "\n" + '{"index": "one"}\n', encoding="utf-8")
    with pytest.raises(DataFileError) as info:
        read_record_file(path)
    assert f"{path}:2:" in str(info.value)


def test_a_fault_error_reads_back_as_a_request_that_never_reached_the_world(tmp_path: Path):
    sink = RecordSink(tmp_path)
    sink.write(_record(1, "a", "model"))
    sink.write(_record(2, "a", "fault").model_copy(update={"is_error": True}))  # a 502
    sink.write(_record(3, "a", "fault"))  # a canned result a fault rule gave
    [episode] = load_record_dir(tmp_path)
    assert [t.reached_world for t in episode.turns()] == [True, False, True]


def test_each_episode_is_trained_in_its_own_world_else_its_folders(tmp_path):
    """aw-mcp train renders an episode with its worlds/<episode>.yaml, else the record
    folder's world.yaml; a folder with neither leaves the domain's world alone."""
    from aw_mcp.records.folder import record_dir_worlds
    from aw_mcp.records.reader import RecordedEpisode

    (tmp_path / "worlds").mkdir()
    (tmp_path / "worlds" / "own.yaml").write_text("facts: {user: ops}\n")
    (tmp_path / "world.yaml").write_text("facts: {user: dev}\n")
    episodes = [RecordedEpisode("own", "terminal"), RecordedEpisode("plain", "terminal")]
    worlds = record_dir_worlds(tmp_path, episodes)
    assert {e: w.facts["user"] for e, w in worlds.items()} == {"own": "ops", "plain": "dev"}
    bare = tmp_path / "bare"
    bare.mkdir()
    assert record_dir_worlds(bare, episodes) == {}
