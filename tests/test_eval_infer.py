"""`aw-mcp eval infer`: teacher-forced predictions of AgentWorldBench-format samples.

Plumbing (prompt shape, resume, failures) with the FakeEngine stand-in; one small run of the
real embedded model through the command line."""

from __future__ import annotations

import json

import pytest

from aw_mcp.cli import main
from aw_mcp.errors import EngineError
from aw_mcp.evaluation.infer import InferOptions, infer
from aw_mcp.evaluation.samples import load_bench_dir
from aw_mcp.files.yaml import DataFileError
from aw_mcp.testing import FakeEngine
from tests.eval_support import episode_samples, write_jsonl

pytestmark = pytest.mark.anyio
ADDED = {"gen", "reference", "domain", "family"}


def _bench(tmp_path):
    data = tmp_path / "bench"
    data.mkdir()
    terminal = episode_samples(
        "terminal",
        "t",
        [
            ("run_command", {"command": "pwd"}, "/home/user\n[exit code: 0]"),
            ("run_command", {"command": "ls"}, "notes.txt\n[exit code: 0]"),
            ("run_command", {"command": "cat notes.txt"}, "hi\n[exit code: 0]"),
        ],
        ["", "", ""],
    )
    for row in terminal:
        del row["gen"]
    write_jsonl(data / "terminal_test.jsonl", terminal)
    return data, terminal


def _rows(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


async def test_each_turn_sees_its_real_history_and_rows_keep_every_input_field(tmp_path):
    data, inputs = _bench(tmp_path)
    engine = FakeEngine(
        lambda r: f"<predicted_observation>{len(r.messages)}</predicted_observation>"
    )
    out = tmp_path / "out"
    await infer(engine, load_bench_dir(data), out, InferOptions(jobs=2, quiet=True))
    rows = _rows(out)
    assert [r["id"] for r in rows] == ["t-1", "t-2", "t-3"]
    for row, given in zip(rows, inputs, strict=True):
        assert {k: v for k, v in row.items() if k not in ADDED} == given
    # system + (k-1) real pairs + the current action
    assert [r["gen"] for r in rows] == [
        f"<predicted_observation>{n}</predicted_observation>" for n in (2, 4, 6)
    ]
    third = next(r for r in engine.requests if len(r.messages) == 6).messages
    assert third[0].role == "system" and third[0].content == "You simulate terminal."
    assert "notes.txt\n[exit code: 0]" in third[4].content  # the real turn-2 observation
    assert third[5].content == inputs[2]["current_prompt"]
    assert rows[2]["reference"] == "hi\n[exit code: 0]" and rows[2]["family"] == "cat"
    # One KV state per episode for local engines: every turn of the episode shares the key.
    (key,) = {r.cache_key for r in engine.requests}
    other = load_bench_dir(data)[0].model_copy(update={"prompt": ["another episode"]})
    assert key is not None and other.episode_key != key


async def test_resume_skips_done_samples_and_retries_failed_ones(tmp_path):
    data, _ = _bench(tmp_path)
    out = tmp_path / "out"

    def flaky(request):
        if "ls" in request.messages[-1].content:
            raise EngineError("server went away")
        return "ok"

    first = FakeEngine(flaky)
    await infer(first, load_bench_dir(data), out, InferOptions(quiet=True))
    failed = {r["id"]: r for r in _rows(out)}["t-2"]
    assert failed["gen"] == "" and "server went away" in failed["error"]
    second = FakeEngine("fixed")
    await infer(second, load_bench_dir(data), out, InferOptions(quiet=True))
    assert len(second.requests) == 1  # only the failed sample ran again
    rows = _rows(out)
    assert [(r["id"], r["gen"], "error" in r) for r in rows] == [
        ("t-1", "ok", False),
        ("t-2", "fixed", False),
        ("t-3", "ok", False),
    ]


async def test_a_prompt_over_the_context_window_is_a_clear_error_row(tmp_path):
    data, _ = _bench(tmp_path)
    out = tmp_path / "out"
    await infer(
        FakeEngine("x", context_window=40),
        load_bench_dir(data),
        out,
        InferOptions(max_tokens=16, quiet=True),
    )
    assert all("context window" in r["error"] for r in _rows(out))


def test_bad_sample_line_names_file_and_line(tmp_path):
    data = tmp_path / "bench"
    data.mkdir()
    (data / "web_test.jsonl").write_text('{"task": "web", "id": 1}\n', encoding="utf-8")
    with pytest.raises(DataFileError, match=r"web_test.jsonl:1: prompt: Field required"):
        load_bench_dir(data)


def test_real_embedded_model_through_the_command_line(tmp_path, capsys):
    data, _ = _bench(tmp_path)
    out = tmp_path / "out"
    args = ["--limit", "2", "--max-tokens", "16", "--threads", "1", "--n-ctx", "2048", "--quiet"]
    assert main(["eval", "infer", "--data-dir", str(data), "--output-dir", str(out), *args]) == 0
    rows = _rows(out)
    assert [r["id"] for r in rows] == ["t-1", "t-2"]
    assert all(r["gen"].strip() and "error" not in r for r in rows)
    capsys.readouterr()
    assert main(["eval", "score", "--predictions", str(out / "predictions.jsonl"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["domains"]["terminal"]["all"]["n"] == 2
