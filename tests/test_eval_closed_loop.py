"""`aw-mcp eval closed-loop`: recorded episodes replayed through the MCP server, the model
seeing its own earlier answers. Plumbing with the FakeEngine stand-in; one small run of the
real embedded model through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aw_mcp.cli import main
from aw_mcp.evaluation.closed_loop import ClosedLoop, ClosedLoopOptions
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.reader import load_record_dir
from aw_mcp.records.sink import RecordSink
from aw_mcp.testing import FakeEngine
from tests.helpers import TINY_DOMAIN, make_simulator

pytestmark = pytest.mark.anyio

EPISODES = {
    "alpha": [("pwd", "/home/test"), ("ls", "a.txt"), ("cat a.txt", "A")],
    "beta": [("whoami", "test"), ("date", "Mon Nov 30")],
}


def _records(
    tmp_path, episodes=EPISODES, domain="tiny", tool="run_command", conditions=None, states=None
):
    """``conditions``: (episode, index) -> the world conditions recorded on that call;
    ``states``: (episode, index) -> the real state of that call."""
    folder = tmp_path / "records"
    sink = RecordSink(folder)
    for episode, calls in episodes.items():
        for index, (command, observation) in enumerate(calls, start=1):
            sink.write(
                CallRecord(
                    conditions=(conditions or {}).get((episode, index), []),
                    index=index,
                    episode=episode,
                    domain=domain,
                    tool=tool,
                    arguments={"command": command},
                    observation=f"{observation}\n[exit code: 0]",
                    is_error=False,
                    source="real",
                    started_at=0.0,
                    seconds=0.0,
                    state=(states or {}).get((episode, index)),
                )
            )
    return folder


def _rows(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def _numbered(request) -> str:
    """sim<N>: N = assistant turns before it (the demonstration's included)."""
    return f"sim{sum(m.role == 'assistant' for m in request.messages)}"


async def test_each_episode_runs_under_its_own_id_and_sees_its_own_answers(tmp_path):
    engine = FakeEngine(_numbered)
    simulator = make_simulator(engine)
    loop = ClosedLoop(simulator, ClosedLoopOptions(jobs=2, quiet=True))
    out = tmp_path / "out"
    await loop.run(load_record_dir(_records(tmp_path)), out)
    rows = _rows(out)
    assert [r["id"] for r in rows] == ["alpha#1", "alpha#2", "alpha#3", "beta#1", "beta#2"]
    assert [r["gen"] for r in rows] == ["sim1", "sim2", "sim3", "sim1", "sim2"]
    assert rows[2]["reference"] == "A\n[exit code: 0]" and rows[2]["family"] == "cat"
    assert {r["source"] for r in rows} == {"model"}
    # The history of alpha's third call holds the model's answers, not the real ones.
    third = next(r for r in engine.requests if "cat a.txt" in r.messages[-1].content)
    history = [m.content for m in third.messages if m.role == "assistant"]
    assert history == ["hi", "sim1", "sim2"]  # the demonstration, then its own answers
    ids = sorted(e.episode_id for e in simulator.episodes.all())
    assert ids == ["closed-loop/alpha", "closed-loop/beta"]
    assert not any("conditions" in r for r in rows)  # none were recorded
    # The rows carry the recorded episode in AgentWorldBench shape.
    assert rows[1]["turn_idx"] == 2 and rows[1]["total_turns"] == 3
    assert "a.txt\n[exit code: 0]" in rows[1]["response"][1]
    assert rows[1]["current_prompt"] == rows[1]["prompt"][1]


async def test_resume_reruns_only_episodes_with_failed_calls(tmp_path):
    # Recorded in a domain named "terminal", served by the tiny domain's run_command.
    records = load_record_dir(_records(tmp_path, domain="terminal"))
    out = tmp_path / "out"

    def failing_beta(request):
        if "whoami" in request.messages[-1].content:
            from aw_mcp.errors import EngineError

            raise EngineError("model crashed")
        return "ok"

    await ClosedLoop(make_simulator(FakeEngine(failing_beta)), ClosedLoopOptions(quiet=True)).run(
        records, out
    )
    beta1 = {r["id"]: r for r in _rows(out)}["beta#1"]
    assert beta1["source"] == "engine-error" and "model crashed" in beta1["error"]
    again = FakeEngine("fine")
    await ClosedLoop(make_simulator(again), ClosedLoopOptions(quiet=True)).run(records, out)
    assert len(again.requests) == 2  # beta's two calls; alpha was done
    rows = _rows(out)
    assert len(rows) == 5 and not any("error" in r for r in rows)
    assert {r["task"] for r in rows} == {"terminal"}
    assert [r["gen"] for r in rows if r["id"].startswith("beta")] == ["fine", "fine"]


async def test_a_tool_the_server_lacks_fails_before_any_inference(tmp_path):
    engine = FakeEngine("x")
    records = load_record_dir(_records(tmp_path, tool="start_process"))
    loop = ClosedLoop(make_simulator(engine), ClosedLoopOptions(quiet=True))
    with pytest.raises(ValueError, match="tool 'start_process', which this server does not"):
        await loop.run(records, tmp_path / "out")
    assert engine.requests == []


def test_real_embedded_model_through_the_command_line(tmp_path, capsys):
    records = _records(tmp_path, {"alpha": EPISODES["alpha"][:2]})
    world = tmp_path / "world.yaml"
    world.write_text("facts:\n  user: evaluator\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["--simulator", str(TINY_DOMAIN), "--world", str(world), "--threads", "1"]
    args += ["--n-ctx", "2048", "--quiet", "--record-dir", str(tmp_path / "served")]
    assert (
        main(["eval", "closed-loop", "--records", str(records), "--output-dir", str(out), *args])
        == 0
    )
    rows = _rows(out)
    assert [r["id"] for r in rows] == ["alpha#1", "alpha#2"]
    assert all(r["gen"].strip() and r["source"] == "model" for r in rows)
    # --record-dir (the serve setting): the server's own records of the simulated episode
    (served,) = load_record_dir(tmp_path / "served")
    assert [r.observation for r in served.records] == [r["gen"] for r in rows]
    assert "user: evaluator" in rows[0]["system_str"]  # the --world fact reached the prompt
    capsys.readouterr()
    assert main(["eval", "score", "--predictions", str(out / "predictions.jsonl"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["domains"]["tiny"]["all"]["n"] == 2


def test_each_episode_is_served_in_the_world_its_folder_records(tmp_path, capsys):
    """A record folder's world.yaml is the world its episodes ran in: closed loop serves them
    in it, as training renders them; a --world given replaces it (the embedded model)."""
    records = _records(tmp_path, {"alpha": EPISODES["alpha"][:1]})
    (records / "world.yaml").write_text("facts:\n  user: recorder\n", encoding="utf-8")
    given = tmp_path / "given.yaml"
    given.write_text("facts:\n  user: evaluator\n", encoding="utf-8")
    base = ["eval", "closed-loop", "--records", str(records), "--simulator", str(TINY_DOMAIN)]
    base += ["--threads", "1", "--n-ctx", "2048", "--quiet"]
    for extra, user in (([], "recorder"), (["--world", str(given)], "evaluator")):
        out = tmp_path / f"out-{user}"
        assert main([*base, "--output-dir", str(out), *extra]) == 0
        (row,) = _rows(out)
        assert f"user: {user}" in row["system_str"]
    capsys.readouterr()


async def test_replaying_real_bash_episodes_scores_a_perfect_model(tmp_path, capsys):
    """Closed loop through `serve --replay` (no model) on real bash records: every
    observation comes back as recorded, and score says so beside the baselines."""
    from aw_mcp.wiring.assemble import build_simulator
    from aw_mcp.wiring.settings import ServeSettings

    real = Path(__file__).parent / "data" / "real_terminal"
    never = FakeEngine(fail_with="the model must not be called")
    simulator = build_simulator(ServeSettings(replay=real, replay_miss="error"), engine=never)
    out = tmp_path / "out"
    await ClosedLoop(simulator, ClosedLoopOptions(quiet=True)).run(load_record_dir(real), out)
    assert never.requests == []
    rows = _rows(out)
    assert len(rows) == 17 and {r["source"] for r in rows} == {"replay"}
    assert main(["eval", "score", "--predictions", str(out / "predictions.jsonl"), "--json"]) == 0
    terminal = json.loads(capsys.readouterr().out)["domains"]["terminal"]
    assert terminal["all"]["model"]["exact"] == 1.0
    assert terminal["all"]["model"]["exit_code"] == 1.0
    assert terminal["all"]["empty"]["exact"] < 1.0 and terminal["all"]["previous"]["exact"] < 1.0
    assert {"tr", "git"} <= set(terminal["families"])


async def test_rows_keep_the_world_conditions_recorded_on_a_call(tmp_path):
    full = 'The disk is full: writes fail with "No space left on device".'
    records = load_record_dir(_records(tmp_path, conditions={("alpha", 2): [full]}))
    out = tmp_path / "out"
    await ClosedLoop(make_simulator(FakeEngine("ok")), ClosedLoopOptions(quiet=True)).run(
        records, out
    )
    rows = {r["id"]: r for r in _rows(out)}
    assert rows["alpha#2"]["conditions"] == [full]
    assert full in rows["alpha#2"]["current_prompt"]  # rendered as the fault layer would
    assert "conditions" not in rows["alpha#1"] and "conditions" not in rows["beta#1"]


async def test_rows_carry_the_real_state_and_which_steps_read_back_what_was_changed(
    tmp_path, capsys
):
    from aw_mcp.evaluation.scoring import READ_BACK
    from aw_mcp.state.steps import PathState, Recall, StepState, Write

    home = "/home/test"
    steps = {
        ("alpha", 1): StepState(cwd=home, change=[Write(path=f"{home}/a.txt", content="A\n")]),
        ("alpha", 2): StepState(
            cwd=home, recall=Recall(paths={home: PathState(kind="dir", entries=["a.txt"])})
        ),
        ("alpha", 3): StepState(
            cwd=home, recall=Recall(paths={f"{home}/a.txt": PathState(kind="file", content="A")})
        ),
        ("beta", 1): StepState(
            cwd=home, recall=Recall(paths={f"{home}/a.txt": PathState(kind="missing")})
        ),
    }
    episodes = {
        "alpha": [("echo A > a.txt", ""), ("ls", "a.txt"), ("cat a.txt", "A")],
        "beta": [("cat a.txt", "cat: a.txt: No such file or directory"), ("date", "Mon")],
    }
    records = load_record_dir(_records(tmp_path, episodes, states=steps))
    out = tmp_path / "out"
    await ClosedLoop(
        make_simulator(FakeEngine("A\n[exit code: 0]")), ClosedLoopOptions(quiet=True)
    ).run(records, out)
    rows = {r["id"]: r for r in _rows(out)}
    # the folder holding the written file and the file itself read back; another episode's
    # read of the same path does not, and a record without a state says nothing
    flags = {key: row.get("reads_back") for key, row in rows.items()}
    assert flags == {"alpha#1": False, "alpha#2": True, "alpha#3": True, "beta#1": False,
                     "beta#2": None}  # fmt: skip
    assert rows["alpha#3"]["state_real"]["recall"]["paths"] == {
        f"{home}/a.txt": {"kind": "file", "content": "A", "size": None, "entries": None,
                          "target": None, "unlisted": None}
    }  # fmt: skip
    assert rows["alpha#3"]["state_gen"] is None  # the default profile keeps no state

    assert main(["eval", "score", "--predictions", str(out / "predictions.jsonl"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    parts = report["read_back"]["tiny"]
    assert parts["all"]["n"] == 4
    back, other = (parts["families"][name] for name in READ_BACK)
    assert (back["n"], other["n"]) == (2, 2)
    assert back["model"]["exact"] == 0.5  # "A" is right for cat a.txt, wrong for ls
    assert main(["eval", "score", "--predictions", str(out / "predictions.jsonl")]) == 0
    assert "### tiny, by whether a step reads back what the session changed" in (
        capsys.readouterr().out
    )
