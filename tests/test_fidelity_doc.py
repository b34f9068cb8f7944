"""Fidelity numbers are data (lab/results/): docs/fidelity.md and README.md show what
`aw-mcp eval publish` renders from them, and `eval score --save-result` writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from aw_mcp.cli import main
from aw_mcp.evaluation.publish import (
    DOC_MARKERS,
    README_MARKERS,
    Share,
    load_result,
    load_results,
    publish,
    render_readme_table,
)
from tests.eval_support import episode_samples, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "lab" / "results"
DOC = ROOT / "docs" / "fidelity.md"
README = ROOT / "README.md"


def _check(results: Path, doc: Path, readme: Path) -> int:
    return main(
        [
            "eval",
            "publish",
            "--results",
            str(results),
            "--doc",
            str(doc),
            "--readme",
            str(readme),
            "--check",
        ]
    )


def test_committed_tables_are_the_published_ones(capsys):
    assert publish(RESULTS, DOC, README, write=False) == [], (
        "docs/fidelity.md or README.md is stale: run aw-mcp eval publish"
    )
    assert _check(RESULTS, DOC, README) == 0
    assert capsys.readouterr().err == ""


def test_readme_shows_the_shipped_default_of_every_readme_set():
    results = load_results(RESULTS)
    shown = [r for r in results if r.readme]
    assert len(shown) >= 8
    table = render_readme_table(results)
    assert len(table.splitlines()) == 2 + len(shown)
    for result in shown:
        assert result.held_out.title in table
        assert sum(row.shipped for row in result.rows) == 1


def _copies(tmp_path: Path) -> tuple[Path, Path]:
    doc, readme = tmp_path / "fidelity.md", tmp_path / "README.md"
    doc.write_text(DOC.read_text(encoding="utf-8"), encoding="utf-8")
    readme.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    return doc, readme


def test_a_changed_number_makes_both_files_stale_and_publish_mends_them(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    for path in RESULTS.iterdir():
        (results / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    shipped = next(p for p in sorted(results.iterdir()) if load_result(p).readme)
    data = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    row = next(r for r in data["rows"] if r.get("shipped"))
    row["metrics"]["similarity"] = 0.123456
    shipped.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    doc, readme = _copies(tmp_path)

    assert _check(results, doc, readme) == 1
    err = capsys.readouterr().err
    assert f"{doc}: stale" in err and f"{readme}: stale" in err

    args = ["eval", "publish", "--results", str(results), "--doc", str(doc)]
    assert main([*args, "--readme", str(readme)]) == 0
    assert "0.123" in readme.read_text(encoding="utf-8")
    assert "0.123" in doc.read_text(encoding="utf-8")
    assert _check(results, doc, readme) == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["rows"][0]["metrics"].update(exact=49.7), "rows[0].metrics.exact"),
        (lambda d: d["rows"][0]["metrics"].update(similarty=0.5), "rows[0].metrics.similarty"),
        (lambda d: d["held_out"].pop("calls"), "held_out.calls"),
        (lambda d: d["rows"][0]["metrics"].update(shown={"n": 9, "of": 7}), "shown"),
    ],
)
def test_a_results_file_with_a_bad_field_is_refused_naming_file_and_field(
    tmp_path, capsys, change, field
):
    results = tmp_path / "results"
    results.mkdir()
    data = {
        "held_out": {"title": "a set", "data": ["data/x"], "episodes": 1, "calls": 3},
        "source": "made by hand for this test",
        "rows": [{"system": "a model", "metrics": {"similarity": 0.5, "exact": 0.25}}],
    }
    change(data)
    bad = results / "010-bad.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    doc, readme = _copies(tmp_path)

    assert _check(results, doc, readme) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and field in err


def test_markers_missing_are_an_error_naming_the_file(tmp_path, capsys):
    doc, readme = _copies(tmp_path)
    readme.write_text("# no table here\n", encoding="utf-8")
    assert _check(RESULTS, doc, readme) == 2
    err = capsys.readouterr().err
    assert str(readme) in err and README_MARKERS[0] in err


# A terminal episode of three calls (one exact, one off by a file name, one empty) and a
# second one of a single call, scored as `eval score` does.
PREDICTIONS = episode_samples(
    "terminal",
    "a",
    [
        ("run_command", {"command": "echo hello"}, "hello\n[exit code: 0]"),
        ("run_command", {"command": "ls"}, "a.txt\n[exit code: 0]"),
        ("run_command", {"command": "cat x"}, "x\n[exit code: 1]"),
    ],
    ["hello\n[exit code: 0]", "b.txt\n[exit code: 0]", ""],
) + episode_samples(
    "terminal",
    "b",
    [("run_command", {"command": "pwd"}, "/home/dev\n[exit code: 0]")],
    ["/home/dev\n[exit code: 0]"],
)


def _score(tmp_path, capsys, *extra: str) -> dict:
    predictions = tmp_path / "predictions.jsonl"
    write_jsonl(predictions, PREDICTIONS)
    code = main(["eval", "score", "--predictions", str(predictions), "--json", "--quiet", *extra])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_save_result_writes_a_file_that_publish_renders(tmp_path, capsys):
    saved = tmp_path / "results" / "010-tiny.yaml"
    report = _score(
        tmp_path,
        capsys,
        *("--save-result", str(saved), "--label", "a tiny model", "--set", "tiny bash"),
        *("--data", "data/tiny", "--shipped", "--readme", "--date", "2026-12-06"),
    )
    result = load_result(saved)
    assert result.held_out.title == "tiny bash"
    assert result.held_out.data == ["data/tiny"]
    assert (result.held_out.episodes, result.held_out.calls) == (2, 4)
    assert str(result.date) == "2026-12-06" and result.readme
    assert "eval score --predictions" in result.source
    model, empty, previous = result.rows
    assert (model.system, model.shipped, model.baseline) == ("a tiny model", True, None)
    assert (empty.baseline, previous.baseline) == ("empty", "previous")
    overall = report["overall"]
    for row, system in ((model, "model"), (empty, "empty"), (previous, "previous")):
        assert row.metrics.similarity == pytest.approx(overall[system]["similarity"])
        assert row.metrics.exact == pytest.approx(overall[system]["exact"])
        assert row.metrics.exit_code == pytest.approx(overall[system]["exit_code"])
    assert model.metrics.exact == pytest.approx(2 / 4)  # hello and /home/dev
    assert model.metrics.exit_code == pytest.approx(3 / 4)  # the empty answer has none

    doc = tmp_path / "fidelity.md"
    readme = tmp_path / "README.md"
    doc.write_text("# Doc\n\n{}\n\n{}\n".format(*DOC_MARKERS), encoding="utf-8")
    readme.write_text("# Read me\n{}\n\n{}\nafter\n".format(*README_MARKERS), encoding="utf-8")
    args = ["eval", "publish", "--results", str(saved.parent), "--doc", str(doc)]
    assert main([*args, "--readme", str(readme)]) == 0
    readme_text = readme.read_text(encoding="utf-8")
    similarity = f"{overall['model']['similarity']:.3f}"
    assert f"| tiny bash | 4 | {similarity}, exact 50.0%, exit code 75.0% |" in readme_text
    assert readme_text.endswith(f"{README_MARKERS[1]}\nafter\n")
    doc_text = doc.read_text(encoding="utf-8")
    assert "### tiny bash" in doc_text and "**a tiny model**" in doc_text
    assert "Data: `data/tiny`" in doc_text and "measured 2026-12-06" in doc_text
    assert _check(saved.parent, doc, readme) == 0


def test_save_result_adds_another_system_to_an_existing_file(tmp_path, capsys):
    saved = tmp_path / "010-tiny.json"
    common = ("--save-result", str(saved), "--date", "2026-12-06")
    _score(tmp_path, capsys, *common, "--label", "first", "--set", "tiny", "--shipped")
    _score(tmp_path, capsys, *common, "--label", "second", "--run", "x1")
    result = load_result(saved)
    assert [r.system for r in result.rows] == [
        "first",
        "baseline: print nothing",
        "baseline: repeat the previous real observation",
        "second",
    ]
    assert result.rows[-1].run == "x1" and result.rows[0].shipped

    # Another set's title is refused, and --label is needed.
    predictions = str(tmp_path / "predictions.jsonl")
    score = ["eval", "score", "--predictions", predictions, "--quiet", *common]
    code = main([*score, "--label", "t", "--set", "another set"])
    assert code == 2 and "held_out.title" in capsys.readouterr().err
    code = main(score)
    assert code == 2 and "--label" in capsys.readouterr().err


def test_save_result_keeps_how_often_a_world_condition_is_shown(tmp_path, capsys):
    full = 'The disk is full. Every write fails with "No space left on device" (ENOSPC).'
    enospc = "bash: echo: write error: No space left on device\n[exit code: 1]"
    rows = episode_samples(
        "terminal",
        "f",
        [
            ("run_command", {"command": "echo a > a.txt"}, enospc),
            ("run_command", {"command": "cat b.txt"}, "b\n[exit code: 0]"),
            ("run_command", {"command": "echo c > c.txt"}, enospc),
        ],
        [enospc, "cat: b.txt: No space left on device\n[exit code: 1]", ""],
    )
    for row in rows:
        row["conditions"] = [full]
    predictions = tmp_path / "predictions.jsonl"
    write_jsonl(predictions, rows)
    saved = tmp_path / "010-full-disk.yaml"
    args = ["eval", "score", "--predictions", str(predictions), "--quiet"]
    args += ["--save-result", str(saved), "--label", "m", "--set", "full disk", "--readme"]
    assert main([*args, "--shipped"]) == 0
    capsys.readouterr()
    model, empty, _ = load_result(saved).rows
    # shown on 1 of the 2 calls whose real answer shows it; a false alarm on the one read
    assert model.metrics.shown == Share(n=1, of=2)
    assert model.metrics.false_alarm == Share(n=1, of=1)
    assert empty.metrics.shown == Share(n=0, of=2)
    table = render_readme_table([load_result(saved)])
    assert "shown 50.0% (1 of 2), false alarm 100.0% (1 of 1)" in table
