"""--grounding: the most similar recorded real transitions reach the prompt of the current call."""

from __future__ import annotations

import pytest
from mcp import Client

from aw_mcp.domain.models import ToolCall
from aw_mcp.records.calls import Turn
from aw_mcp.server.app import build_server
from aw_mcp.simulation.grounding import GroundingIndex
from aw_mcp.testing import RecordingEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import REPO_ROOT, small_engine
from tests.engine_support import write_tiny_domain

RECORDS = REPO_ROOT / "tests" / "data" / "train_records"


def _turn(command: str) -> Turn:
    action = ToolCall(tool="run_command", arguments={"command": command})
    return Turn(index=1, action=action, observation="")


@pytest.fixture(scope="module")
def index() -> GroundingIndex:
    return GroundingIndex.from_record_dir(RECORDS, k=2)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("wc -l notes.txt", "wc -l a.txt"),
        ("ls missing_dir", "ls missing"),
        ("seq 5", "seq 3"),
        ("printf 'x\\ny\\n' | sort", "printf 'b\\na\\nc\\n' | sort"),
    ],
)
def test_the_most_similar_real_transition_comes_first(index, command, expected):
    found = index.retrieve("run_command", {"command": command}, [])
    assert found[0].arguments == {"command": expected}


def test_the_previous_action_breaks_ties(index):
    # Two recorded `ls` calls; the one after `touch` is the better match after a `touch`.
    after_touch = index.retrieve("run_command", {"command": "ls"}, [_turn("touch z.py")])
    assert after_touch[0].episode == "tiny-3"
    after_write = index.retrieve("run_command", {"command": "ls"}, [_turn("echo x > a.txt")])
    assert after_write[0].episode == "tiny-1"


def test_other_tools_and_unknown_words_find_nothing(index):
    assert index.retrieve("read_file", {"path": "a.txt"}, []) == []
    assert index.retrieve("run_command", {"command": "zzzz"}, []) == []


def test_a_tool_only_ever_called_without_arguments_is_grounded_on_its_calls():
    """The everything server's get-env has no arguments, nor has the call before it: nothing to
    rank by (bm25s refused to index it, and ``serve --grounding`` stopped), so its recorded
    calls are shown as they come."""
    everything = GroundingIndex.from_record_dir(REPO_ROOT / "tests/data/records/everything")
    found = everything.retrieve("get-env", {}, [])
    assert len(found) >= 1
    assert all(t.tool == "get-env" and '"PATH"' in t.observation for t in found)
    assert everything.retrieve("echo", {"message": "hello"}, [])[0].tool == "echo"


@pytest.mark.anyio
async def test_the_examples_are_in_the_current_turn_only(tmp_path):
    """With the real embedded model: the retrieved real observation is in the prompt of the
    call it was retrieved for, and later prompts still extend earlier ones (KV reuse)."""
    engine = RecordingEngine(small_engine())
    settings = ServeSettings(
        simulator=[str(write_tiny_domain(tmp_path))], grounding=RECORDS, grounding_k=2
    )
    simulator = build_simulator(settings, engine=engine)
    async with Client(build_server(simulator), mode="legacy") as client:
        await client.call_tool("run_command", {"command": "wc -l notes.txt"})
        await client.call_tool("run_command", {"command": "seq 5"})
        # Read inside: the connection's episode ends (and its record closes) with it.
        records = simulator.episodes.all()[0].records
    first, second = (r.messages for r in engine.requests)
    assert "Real observations of similar actions" in first[-1].content
    assert 'run_command {"command": "wc -l a.txt"}\n1 a.txt\n[exit code: 0]' in first[-1].content
    assert first[-1].content.endswith('Arguments: {"command": "wc -l notes.txt"}')
    assert '{"command": "seq 3"}\n1\n2\n3\n[exit code: 0]' in second[-1].content
    # The history shows the first action without its examples: the prompt before it is
    # unchanged, so its KV cache is reused.
    assert second[: len(first) - 1] == first[:-1]
    assert "Real observations" not in second[-3].content
    assert records[1].stats.reused_prompt_tokens > 0
