"""Serving with a profile that keeps state (``small-state``), on a fake engine that writes the
blocks a trained model would: the view next to each call, the blocks taken off what the agent
sees, the change kept, recorded, rebuilt after a restart, and told for history cut to fit."""

from __future__ import annotations

import pytest
from mcp import Client

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.models import WorldSpec
from aw_mcp.engines.base import GenerationRequest
from aw_mcp.episode.prompt import SmallStateProfile
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.records.reader import load_record_dir
from aw_mcp.records.sink import RecordSink
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.simulation.simulator import SimulatorOptions, WorldSimulator
from aw_mcp.testing import FakeEngine

pytestmark = pytest.mark.anyio
P = "/home/dev/project"
WORLD = WorldSpec(
    facts={
        "working_directory": P,
        "home": "/home/dev",
        "files": {"notes.txt": "buy tea\n"},
        "git": f"{P} is not a git repository",
    }
)

# What a model trained on small-state writes for each command (the test's script of it).
ANSWERS = {
    "echo pay rent >> notes.txt": (
        "<change>\nappend notes.txt\n|pay rent\n</change>\n[exit code: 0]"
    ),
    "cat notes.txt": "<recall>\nfile notes.txt\n</recall>\nbuy tea\npay rent\n[exit code: 0]",
    "mkdir old && mv notes.txt old/": (
        "<change>\nmkdir old\nmv notes.txt old/notes.txt\nfrobnicate\n</change>\n[exit code: 0]"
    ),
    "cd old": "<change>\ncd old\n</change>\n[exit code: 0]",
    "wc -l notes.txt": "<recall>\nfile notes.txt\n</recall>\n2 notes.txt\n[exit code: 0]",
    "echo hi": "hi\n[exit code: 0]",
}


def scripted(request: GenerationRequest) -> str:
    command = request.messages[-1].content.split('"command": "', 1)[1].split('"}', 1)[0]
    return ANSWERS[command]


def simulator(engine: FakeEngine, record_dir=None, **options) -> WorldSimulator:
    domain = load_domain("terminal")
    store = EpisodeStore(sink=RecordSink(record_dir) if record_dir else None)
    return WorldSimulator(
        Catalogue([domain], extra_world=WORLD),
        engine,
        store,
        profile=SmallStateProfile(),
        options=SimulatorOptions(**options),
    )


async def run(client: Client, command: str) -> str:
    result = await client.call_tool(
        "run_command", {"command": command}, meta={EPISODE_META_KEY: "e1"}
    )
    return result.content[0].text


async def test_the_agent_sees_observations_and_the_model_sees_the_state_it_kept(tmp_path):
    engine = FakeEngine(scripted)
    async with Client(build_server(simulator(engine, tmp_path))) as client:
        seen = [await run(client, c) for c in list(ANSWERS)[:5]]
    assert seen == [
        "[exit code: 0]",
        "buy tea\npay rent\n[exit code: 0]",
        "[exit code: 0]",
        "[exit code: 0]",
        "2 notes.txt\n[exit code: 0]",
    ]
    prompts = [r.messages for r in engine.requests]
    # the first call's view: where it stands and the file it names, numbered
    assert prompts[0][-1].content.endswith(
        f"<state>\ncwd {P}\ndir .\n|notes.txt\nfile notes.txt\n1|buy tea\n</state>"
    )
    # the second: the append kept
    assert "file notes.txt\n1|buy tea\n2|pay rent\n" in prompts[1][-1].content
    # the last: the move and the cd kept (notes.txt is now old/notes.txt, and we are in old)
    assert f"cwd {P}/old\ndir .\n|notes.txt\nfile notes.txt\n1|buy tea\n2|pay rent\n" in (
        prompts[4][-1].content
    )
    # earlier turns come back as they were served: the view, then the model's blocks
    assert prompts[4][-2].content.startswith("<change>\ncd old\n</change>")
    [episode] = load_record_dir(tmp_path)
    steps = [r.state for r in episode.records]
    assert steps[2].problems == ["'frobnicate': unknown change line 'frobnicate'"]
    assert [r.view is not None for r in episode.records] == [True] * 5
    assert steps[1].recall.paths[f"{P}/notes.txt"].kind == "file"


async def test_a_restarted_server_rebuilds_the_state_from_the_records(tmp_path):
    async with Client(build_server(simulator(FakeEngine(scripted), tmp_path))) as client:
        for command in list(ANSWERS)[:4]:
            await run(client, command)
    engine = FakeEngine(scripted)
    async with Client(build_server(simulator(engine, tmp_path))) as client:
        assert await run(client, "wc -l notes.txt") == "2 notes.txt\n[exit code: 0]"
    view = engine.requests[0].messages[-1].content
    assert f"cwd {P}/old\ndir .\n|notes.txt\nfile notes.txt\n1|buy tea\n2|pay rent\n" in view


async def test_a_view_repeats_no_block_an_earlier_view_showed_and_a_restart_cuts_the_same(
    tmp_path,
):
    engine = FakeEngine(scripted)
    async with Client(build_server(simulator(engine, tmp_path))) as client:
        await run(client, "cat notes.txt")
        await run(client, "wc -l notes.txt")
    assert "file notes.txt\n1|buy tea\n" in engine.requests[0].messages[-1].content
    second = engine.requests[1].messages[-1].content
    assert second.endswith(f"<state>\ncwd {P}\ndir . as above\nfile notes.txt as above\n</state>")
    restarted = FakeEngine(scripted)
    async with Client(build_server(simulator(restarted, tmp_path))) as client:
        await run(client, "cat notes.txt")
    assert restarted.requests[0].messages[-1].content.endswith("file notes.txt as above\n</state>")
    # the earlier turns come back as they were served, the first view whole
    assert "file notes.txt\n1|buy tea\n" in restarted.requests[0].messages[-5].content


@pytest.mark.parametrize(
    ("context_window", "window_tokens"),
    [(900, None), (100_000, 900)],  # the context window, or --window-tokens below it
    ids=["context-window", "window-tokens"],
)
async def test_history_cut_to_fit_is_told_as_the_state_it_left(context_window, window_tokens):
    engine = FakeEngine(scripted, context_window=context_window)
    async with Client(build_server(simulator(engine, window_tokens=window_tokens))) as client:
        for command in list(ANSWERS)[:4]:
            await run(client, command)
        await run(client, "echo hi")
    system = engine.requests[-1].messages[0].content
    assert "earlier steps are not shown; the state they left:\n<state>" in system
    # three turns cut: the move they made is in the state; the `cd old` turn is still shown
    assert f"<state>\ncwd {P}\nfile old/notes.txt\n1|buy tea\n2|pay rent\n</state>" in system


async def test_a_profile_that_keeps_no_state_serves_as_before():
    engine = FakeEngine("hi\n[exit code: 0]")
    domain = load_domain("terminal")
    plain = WorldSimulator(Catalogue([domain], extra_world=WORLD), engine, EpisodeStore())
    async with Client(build_server(plain)) as client:
        assert await run(client, "echo hi") == "hi\n[exit code: 0]"
    assert "<state>" not in engine.requests[0].messages[-1].content


async def test_a_world_with_no_state_still_has_the_blocks_taken_off():
    """The os world names no working directory, so there is no state to keep; a model that
    keeps state still writes its blocks, and the agent never sees them."""
    engine = FakeEngine("<recall>\nfile /home/alex/notes.txt\n</recall>\nbuy tea")
    simulator = WorldSimulator(
        Catalogue([load_domain("os")]), engine, EpisodeStore(), profile=SmallStateProfile()
    )
    async with Client(build_server(simulator)) as client:
        result = await client.call_tool(
            "read_text_file", {"path": "/home/alex/notes.txt"}, meta={EPISODE_META_KEY: "e1"}
        )
    assert result.content[0].text == "buy tea"
    assert "<state>" not in engine.requests[0].messages[-1].content  # no view: no state
