"""Resources, resource templates, prompts and completions a domain declares, served through
real MCP clients (handshake and 2026-07-28); reads and gets are answered by the engine as
steps of the client's episode.

The engine is the FakeEngine (plumbing: what reached the prompt, what came back).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mcp import Client, MCPError, types

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.loader import load_domain
from aw_mcp.episode.store import EpisodeStore
from aw_mcp.faults.scenario import Scenario
from aw_mcp.faults.scenario_layer import ScenarioFaultLayer
from aw_mcp.files.yaml import parse_yaml_text
from aw_mcp.server.app import build_server
from aw_mcp.server.episode_identity import EPISODE_META_KEY
from aw_mcp.server.world_surface import template_pattern, unfenced
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.testing import FakeEngine
from tests.helpers import TINY_DOMAIN, make_server, text_of
from tests.test_text_grammars import _accepts

pytestmark = pytest.mark.anyio
NOTES_DOMAIN = Path(__file__).parent / "data" / "notes_domain.yaml"


def notes_server(engine: FakeEngine, faults: str | None = None):
    layer = ScenarioFaultLayer([parse_yaml_text(faults, Scenario, "test")]) if faults else None
    simulator = WorldSimulator(
        Catalogue([load_domain(str(NOTES_DOMAIN))]), engine, EpisodeStore(), faults=layer
    )
    return simulator, build_server(simulator)


def echo_last_action(request) -> str:
    return "ECHO " + request.messages[-1].content


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_declared_lists_are_served_as_declared(mode):
    _, server = notes_server(FakeEngine())
    async with Client(server, mode=mode) as client:
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
    assert [(r.uri, r.mime_type) for r in resources] == [("notes://todo.md", "text/markdown")]
    assert [t.uri_template for t in templates] == ["notes://{name}"]
    assert [(p.name, [a.name for a in p.arguments or []]) for p in prompts] == [
        ("summarize", ["note", "style"])
    ]


async def test_a_read_is_a_step_of_the_episode_and_sees_what_the_episode_wrote():
    engine = FakeEngine(echo_last_action)
    simulator, server = notes_server(engine)
    meta = {EPISODE_META_KEY: "ep"}
    async with Client(server) as client:
        await client.call_tool("write_note", {"name": "b.md", "text": "ship it"}, meta=meta)
        read = await client.read_resource("notes://b.md", meta=meta)
        again = await client.read_resource("notes://b.md", meta=meta)
    [content] = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert content.uri == "notes://b.md" and content.mime_type == "text/markdown"
    assert "resources/read" in content.text and "notes://b.md" in content.text
    # the engine saw the write before the read, in the same episode
    prompt = "\n".join(m.content for m in engine.requests[-1].messages)
    assert prompt.index("ship it") < prompt.index("notes://b.md")
    # nothing changed between the two reads: the second is replayed, not asked again
    assert again.contents[0].text == content.text and len(engine.requests) == 2
    [episode] = simulator.episodes.find("ep")
    assert [(r.tool, r.source) for r in episode.records] == [
        ("write_note", "model"),
        ("resources/read", "model"),
        ("resources/read", "replay"),
    ]


async def test_unknown_resources_and_prompts_and_missing_arguments_are_invalid_params():
    _, server = notes_server(FakeEngine())
    async with Client(server) as client:
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("other://x")
        with pytest.raises(MCPError) as no_prompt:
            await client.get_prompt("nope")
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("summarize", {"style": "terse"})
    assert unknown.value.error.code == -32602 and unknown.value.error.data == {"uri": "other://x"}
    assert no_prompt.value.error.code == -32602 and "summarize" in no_prompt.value.error.message
    assert missing.value.error.code == -32602 and "note" in missing.value.error.message


async def test_a_prompt_is_filled_in_by_the_world_model():
    engine = FakeEngine(echo_last_action)
    _, server = notes_server(engine)
    async with Client(server) as client:
        result = await client.get_prompt("summarize", {"note": "todo.md"})
    assert result.description == "Summarize a note."
    [message] = result.messages
    assert message.role == "user"
    assert '"name": "summarize"' in message.content.text and "todo.md" in message.content.text


async def test_completions_come_one_a_line_from_the_world_model():
    engine = FakeEngine("todo.md\ntodo-old.md\n\ntodo.md\n")
    _, server = notes_server(engine)
    async with Client(server) as client:
        prompt_ref = types.PromptReference(type="ref/prompt", name="summarize")
        by_prompt = await client.complete(prompt_ref, {"name": "note", "value": "to"})
        template_ref = types.ResourceTemplateReference(type="ref/resource", uri="notes://{name}")
        by_template = await client.complete(template_ref, {"name": "name", "value": "to"})
    assert by_prompt.completion.values == ["todo.md", "todo-old.md"]
    assert by_template.completion.values == ["todo.md", "todo-old.md"]
    assert '"value": "to"' in engine.requests[0].messages[-1].content


async def test_completions_never_carry_fence_lines():
    engine = FakeEngine("```markdown\nto\n```")  # what the default answered before
    _, server = notes_server(engine)
    async with Client(server) as client:
        prompt_ref = types.PromptReference(type="ref/prompt", name="summarize")
        result = await client.complete(prompt_ref, {"name": "note", "value": "to"})
    assert result.completion.values == ["to"]
    # and the local engines' decoding keeps to values, one a line, never a fence
    grammar = engine.requests[0].grammar
    assert grammar is not None
    assert _accepts(grammar.lark, "todo.md\ntodo-old.md\n") and _accepts(grammar.lark, "")
    assert not _accepts(grammar.lark, "```markdown\nto\n```\n")
    assert not _accepts(grammar.lark, "".join(f"v{i}\n" for i in range(11)))


async def test_a_resource_or_prompt_wrapped_whole_in_a_fence_is_unwrapped():
    engine = FakeEngine("```markdown\n# b\n- ship it\n```")
    _, server = notes_server(engine)
    async with Client(server) as client:
        read = await client.read_resource("notes://b.md")
        prompt = await client.get_prompt("summarize", {"note": "b.md"})
    assert read.contents[0].text == "# b\n- ship it"
    assert prompt.messages[0].content.text == "# b\n- ship it"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("a\n```py\nx\n```", True),  # prose before the block
        ("```\na\n```\nb\n```", True),  # two blocks' fences: the content's own
        ("```json\n{}\n```\n", False),
        ("~~~\nx\n~~~", False),
    ],
)
def test_only_a_fence_around_the_whole_text_is_taken_off(text, kept):
    assert (unfenced(text) == text) is kept


async def test_a_resource_the_world_facts_give_reads_as_given_until_the_world_changes():
    engine = FakeEngine(echo_last_action)
    simulator, server = notes_server(engine)
    meta = {EPISODE_META_KEY: "ep"}
    async with Client(server) as client:
        first = await client.read_resource("notes://todo.md", meta=meta)
        await client.get_prompt("summarize", {"note": "todo.md"}, meta=meta)  # changes nothing
        again = await client.read_resource("notes://todo.md", meta=meta)
        await client.call_tool("write_note", {"name": "todo.md", "text": "- sell milk"}, meta=meta)
        after = await client.read_resource("notes://todo.md", meta=meta)
    assert first.contents[0].text == again.contents[0].text == "- buy milk"
    assert after.contents[0].text.startswith("ECHO")  # the world model answers now
    [episode] = simulator.episodes.find("ep")
    assert [(r.tool, r.source) for r in episode.records] == [
        ("resources/read", "replay"),
        ("prompts/get", "model"),
        ("resources/read", "replay"),
        ("write_note", "model"),
        ("resources/read", "model"),
    ]
    # the fact stays in the prompt the world model answers from
    assert "notes://todo.md: - buy milk" in engine.requests[-1].messages[0].content


async def test_faults_match_resource_reads_by_their_method_name():
    scenario = """
name: unreadable
rules:
  - id: read-fails
    match: {tool: "resources/read"}
    effects: [{kind: error, text: "EACCES: permission denied"}]
"""
    _, server = notes_server(FakeEngine(), scenario)
    async with Client(server) as client:
        with pytest.raises(MCPError) as failed:
            await client.read_resource("notes://todo.md")
        assert (await client.call_tool("write_note", {"name": "a", "text": "b"})).is_error is False
    assert "resources/read failed: EACCES: permission denied" in failed.value.error.message


async def test_only_a_domain_that_declares_them_offers_resources_prompts_and_completions():
    _, server = make_server(FakeEngine(), TINY_DOMAIN)
    async with Client(server, mode="legacy") as client:
        plain = client.server_capabilities
    _, server = notes_server(FakeEngine())
    async with Client(server, mode="legacy") as client:
        notes = client.server_capabilities
    assert plain.resources is None and plain.prompts is None and plain.completions is None
    assert notes.resources is not None and notes.prompts is not None
    assert notes.completions is not None and notes.tools is not None


@pytest.mark.parametrize(
    ("template", "uri", "matches"),
    [
        ("notes://{name}", "notes://a.md", True),
        ("notes://{name}", "notes://dir/a.md", False),
        ("file:///{+path}", "file:///home/dev/a.txt", True),
        ("repo://{owner}/{repo}/issues", "repo://a/b/issues", True),
        ("repo://{owner}/{repo}/issues", "repo://a/b/pulls", False),
    ],
)
def test_template_patterns(template, uri, matches):
    assert bool(template_pattern(template).match(uri)) is matches


# The client's set_logging_level warns that logging is deprecated (2026-07-28).
@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_log_messages_reach_a_handshake_client_only_at_the_level_it_set():
    messages: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    _, server = make_server(FakeEngine("ok"), TINY_DOMAIN)
    async with Client(server, mode="legacy", logging_callback=on_log) as client:
        assert client.server_capabilities.logging is not None
        await client.call_tool("run_command", {"command": "ls"})  # no level set: no message
        await client.set_logging_level("info")
        await client.call_tool("run_command", {"command": "pwd"}, meta={EPISODE_META_KEY: "e"})
        await client.call_tool("run_command", {})  # invalid arguments: an isError answer
        await client.set_logging_level("error")
        await client.call_tool("run_command", {"command": "whoami"})
    assert [(m.level, m.logger, m.data["tool"], m.data["isError"]) for m in messages] == [
        ("info", "aw-mcp", "run_command", False),
        ("warning", "aw-mcp", "run_command", True),
    ]
    assert messages[0].data["episode"] == "e"


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
async def test_a_tool_sends_its_declared_log_messages_before_its_answer(tmp_path):
    """simulation.log_messages: the messages a mirrored server's tool logs while it runs, its
    arguments filled in, in order, only those at or above the client's level."""
    domain = yaml.safe_load(TINY_DOMAIN.read_text())
    domain["tools"][0]["simulation"] = {
        "log_messages": [
            {"level": "debug", "data": "parsing {command}"},
            {"level": "notice", "data": "running {command}", "after_seconds": 0.01},
            {"level": "error", "data": "{command}: exit status 1"},
        ]
    }
    path = tmp_path / "logging.yaml"
    path.write_text(yaml.safe_dump(domain))
    messages: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    engine = FakeEngine("ok")
    _, server = make_server(engine, path)
    async with Client(server, mode="legacy", logging_callback=on_log) as client:
        await client.set_logging_level("info")
        result = await client.call_tool("run_command", {"command": "make"})
    assert text_of(result) == "ok" and len(engine.requests) == 1
    assert [(m.level, m.data if isinstance(m.data, str) else "call") for m in messages] == [
        ("notice", "running make"),
        ("error", "make: exit status 1"),
        ("info", "call"),  # aw-mcp's own message about the call, after its answer
    ]


# The client warns that resources/subscribe is gone in 2026-07-28 (subscriptions/listen).
@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed")
async def test_subscribed_resources_are_reported_updated_after_a_state_changing_call():
    updated: list[str] = []

    async def on_message(message) -> None:
        params = getattr(getattr(message, "root", message), "params", None)
        if type(getattr(message, "root", message)).__name__ == "ResourceUpdatedNotification":
            updated.append(params.uri)

    _, server = notes_server(FakeEngine("ok"))
    async with Client(server, mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.resources.subscribe is True
        await client.call_tool("write_note", {"name": "a", "text": "b"})  # nothing subscribed
        await client.subscribe_resource("notes://todo.md")
        await client.call_tool("write_note", {"name": "todo.md", "text": "- tea"})
        await client.read_resource("notes://todo.md")  # a read changes nothing
        await client.unsubscribe_resource("notes://todo.md")
        await client.call_tool("write_note", {"name": "c", "text": "d"})
        with pytest.raises(MCPError) as unknown:
            await client.subscribe_resource("other://x")
    assert updated == ["notes://todo.md"]
    assert unknown.value.error.code == -32602
