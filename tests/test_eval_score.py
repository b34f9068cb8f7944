"""`aw-mcp eval score`: metrics, families, baselines and the LLM judge, on hand-made
predictions whose numbers are worked out by hand below."""

from __future__ import annotations

import json
import re

import pytest

from aw_mcp.cli import main
from aw_mcp.domain.models import ToolCall
from aw_mcp.episode.prompt import AgentWorldProfile, PromptProfile
from aw_mcp.evaluation.judge import VerdictError, parse_verdict
from aw_mcp.evaluation.metrics import command_family, exact_match, exit_code, similarity
from aw_mcp.evaluation.samples import BenchSample, parse_action
from tests.eval_support import episode_samples, fake_openai_server, write_jsonl

# A terminal episode: turn 1 exact; turn 2 off by one character of 20 after thinking is
# stripped; turn 3 empty. A JSON (mcp) episode: turn 1 valid and same keys, turn 2 not JSON.
TERMINAL = episode_samples(
    "terminal",
    "t",
    [
        ("run_command", {"command": "echo hello"}, "hello\n[exit code: 0]"),
        ("run_command", {"command": "ls"}, "a.txt\n[exit code: 0]"),
        ("run_command", {"command": "cd /tmp && cat x"}, "x\n[exit code: 1]"),
    ],
    [
        "hello\n[exit code: 0]",
        "<think>a file</think><predicted_observation>\nb.txt\n[exit code: 0]\n"
        "</predicted_observation>",
        "",
    ],
)
MCP = episode_samples(
    "mcp",
    "m",
    [("get", {"k": "a"}, '{"a": 1}'), ("get", {"k": "b"}, '{"a": 1, "b": 2}')],
    ['{"a": 2}', "oops"],
)


def test_similarity_is_difflib_ratio_on_whitespace_normalized_text():
    assert similarity("abcd", "abxd") == pytest.approx(0.75)  # 2 * 3 matches / 8 characters
    assert similarity("a  b\n\n", "a b") == 1.0
    assert not exact_match("a  b", "a b")  # exact keeps the layout inside lines
    assert exact_match("line  \nnext\n\n", "line\nnext")
    assert similarity("", "") == 1.0 and similarity("", "x") == 0.0


def test_exit_code_only_from_a_last_line():
    assert exit_code("oops\n[exit code: 127]\n") == 127
    assert exit_code("[exit code: 0]\nmore output") is None


@pytest.mark.parametrize(
    ("command", "family"),
    [
        ("ls -la", "ls"),
        ("cd /tmp && ls -la", "ls"),
        ("cd a; cd b && git status", "git"),
        ("FOO=1 BAR='x y' python3 run.py", "python3"),
        ("sudo apt-get install -y jq", "apt-get"),
        ("/usr/bin/git log", "git"),
        ("cat a.txt | grep b", "cat"),
        ("export A=1; make test", "make"),
        ("source .venv/bin/activate && pytest -q", "pytest"),
        ("(cd src && make)", "make"),
        ("cd src", "cd"),
        ("echo 'unbalanced", "echo"),
        ("X=1", "(assignment)"),
        ("", "(empty)"),
    ],
)
def test_command_family(command, family):
    assert command_family(command) == family


@pytest.mark.parametrize("profile", [PromptProfile(), AgentWorldProfile()])
def test_action_messages_of_both_profiles_parse_back(profile):
    call = ToolCall(tool="run_command", arguments={"command": "cd x && ls", "timeout_ms": 5})
    message = profile.action_message(3, call, ["the disk is full"])
    assert parse_action(message) == ("run_command", call.arguments)


def test_agentworldbench_keystroke_actions_give_the_command_family():
    sample = BenchSample(
        task="terminal",
        id=1,
        prompt=['### Turn 1\n**Action:**\n```json\n[{"keystrokes": "git diff\\n"}]\n```'],
        response=["**Environment Observation:**\n(no changes)"],
        turn_idx=1,
    )
    assert sample.family() == "git"
    assert sample.reference() == "(no changes)"


def _score_json(tmp_path, capsys, rows, *extra: str) -> dict:
    path = tmp_path / "predictions.jsonl"
    write_jsonl(path, rows)
    assert main(["eval", "score", "--predictions", str(path), "--json", "--quiet", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_score_terminal_by_family_with_both_baselines(tmp_path, capsys):
    report = _score_json(tmp_path, capsys, TERMINAL)
    terminal = report["domains"]["terminal"]
    model, empty, previous = (terminal["all"][s] for s in ("model", "empty", "previous"))
    assert terminal["all"]["n"] == 3
    # model: 1, 38/40 ("b.txt [exit code: 0]" vs "a.txt [exit code: 0]"), 0
    assert model["similarity"] == pytest.approx((1 + 0.95 + 0) / 3)
    assert model["exact"] == pytest.approx(1 / 3)
    assert model["exit_code"] == pytest.approx(2 / 3) and model["exit_code_n"] == 3
    # empty = "[exit code: 0]" (14 characters) beside references with an exit-code line:
    # 2 * 14 / 34 twice; "x [exit code: 1]" shares "[exit code: " and "]", 2 * 13 / 30.
    assert empty["similarity"] == pytest.approx((28 / 34 + 28 / 34 + 26 / 30) / 3)
    assert empty["exact"] == 0 and empty["exit_code"] == pytest.approx(2 / 3)
    # previous: "" at turn 1; "hello [exit code: 0]" vs "a.txt [exit code: 0]" = 30/40;
    # "a.txt [exit code: 0]" vs "x [exit code: 1]" = 2 * (13 + 1 + 1) / 36.
    assert previous["similarity"] == pytest.approx((0 + 0.75 + 30 / 36) / 3)
    assert previous["exit_code"] == pytest.approx(1 / 3)
    assert model["json_n"] == 0 and model["json_valid"] is None
    families = terminal["families"]
    assert set(families) == {"echo", "ls", "cat"}
    assert families["ls"]["model"]["similarity"] == pytest.approx(0.95)
    assert families["cat"]["previous"]["similarity"] == pytest.approx(30 / 36)
    assert report["overall"]["n"] == 3


def test_score_json_validity_and_shape(tmp_path, capsys):
    report = _score_json(tmp_path, capsys, MCP)
    mcp = report["domains"]["mcp"]["all"]
    assert mcp["model"]["json_n"] == 2
    assert mcp["model"]["json_valid"] == 0.5 and mcp["model"]["json_shape"] == 0.5
    # previous: nothing at turn 1; {"a": 1} at turn 2 is JSON but lacks key b.
    assert mcp["previous"]["json_valid"] == 0.5 and mcp["previous"]["json_shape"] == 0
    assert mcp["empty"]["json_valid"] == 0
    assert mcp["model"]["exit_code"] is None  # not a terminal domain
    assert set(report["domains"]["mcp"]["families"]) == {"get"}


def test_table_names_the_metrics_and_shows_model_and_baselines(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    write_jsonl(path, TERMINAL + MCP)
    assert main(["eval", "score", "--predictions", str(path)]) == 0
    table = capsys.readouterr().out
    assert "difflib SequenceMatcher ratio" in table and "whitespace-normalized" in table
    assert "### terminal (3 samples, 0 errors)" in table
    row = next(line for line in table.splitlines() if line.startswith("| ls |"))
    assert "0.950 / 0.824 / 0.750" in row
    assert "### all domains (5 samples, 0 errors)" in table


def test_later_rows_of_a_sample_replace_earlier_ones(tmp_path, capsys):
    stale = {**TERMINAL[2], "gen": "", "error": "engine down"}
    fixed = {**TERMINAL[2], "gen": "x\n[exit code: 1]"}
    report = _score_json(tmp_path, capsys, [stale, fixed])
    assert report["overall"]["n"] == 1 and report["overall"]["errors"] == 0
    assert report["overall"]["model"]["exact"] == 1.0


# -- judge -----------------------------------------------------------------------------------

VERDICT = "<think>compare</think>notes\n<final_evaluation>\n```json\n{}\n```\n</final_evaluation>"


def _verdict(scores: dict) -> str:
    body = json.dumps({"strengths": ["s"], "weaknesses": ["w"], "scores": scores})
    return VERDICT.replace("{}", body)


def test_parse_verdict_takes_the_last_block_and_averages_non_zero_scores():
    text = _verdict({"format": 1}) + _verdict(
        {"format": 4, "factuality": 2, "consistency": 0, "realism": 3, "quality": 3}
    )
    verdict = parse_verdict(text)
    assert verdict.scores["format"] == 4
    assert verdict.total == pytest.approx(3.0)  # (4+2+3+3)/4, the 0 left out
    for bad in ("no tags", "<final_evaluation>{not json}</final_evaluation>", _verdict({})):
        with pytest.raises(VerdictError):
            parse_verdict(bad)
    with pytest.raises(VerdictError, match="'format' is 9"):
        parse_verdict(_verdict({"format": 9}))


def test_judged_score_through_a_fake_openai_compatible_server(tmp_path, capsys):
    perfect = {"format": 5, "factuality": 5, "consistency": 0, "realism": 5, "quality": 5}

    def answer(messages) -> str:
        user = messages[-1]["content"]
        predicted = re.search(r"# Predicted observation.*?```\n(.*?)\n```", user, re.S).group(1)
        real = re.search(r"# Real observation\n```\n(.*?)\n```", user, re.S).group(1)
        if predicted == real:
            return _verdict(perfect)
        if predicted == "":
            return "I cannot decide."  # no verdict: the sample counts as failed
        return _verdict(dict.fromkeys(perfect, 2))

    with fake_openai_server(answer) as (url, seen):
        judged = tmp_path / "judged.jsonl"
        args = ["--judge-url", url, "--judge-model", "fake-judge", "--judged-out", str(judged)]
        report = _score_json(tmp_path, capsys, TERMINAL, *args)
    judge = report["domains"]["terminal"]["all"]["model"]["judge"]
    # turn 1: total 5 (zeros left out); turn 2: total 2; turn 3: failed after 3 attempts.
    assert judge["n"] == 2 and judge["failed"] == 1
    assert judge["total"] == pytest.approx(((5 + 2) / 2 - 1) / 4 * 100)  # 62.5
    assert judge["format"] == pytest.approx(((5 + 2) / 2 - 1) / 4 * 100)
    assert judge["consistency"] == pytest.approx(25.0)  # only the non-zero 2 counts
    assert "judge" not in report["domains"]["terminal"]["all"]["empty"]  # not asked
    assert len(seen) == 2 + 3  # two verdicts, three tries for the undecided one
    first = seen[0]["messages"]
    assert first[0]["role"] == "system" and "<final_evaluation>" in first[0]["content"]
    rows = [json.loads(line) for line in judged.read_text().splitlines()]
    assert [r["failed"] for r in rows] == [0.0, 0.0, 1.0]
    assert rows[0]["total_score"] == 5 and rows[1]["format"] == 2


def test_missing_inputs_are_one_line_errors(tmp_path, capsys):
    missing = str(tmp_path / "nothing")
    assert main(["eval", "score", "--predictions", missing]) == 2
    assert main(["eval", "infer", "--data-dir", missing, "--output-dir", missing]) == 2
    assert main(["eval", "closed-loop", "--records", missing, "--output-dir", missing]) == 2
    err = capsys.readouterr().err
    assert f"aw-mcp eval: no predictions file at {missing}" in err
    assert f"no data directory at {missing}" in err and f"no record directory at {missing}" in err


def test_calls_under_a_world_condition_score_whether_they_show_it(tmp_path, capsys):
    full = 'The disk is full. Every write fails with "No space left on device" (ENOSPC).'
    enospc = "bash: echo: write error: No space left on device\n[exit code: 1]"
    rows = episode_samples(
        "terminal",
        "f",
        [
            ("run_command", {"command": "echo a > a.txt"}, enospc),  # the real one shows it
            ("run_command", {"command": "cat b.txt"}, "b\n[exit code: 0]"),  # a read does not
            ("run_command", {"command": "echo c > c.txt"}, enospc),
            ("run_command", {"command": "ls"}, "a.txt\n[exit code: 0]"),  # no condition
        ],
        [enospc, "cat: b.txt: No space left on device\n[exit code: 1]", "", "a.txt"],
    )
    for row in rows[:3]:
        row["conditions"] = [full]
    report = _score_json(tmp_path, capsys, rows)
    conditions = report["world_conditions"]
    # model: shown on 1 of the 2 calls whose real observation shows it; a false alarm on the read
    assert conditions["model"] == {
        "real_shows": 2,
        "shown": 0.5,
        "real_silent": 1,
        "false_alarm": 1.0,
    }
    assert conditions["empty"]["shown"] == 0 and conditions["empty"]["false_alarm"] == 0
    # previous: turn 2 repeats turn 1's ENOSPC (a false alarm), turn 3 repeats the read
    assert conditions["previous"]["shown"] == 0 and conditions["previous"]["false_alarm"] == 1.0
    path = tmp_path / "p.jsonl"
    write_jsonl(path, rows)
    assert main(["eval", "score", "--predictions", str(path)]) == 0
    table = capsys.readouterr().out
    assert "### calls under a world condition" in table and "| model | 50.0 | 100.0 |" in table
    # Without conditions there is no such section.
    assert "world_conditions" not in _score_json(tmp_path, capsys, TERMINAL)


@pytest.mark.data
def test_page_snapshots_score_whether_they_are_page_states_the_next_action_can_use(
    tmp_path, capsys
):
    """Every real Playwright snapshot in the committed web records is a well-formed page
    state. One of them, then a click on one of its named elements' refs: the real answer is a
    usable page state; a tree that lost the ref, repeats a ref or is no YAML list is not. The
    element clicked is shown where it keeps its role and name under another ref, and not
    where its ref names something else."""
    from pathlib import Path

    from aw_mcp.evaluation.metrics import (
        page_state_well_formed,
        snapshot_elements,
        snapshot_refs,
        targets_shown,
    )
    from aw_mcp.records.reader import load_record_dir

    web = Path(__file__).resolve().parent.parent / "data" / "web"
    real = [
        r.observation
        for folder in (web / "train", web / "heldout")
        for e in load_record_dir(folder)
        for r in e.records
        if snapshot_refs(r.observation)
    ]
    assert len(real) >= 400
    assert all(page_state_well_formed(text) for text in real)  # every real one is well formed
    # every element of every real snapshot is read, quoted YAML lines (`- 'link "<< a"`) too
    assert all(set(snapshot_elements(t) or {}) == set(snapshot_refs(t) or []) for t in real)
    snapshot = real[0]
    refs = snapshot_refs(snapshot)
    elements = snapshot_elements(snapshot) or {}
    target = next(ref for ref in reversed(refs) if '"' in elements[ref])  # link "Next", say
    role, name = elements[target].split(" ", 1)
    lost = snapshot.replace(f"[ref={target}]", "")
    doubled = snapshot.replace(f"[ref={refs[0]}]", f"[ref={target}]")
    unparsed = snapshot.replace("```yaml\n", "```yaml\n: [\n")
    renumbered = snapshot.replace(f"[ref={target}]", "[ref=e9999]")
    renamed = snapshot.replace(f"{role} {name} [ref={target}]", f'{role} "Other" [ref={target}]')
    assert renamed != snapshot
    calls = [
        ("browser_snapshot", {}, snapshot),
        ("browser_click", {"element": "a link", "target": target}, "### Ran Playwright code"),
    ]
    rows = []
    variants = {
        "real": snapshot,
        "lost": lost,
        "doubled": doubled,
        "bad": unparsed,
        "renumbered": renumbered,
        "renamed": renamed,
    }
    for episode, gen in variants.items():
        rows += episode_samples("web", episode, calls, [gen, "### Ran Playwright code"])[:1]
    report = _score_json(tmp_path, capsys, rows)
    model = report["domains"]["web"]["all"]["model"]
    # page state: all but doubled (repeats a ref) and bad (no YAML list) are well formed.
    assert model["page_state_n"] == 6 and model["page_state"] == pytest.approx(4 / 6)
    # refs usable: the clicked ref is still in all but lost and renumbered.
    assert model["refs_usable_n"] == 6 and model["refs_usable"] == pytest.approx(4 / 6)
    # targets shown: the clicked element, by role and name, is in real, doubled (which only
    # gives its ref to another element too) and renumbered; lost has no ref for it, renamed
    # another name, and bad is still read line by line (it has the element).
    assert model["targets_shown_n"] == 6 and model["targets_shown"] == pytest.approx(4 / 6)
    assert report["domains"]["web"]["all"]["empty"]["page_state"] == 0
    # Every line counts where a prediction writes one ref twice: link "A" is shown.
    page = "### Page\n- Page URL: http://127.0.0.1:8432/\n### Snapshot\n```yaml\n{}\n```"
    real_ab = page.format('- link "A" [ref=e1]\n- link "B" [ref=e2]')
    doubled_ab = page.format('- link "A" [ref=e2]\n- link "B" [ref=e2]')
    real_elements = snapshot_elements(real_ab)
    assert targets_shown(doubled_ab, real_elements, '{"element": "A link", "target": "e1"}')
    assert not targets_shown(real_ab.replace('"A"', '"C"'), real_elements, '{"target": "e1"}')


def test_values_no_simulator_can_know_are_masked_beside_the_raw_scores(tmp_path, capsys):
    """A Playwright answer that differs from the real one only in its snapshot file's time is
    a raw miss and a masked hit; one with another title misses both; a sample without such a
    value has no masked score (its raw ones say it all)."""
    real = (
        "### Page\n- Page URL: http://127.0.0.1:8432/a.html\n- Page Title: A\n### Snapshot\n"
        "- [Snapshot](.playwright-mcp/page-2026-12-01T13-11-50-868Z.yml)"
    )
    other_time = real.replace("13-11-50-868Z", "09-00-00-000Z")
    other_title = other_time.replace("Title: A", "Title: B")
    calls = [("browser_navigate", {"url": "http://127.0.0.1:8432/a.html"}, real)]
    rows = []
    for name, gen in (("time", other_time), ("title", other_title)):
        rows += episode_samples("web", name, calls, [gen])
    rows += episode_samples("web", "plain", [("browser_close", {}, "closed")], ["closed"])
    report = _score_json(tmp_path, capsys, rows)
    families = report["domains"]["web"]["families"]
    navigate = families["browser_navigate"]["model"]
    assert navigate["exact"] == 0 and navigate["volatile_n"] == 2
    assert navigate["exact_masked"] == 0.5
    assert navigate["similarity_masked"] > navigate["similarity"]
    closed = families["browser_close"]["model"]
    assert closed["exact"] == 1 and closed["volatile_n"] == 0
    assert closed["exact_masked"] is None and closed["similarity_masked"] is None
    write_jsonl(tmp_path / "p.jsonl", rows)
    assert main(["eval", "score", "--predictions", str(tmp_path / "p.jsonl")]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("| browser_close |"))
    assert row.endswith("| - / - / - | - / - / - |")  # the masked columns: not applicable


def test_state_accuracy_compares_the_models_recall_and_change_with_the_sandboxs(tmp_path, capsys):
    from aw_mcp.state.steps import Append, PathState, Recall, StepState, Write

    p = "/home/dev/project"
    read = StepState(
        cwd=p, recall=Recall(paths={f"{p}/a.txt": PathState(kind="file", content="x\n")})
    )
    append = StepState(cwd=p, change=[Append(path=f"{p}/a.txt", text="y\n")])
    nothing = StepState(cwd=p)
    rows = episode_samples(
        "terminal",
        "s",
        [
            ("run_command", {"command": "cat a.txt"}, "x\n[exit code: 0]"),
            ("run_command", {"command": "echo y >> a.txt"}, "[exit code: 0]"),
            ("run_command", {"command": "echo y >> a.txt"}, "[exit code: 0]"),
            ("run_command", {"command": "echo hi"}, "hi\n[exit code: 0]"),
            ("run_command", {"command": "pwd"}, f"{p}\n[exit code: 0]"),
        ],
        ["x", "", "", "hi", p],
    )
    said_read = StepState(cwd=p, recall=Recall(paths={f"{p}/a.txt": PathState(kind="file")}))
    wrong_write = StepState(cwd=p, change=[Write(path=f"{p}/a.txt", content="y\n")])
    pairs = [(read, said_read), (append, append), (append, wrong_write), (nothing, None)]
    for row, (real, said) in zip(rows, pairs, strict=False):
        row["state_real"] = real.model_dump(mode="json")
        row["state_gen"] = said.model_dump(mode="json") if said else None
    # the last row has no real state (a record made without --state): not counted
    report = _score_json(tmp_path, capsys, rows)
    state = report["state"]["terminal"]
    assert report["state"]["(all)"] == state  # one domain: the same tally
    assert (state["n"], state["step"], state["recall"], state["change"]) == (4, 0.75, 1.0, 0.75)
    assert (state["changing_n"], state["change_on_changing"]) == (2, 0.5)
    path = tmp_path / "p.jsonl"
    write_jsonl(path, rows)
    assert main(["eval", "score", "--predictions", str(path)]) == 0
    table = capsys.readouterr().out
    assert (
        "### state accuracy" in table
        and "| terminal | 4 | 75.0 | 100.0 | 75.0 | 2 | 50.0 |" in table
    )
    assert "state" not in _score_json(tmp_path, capsys, TERMINAL)
