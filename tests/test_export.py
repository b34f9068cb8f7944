"""aw-mcp export renders record dirs as AgentWorldBench samples and chat conversations, with the
same messages the server builds."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from aw_mcp.cli import main
from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.models import ToolCall, WorldSpec
from aw_mcp.engines.base import ChatMessage
from aw_mcp.episode.prompt import AgentWorldProfile, PromptProfile, build_messages
from aw_mcp.export.rendering import DomainResolver, ExportError, render_episode
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.reader import load_record_dir
from aw_mcp.records.sink import RecordSink

COMMANDS = [
    ("echo alpha > a.txt", "[exit code: 0]"),
    ("cat a.txt", "alpha\n[exit code: 0]"),
    ("cat b.txt", "cat: b.txt: No such file or directory\n[exit code: 1]"),
]


def _record(episode: str, index: int, command: str, observation: str, **extra) -> CallRecord:
    fields = {
        "index": index,
        "episode": episode,
        "domain": "terminal",
        "tool": "run_command",
        "arguments": {"command": command},
        "observation": observation,
        "is_error": False,
        "source": "real",
        "started_at": time.time(),
        "seconds": 0.01,
    }
    return CallRecord(**{**fields, **extra})


@pytest.fixture
def record_dir(tmp_path: Path) -> Path:
    sink = RecordSink(tmp_path / "records")
    for i, (command, observation) in enumerate(COMMANDS, start=1):
        sink.write(_record("ep-a", i, command, observation))
    sink.write(_record("ep-b", 1, "pwd", "/home/dev/project\n[exit code: 0]"))
    # A refused call never reached the world: it is not a turn.
    sink.write(_record("ep-b", 2, "ls", "bad arguments", source="invalid-arguments"))
    sink.write(_record("ep-b", 3, "ls", "[exit code: 0]"))
    return tmp_path / "records"


def test_chat_rendering_is_the_servers_prompt_plus_the_last_observation(record_dir: Path):
    episode = next(e for e in load_record_dir(record_dir) if e.episode == "ep-a")
    profile = PromptProfile()
    rendered = render_episode(episode, profile, DomainResolver())
    domain = load_domain("terminal")
    served = Catalogue([domain]).get("run_command")
    turns = episode.turns()
    # What the server sends for the last call, built the server's way:
    expected = build_messages(
        profile,
        domain,
        domain.tools,
        served.world,
        turns[:2],
        0,
        ToolCall(tool="run_command", arguments={"command": "cat b.txt"}),
        3,
        [],
    )
    assert [(m.role, m.content) for m in rendered.messages[:-1]] == [
        (m.role, m.content) for m in expected
    ]
    assert rendered.messages[-1].content == COMMANDS[-1][1]
    flags = [m.observation for m in rendered.messages if m.role == "assistant"]
    demos = len(domain.demonstrations)
    assert flags == [False] * demos + [True] * 3
    assert [m.content for m in rendered.messages if m.observation] == [o for _, o in COMMANDS]


def test_bench_export_one_sample_per_turn(record_dir: Path, tmp_path: Path, capsys):
    out = tmp_path / "bench"
    assert main(["export", str(record_dir), "--out", str(out)]) == 0
    assert "terminal_test.jsonl: 5 samples" in capsys.readouterr().out
    samples = [json.loads(x) for x in (out / "terminal_test.jsonl").read_text().splitlines()]
    a = [s for s in samples if s["id"].startswith("ep-a-")]
    assert [s["turn_idx"] for s in a] == [1, 2, 3]
    assert {s["total_turns"] for s in a} == {3}
    first = a[0]
    assert first["task"] == "terminal"
    assert first["prompt"][1].startswith("### Turn 2\n**Action:**\n```json\n")
    assert '"cat a.txt"' in first["prompt"][1]
    assert first["response"][1] == AgentWorldProfile.OBSERVATION_MARKER + "alpha\n[exit code: 0]"
    assert a[2]["current_prompt"] == first["prompt"][2]
    assert "# Role and Objective" in first["system_str"]
    assert "# Example turns" in first["system_str"]  # the demonstrations travel in system_str
    # The refused call of ep-b is no turn; the two turns keep their record indices as numbers.
    b = [s for s in samples if s["id"].startswith("ep-b-")]
    assert [s["total_turns"] for s in b] == [2, 2]
    assert b[1]["current_prompt"].startswith("### Turn 3\n")


def test_chat_export_with_world_file_replacing_the_domains_notes(record_dir: Path, tmp_path: Path):
    world = tmp_path / "world.yaml"
    world.write_text("facts: {user: tester}\nreplace_notes: true\nnotes: [the folder is empty]\n")
    out = tmp_path / "chat"
    assert (
        main(
            [
                "export",
                str(record_dir),
                "--out",
                str(out),
                "--format",
                "chat",
                "--profile",
                "default",
                "--world",
                str(world),
            ]
        )
        == 0
    )
    lines = [json.loads(x) for x in (out / "terminal_chat.jsonl").read_text().splitlines()]
    assert [x["episode"] for x in lines] == ["ep-a", "ep-b"]
    system = lines[0]["messages"][0]["content"]
    assert "- user: tester" in system and "- the folder is empty" in system
    bundled_note = load_domain("terminal").world.notes[0]
    assert bundled_note not in system
    # without replace_notes the domain's notes stay and the file's are added
    merged = load_domain("terminal").world.merged(WorldSpec(notes=["extra"]))
    assert merged.notes[-1] == "extra" and bundled_note in merged.notes


def test_unknown_domain_and_tool_are_clear_errors(tmp_path: Path):
    sink = RecordSink(tmp_path)
    sink.write(_record("x", 1, "ls", "[exit code: 0]", domain="nowhere"))
    sink.write(_record("y", 1, "ls", "[exit code: 0]", tool="no_such_tool"))
    episodes = {e.episode: e for e in load_record_dir(tmp_path)}
    with pytest.raises(ExportError, match="no domain for records of domain 'nowhere'"):
        render_episode(episodes["x"], PromptProfile(), DomainResolver())
    with pytest.raises(ExportError, match="calls 'no_such_tool'"):
        render_episode(episodes["y"], PromptProfile(), DomainResolver())
    assert main(["export", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2


def test_every_observation_is_trained_on_exactly_the_prompt_the_server_sends(record_dir: Path):
    """With the embedded model's own chat template: the server's prompt for step k, then
    observation k, is a prefix of the rendered chat export, for every k (what lets a trainer
    compute all of an episode's targets in one pass)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from aw_mcp.engines.chat_format import ChatRenderer
    from aw_mcp.testing import small_model_path

    vocab = llama_cpp.Llama(str(small_model_path()), vocab_only=True, verbose=False)
    assert "<|im_start|>" in vocab.metadata["tokenizer.chat_template"]  # the model's own
    renderer = ChatRenderer(
        template=vocab.metadata["tokenizer.chat_template"],
        eos_token=vocab._model.token_get_text(vocab.token_eos()),
    )
    episode = next(e for e in load_record_dir(record_dir) if e.episode == "ep-a")
    messages = render_episode(episode, PromptProfile(), DomainResolver()).messages
    full = renderer.render([ChatMessage(role=m.role, content=m.content) for m in messages])
    targets = [i for i, m in enumerate(messages) if m.observation]
    assert len(targets) == 3
    for i in targets:
        served = renderer.render(
            [ChatMessage(role=m.role, content=m.content) for m in messages[:i]]
        )
        assert full.startswith(served + messages[i].content + renderer.eos_token)


def test_atif_export_round_trips_through_the_atif_models(tmp_path: Path, capsys):
    """records -> aw-mcp export --format atif -> a file the ``atif`` models accept, whose steps
    give back every recorded call (tool, arguments, observation, source, faults, conditions)."""
    atif = pytest.importorskip("atif", reason="the 'atif' package (a core dependency)")
    sink = RecordSink(tmp_path / "records")
    fault = {"scenario": "mislead-ls", "rule": "r", "effect": "error", "preset": "http_502"}
    records = [
        _record("ep/α", 1, "echo alpha > a.txt", "[exit code: 0]", source="model"),
        _record("ep/α", 2, "ls", "bad arguments", is_error=True, source="invalid-arguments"),
        _record(
            "ep/α",
            3,
            "cat a.txt",
            "502 Bad Gateway",
            is_error=True,
            source="fault",
            faults=[fault],
            conditions=["The disk is full."],
        ),
    ]
    for record in records:
        sink.write(record)
    out = tmp_path / "atif"
    assert main(["export", str(tmp_path / "records"), "--out", str(out), "--format", "atif"]) == 0
    files = list((out / "terminal_atif").glob("*.json"))
    assert len(files) == 1 and ": 1 trajectory" in capsys.readouterr().out
    text = files[0].read_text(encoding="utf-8")
    trajectory = atif.Trajectory.model_validate_json(text)  # validates (extra=forbid models)
    assert json.loads(text) == trajectory.to_json_dict()  # nothing outside the models
    assert trajectory.schema_version == "ATIF-v1.8"
    assert trajectory.session_id == "ep/α"
    assert "run_command" in {t["function"]["name"] for t in trajectory.agent.tool_definitions}
    assert [s.step_id for s in trajectory.steps] == [1, 2, 3]
    for step, record in zip(trajectory.steps, records, strict=True):
        (call,) = step.tool_calls
        (result,) = step.observation.results
        assert result.source_call_id == call.tool_call_id
        kept = step.extra["aw_mcp"]
        rebuilt = CallRecord(
            episode=trajectory.session_id,
            domain=trajectory.agent.extra["domain"],
            tool=call.function_name,
            arguments=call.arguments,
            observation=result.content,
            **kept,
        )
        assert rebuilt == record
    # A schema violation is refused by the models (so the export cannot write one).
    broken = json.loads(text)
    broken["steps"][1]["step_id"] = 7
    with pytest.raises(ValueError, match="not sequential"):
        atif.Trajectory.model_validate(broken)


def test_atif_steps_call_only_listed_tools_and_other_mcp_requests_are_actions(tmp_path):
    """A resource read, a prompt get and a completion are recorded as actions of the episode;
    in ATIF they are steps without a tool call (their request as the message and in
    extra.aw_mcp.request), so every tool call names a tool of the trajectory's tool list."""
    atif = pytest.importorskip("atif", reason="the 'atif' package (a core dependency)")
    sink = RecordSink(tmp_path / "records")
    records = [
        _record("ep", 1, "echo a > notes.txt", "[exit code: 0]"),
        _record("ep", 2, "", "a", tool="resources/read", arguments={"uri": "notes://todo.md"}),
        _record("ep", 3, "", "Hi", tool="prompts/get", arguments={"name": "greet"}),
        _record("ep", 4, "", '["a"]', tool="completion/complete", arguments={"value": ""}),
    ]
    for record in records:
        sink.write(record)
    out = tmp_path / "atif"
    assert main(["export", str(tmp_path / "records"), "--out", str(out), "--format", "atif"]) == 0
    (path,) = (out / "terminal_atif").glob("*.json")
    trajectory = atif.Trajectory.model_validate_json(path.read_text(encoding="utf-8"))
    listed = {t["function"]["name"] for t in trajectory.agent.tool_definitions}
    called = [c.function_name for s in trajectory.steps for c in s.tool_calls or []]
    assert called == ["run_command"] and set(called) <= listed
    for step, record in zip(trajectory.steps[1:], records[1:], strict=True):
        assert step.tool_calls is None
        assert step.message == f"{record.tool} {json.dumps(record.arguments)}"
        assert step.extra["aw_mcp"]["request"] == {
            "method": record.tool,
            "params": record.arguments,
        }
        (result,) = step.observation.results
        assert result.content == record.observation and result.source_call_id is None


def test_the_steps_real_state_goes_through_every_format(tmp_path: Path, capsys):
    """Records with the sandbox's state of each step, and the machine each episode ran in:
    AgentWorldBench and chat carry the state beside the text; small-state writes it in the
    text as the server does (views replayed from the episode's own world); ATIF keeps it."""
    from aw_mcp.records.folder import write_episode_world
    from aw_mcp.state.steps import PathState, Recall, StepState, Write

    home = "/home/ada/work"
    wrote = StepState(cwd=home, change=[Write(path=f"{home}/a.txt", content="alpha\n")])
    read = StepState(
        cwd=home, recall=Recall(paths={f"{home}/a.txt": PathState(kind="file", content="alpha\n")})
    )
    folder = tmp_path / "records"
    sink = RecordSink(folder)
    for i, ((command, observation), state) in enumerate(
        zip(COMMANDS, [wrote, read, None], strict=True), start=1
    ):
        sink.write(_record("ep-a", i, command, observation, state=state))
    world = WorldSpec(facts={"working_directory": home, "home": "/home/ada", "hostname": "box7"})
    write_episode_world(folder, "ep-a", world)

    assert main(["export", str(folder), "--out", str(tmp_path / "bench")]) == 0
    rows = [
        json.loads(x) for x in (tmp_path / "bench/terminal_test.jsonl").read_text().splitlines()
    ]
    assert [StepState.model_validate(r["state"]) for r in rows[:2]] == [wrote, read]
    assert "state" not in rows[2]
    assert "box7" in rows[0]["system_str"]  # rendered in the episode's own world

    out = tmp_path / "chat"
    assert main(["export", str(folder), "--out", str(out), "--format", "chat",
                 "--profile", "small-state"]) == 0  # fmt: skip
    messages = json.loads((out / "terminal_chat.jsonl").read_text())["messages"]
    observations = [m for m in messages if m.get("observation")]
    assert [m.get("state") for m in observations] == [
        wrote.model_dump(mode="json"), read.model_dump(mode="json"), None,
    ]  # fmt: skip
    assert observations[0]["content"].startswith("<change>\nwrite a.txt\n|alpha\n</change>\n")
    assert observations[1]["content"].startswith("<recall>\nfile a.txt\n</recall>\n")
    # the read's call shows the file as the write left it: the view replayed from the world
    cat = next(m for m in messages if m["role"] == "user" and '"cat a.txt"' in m["content"])
    assert "<state>" in cat["content"] and "alpha" in cat["content"]
    capsys.readouterr()

    assert main(["export", str(folder), "--out", str(tmp_path / "atif"), "--format", "atif"]) == 0
    trajectory = json.loads(next((tmp_path / "atif/terminal_atif").glob("*.json")).read_text())
    kept = [s["extra"]["aw_mcp"].get("state") for s in trajectory["steps"]]
    assert kept == [wrote.model_dump(mode="json"), read.model_dump(mode="json"), None]
