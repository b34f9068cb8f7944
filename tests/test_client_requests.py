"""Tools that call back the MCP client (simulation.client_requests): sampling, elicitation and
roots, over both protocol generations, with the SDK's own client and its callbacks.

Handshake sessions get the requests during the call; 2026-07-28 clients get input_required
results and call again with their answers (the SDK client drives those rounds itself). Either
way the answers reach the world model's prompt and the call's record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters, types
from pydantic import ValidationError

from aw_mcp.domain.loader import load_domain
from aw_mcp.domain.models import ClientRequestSpec, ToolSimulation, fill_template
from aw_mcp.files.yaml import DataFileError
from aw_mcp.testing import FakeEngine
from tests.helpers import make_server, text_of
from tests.http_support import SERVE, http_serve

DOMAIN = Path(__file__).parent / "data" / "asks_client_domain.yaml"
ROOTS = types.ListRootsResult(roots=[types.Root(uri="file:///work/app", name="app")])


class FakeClientUser:
    """The client side: what its user, its LLM and its roots answer; every request seen."""

    def __init__(self, elicit: dict[str, Any] | None = None, action: str = "accept"):
        self.elicit = elicit if elicit is not None else {"ok": True}
        self.action = action
        self.seen: list[tuple[str, Any]] = []

    async def elicitation(self, context: Any, params: Any) -> types.ElicitResult:
        self.seen.append(("elicitation", params))
        content = self.elicit if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]

    async def sampling(self, context: Any, params: Any) -> types.CreateMessageResult:
        self.seen.append(("sampling", params))
        text = types.TextContent(type="text", text="Deploy 42 failed: disk full on web-3.")
        return types.CreateMessageResult(role="assistant", content=text, model="client-llm")

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.seen.append(("roots", None))
        return ROOTS

    def callbacks(self, *kinds: str) -> dict[str, Any]:
        names = {
            "elicitation": ("elicitation_callback", self.elicitation),
            "sampling": ("sampling_callback", self.sampling),
            "roots": ("list_roots_callback", self.roots),
        }
        return dict(names[k] for k in kinds)


def last_prompt(engine: FakeEngine) -> str:
    return engine.requests[-1].messages[-1].content


# --- the data ------------------------------------------------------------------------------


def test_client_requests_are_validated_data():
    domain = load_domain(str(DOMAIN))
    requests = domain.tool("deploy_workspace").simulation.client_requests  # type: ignore[union-attr]
    assert [(r.key, r.kind, r.round, r.required) for r in requests] == [
        ("roots", "roots", 1, True),
        ("environment", "elicitation", 2, True),
        ("note", "sampling", 1, False),
    ]
    with pytest.raises(ValidationError, match="needs a message"):
        ClientRequestSpec(key="k", kind="sampling")
    with pytest.raises(ValidationError, match="unique"):
        ToolSimulation(client_requests=[{"key": "a", "kind": "roots"}] * 2)  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="Input should be 'sampling', 'elicitation'"):
        ClientRequestSpec(key="k", kind="telepathy", message="hi")  # type: ignore[arg-type]


def test_a_domain_file_with_a_broken_client_request_names_the_file(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text(DOMAIN.read_text().replace("kind: roots", "kind: rootz"))
    with pytest.raises(DataFileError, match=r"broken\.yaml"):
        load_domain(str(broken))


def test_templates_take_call_arguments_and_leave_other_braces():
    text = fill_template('Delete {branch}? {"keep": {n}} {unknown}', {"branch": "dev", "n": 2})
    assert text == 'Delete dev? {"keep": 2} {unknown}'


# --- handshake sessions: requests during the call -------------------------------------------


@pytest.mark.anyio
async def test_handshake_session_asks_the_user_and_the_answer_reaches_the_world_model():
    engine = FakeEngine("Deleted branch feature-x.")
    simulator, server = make_server(engine, DOMAIN)
    user = FakeClientUser()
    async with Client(server, mode="legacy", **user.callbacks("elicitation")) as client:
        result = await client.call_tool("delete_branch", {"branch": "feature-x"})
        (episode,) = simulator.episodes.all()  # the connection's episode ends with it
    assert result.is_error is False and text_of(result) == "Deleted branch feature-x."
    ((kind, params),) = user.seen
    assert kind == "elicitation" and params.message.startswith("Delete branch feature-x?")
    assert params.requested_schema["required"] == ["ok"]
    prompt = last_prompt(engine)
    assert "elicitation/create" in prompt and '"action": "accept"' in prompt
    assert '"ok": true' in prompt
    (record,) = episode.records
    assert record.client[0].response == {"action": "accept", "content": {"ok": True}}


@pytest.mark.anyio
async def test_handshake_session_sampling_and_roots_in_rounds():
    engine = FakeEngine("Deployed.")
    _, server = make_server(engine, DOMAIN)
    user = FakeClientUser(elicit={"name": "staging"})
    callbacks = user.callbacks("elicitation", "sampling", "roots")
    async with Client(server, mode="legacy", **callbacks) as client:
        deployed = await client.call_tool("deploy_workspace", {})
        summary = await client.call_tool("summarise_log", {"log": "ERR disk full"})
    assert deployed.is_error is False and summary.is_error is False
    # round 1 (roots, note) before round 2 (environment)
    assert [kind for kind, _ in user.seen] == ["roots", "sampling", "elicitation", "sampling"]
    sampling = user.seen[-1][1]
    assert sampling.messages[0].content.text.endswith("one line: ERR disk full")
    assert sampling.system_prompt == "You summarise logs."
    assert sampling.max_tokens == 60
    deploy_prompt = engine.requests[0].messages[-1].content
    assert "file:///work/app" in deploy_prompt and '"name": "staging"' in deploy_prompt
    assert "disk full on web-3" in last_prompt(engine)


@pytest.mark.anyio
async def test_handshake_client_without_the_capability_gets_a_clear_error_result():
    engine = FakeEngine("never asked")
    simulator, server = make_server(engine, DOMAIN)
    async with Client(server, mode="legacy") as client:  # declares no capabilities
        result = await client.call_tool("delete_branch", {"branch": "x"})
        (episode,) = simulator.episodes.all()
    assert result.is_error is True
    assert "did not declare the 'elicitation' capability" in text_of(result)
    assert engine.requests == []
    assert episode.records[0].source == "invalid-arguments"


@pytest.mark.anyio
async def test_a_declined_elicitation_is_an_answer_the_world_model_sees():
    engine = FakeEngine("Cancelled: the branch was kept.")
    _, server = make_server(engine, DOMAIN)
    user = FakeClientUser(action="decline")
    async with Client(server, mode="legacy", **user.callbacks("elicitation")) as client:
        result = await client.call_tool("delete_branch", {"branch": "x"})
    assert result.is_error is False
    assert '"action": "decline"' in last_prompt(engine)


# --- 2026-07-28: input_required results -------------------------------------------------------


@pytest.mark.anyio
async def test_stateless_client_answers_input_required_rounds_and_the_model_sees_them():
    engine = FakeEngine("Deployed to staging.")
    simulator, server = make_server(engine, DOMAIN)
    user = FakeClientUser(elicit={"name": "staging"})
    async with Client(server, **user.callbacks("elicitation", "sampling", "roots")) as client:
        result = await client.call_tool("deploy_workspace", {})
        episodes = simulator.episodes.all()
    assert result.is_error is False and text_of(result) == "Deployed to staging."
    assert sorted(kind for kind, _ in user.seen[:2]) == ["roots", "sampling"]
    assert user.seen[2][0] == "elicitation"  # round 2, after round 1's answers
    assert len(engine.requests) == 1  # one simulated call, after the last round
    prompt = last_prompt(engine)
    assert "file:///work/app" in prompt and '"name": "staging"' in prompt
    assert [x.key for x in episodes[0].records[0].client] == ["roots", "note", "environment"]


@pytest.mark.anyio
async def test_stateless_rounds_by_hand_state_is_sealed_and_missing_answers_asked_again():
    engine = FakeEngine("ok")
    _, server = make_server(engine, DOMAIN)
    user = FakeClientUser()
    async with Client(server, **user.callbacks("elicitation")) as client:
        session = client.session
        first = await session.call_tool("delete_branch", {"branch": "b"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert list(first.input_requests or {}) == ["confirm"]
        assert first.request_state and "answers" not in first.request_state  # sealed
        wrong = await session.call_tool(
            "delete_branch",
            {"branch": "b"},
            input_responses={"other": types.ElicitResult(action="accept", content={"x": 1})},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(wrong, types.InputRequiredResult)  # asked again
        with pytest.raises(MCPError) as tampered:
            await session.call_tool(
                "delete_branch",
                {"branch": "b"},
                input_responses={"confirm": types.ElicitResult(action="accept", content={"ok": 1})},
                request_state=first.request_state + "x",
                allow_input_required=True,
            )
        assert tampered.value.error.code == types.INVALID_PARAMS
        with pytest.raises(MCPError, match="does not match the requested schema"):
            await session.call_tool(
                "delete_branch",
                {"branch": "b"},
                input_responses={"confirm": types.ElicitResult(action="accept", content={"ok": 1})},
                allow_input_required=True,
            )
        with pytest.raises(MCPError, match="answers elicitation/create with not a"):
            await session.call_tool(
                "delete_branch",
                {"branch": "b"},
                input_responses={"confirm": ROOTS},
                allow_input_required=True,
            )
        done = await session.call_tool(
            "delete_branch",
            {"branch": "b"},
            input_responses={"confirm": types.ElicitResult(action="accept", content={"ok": True})},
            request_state=first.request_state,
        )
    assert isinstance(done, types.CallToolResult) and done.is_error is False
    assert len(engine.requests) == 1


@pytest.mark.anyio
async def test_stateless_client_without_the_capability_gets_minus_32021():
    engine = FakeEngine("never asked")
    _, server = make_server(engine, DOMAIN)
    async with Client(server) as client:
        with pytest.raises(MCPError) as missing:
            await client.call_tool("summarise_log", {"log": "x"})
    assert missing.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert "did not declare the 'sampling' capability" in missing.value.error.message
    assert missing.value.error.data == {"requiredCapabilities": {"sampling": {}}}
    assert engine.requests == []


# --- real transports, real model ---------------------------------------------------------


def stdio_params(records: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=SERVE[0],
        args=[*SERVE[1:], "--simulator", str(DOMAIN), "--record-dir", str(records)],
        env={**os.environ, "AW_MCP_LOG_LEVEL": "WARNING"},
    )


def recorded_exchanges(records: Path) -> list[list[dict[str, Any]]]:
    lines = [json.loads(line) for f in sorted(records.glob("*.jsonl")) for line in f.open()]
    return [line.get("client", []) for line in lines]


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_real_transports_the_client_answers_and_the_record_keeps_it(
    tmp_path, transport, mode
):
    records = tmp_path / "records"
    user = FakeClientUser()
    callbacks = user.callbacks("elicitation", "sampling", "roots")

    async def calls(target: Any) -> list[types.CallToolResult]:
        async with Client(target, mode=mode, **callbacks) as client:
            return [
                await client.call_tool("delete_branch", {"branch": "old"}),
                await client.call_tool("summarise_log", {"log": "ERR"}),
            ]

    if transport == "stdio":
        results = await calls(stdio_params(records))
    else:
        with http_serve(
            tmp_path / "server.log", "--simulator", str(DOMAIN), "--record-dir", str(records)
        ) as url:
            results = await calls(url)
    assert [r.is_error for r in results] == [False, False], [text_of(r) for r in results]
    assert [kind for kind, _ in user.seen] == ["elicitation", "sampling"]
    exchanges = recorded_exchanges(records)
    assert [x[0]["key"] for x in exchanges] == ["confirm", "summary"]
    assert exchanges[0][0]["response"] == {"action": "accept", "content": {"ok": True}}
    assert exchanges[1][0]["response"]["model"] == "client-llm"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_prompt_asks_the_client_first_and_its_simulation_block_stays_private(mode):
    engine = FakeEngine("Release 2.1: faster deploys.")
    _, server = make_server(engine, DOMAIN)
    user = FakeClientUser(elicit={"version": "2.1"})
    async with Client(server, mode=mode, **user.callbacks("elicitation")) as client:
        listed = await client.list_prompts()
        got = await client.get_prompt("release_notes")
    assert listed.prompts[0].name == "release_notes"
    assert "simulation" not in listed.prompts[0].model_dump(by_alias=True)
    assert got.messages[0].content.text == "Release 2.1: faster deploys."
    assert [kind for kind, _ in user.seen] == ["elicitation"]
    assert '"version": "2.1"' in last_prompt(engine)


@pytest.mark.anyio
async def test_replicas_sharing_request_state_key_resume_each_other_s_calls(tmp_path):
    """A round asked by one replica is answered to another (a load balancer without episode
    affinity): with the same --request-state-key the state opens there; without, -32602."""
    canned = str(Path(__file__).parent / "data" / "answer-every-call.faults.yaml")
    args = ["--simulator", str(DOMAIN), "--faults", canned]
    key = {**os.environ, "AW_MCP_REQUEST_STATE_KEY": "k" * 40}
    answer = {"confirm": types.ElicitResult(action="accept", content={"ok": True})}
    call = {"name": "delete_branch", "arguments": {"branch": "b"}}
    with (
        http_serve(tmp_path / "a.log", *args, env=key) as first,
        http_serve(tmp_path / "b.log", *args, env=key) as second,
        http_serve(tmp_path / "c.log", *args) as stranger,
    ):
        async with Client(first, elicitation_callback=FakeClientUser().elicitation) as client:
            asked = await client.session.call_tool(**call, allow_input_required=True)  # type: ignore[arg-type]
        assert isinstance(asked, types.InputRequiredResult)
        async with Client(second, elicitation_callback=FakeClientUser().elicitation) as client:
            done = await client.session.call_tool(
                **call,
                input_responses=answer,
                request_state=asked.request_state,  # type: ignore[arg-type]
            )
        async with Client(stranger, elicitation_callback=FakeClientUser().elicitation) as client:
            with pytest.raises(MCPError) as refused:
                await client.session.call_tool(
                    **call,
                    input_responses=answer,
                    request_state=asked.request_state,  # type: ignore[arg-type]
                )
    assert isinstance(done, types.CallToolResult) and text_of(done) == "canned answer"
    assert refused.value.error.code == types.INVALID_PARAMS


@pytest.mark.anyio
async def test_the_client_s_answers_survive_a_restart_and_reach_exports(tmp_path):
    """Records are durable state: a server restarted on the same record folder shows the
    world model the earlier call's exchange, and the history read back for exports has it."""
    from aw_mcp.records.calls import history_of
    from aw_mcp.records.reader import read_record_file
    from aw_mcp.server.app import build_server
    from aw_mcp.server.episode_identity import episode_meta
    from tests.helpers import make_simulator

    records = tmp_path / "records"
    user = FakeClientUser()
    before = make_simulator(FakeEngine("Deleted."), DOMAIN, record_dir=records)
    async with Client(build_server(before), mode="legacy", **user.callbacks("elicitation")) as c:
        await c.call_tool("delete_branch", {"branch": "old"}, meta=episode_meta("e1"))
    engine = FakeEngine("Deleted.")
    after = make_simulator(engine, DOMAIN, record_dir=records)
    async with Client(build_server(after), mode="legacy", **user.callbacks("elicitation")) as c:
        await c.call_tool("delete_branch", {"branch": "new"}, meta=episode_meta("e1"))
    earlier_step = engine.requests[0].messages[-3].content  # the restored turn's action
    assert "old" in earlier_step and '"ok": true' in earlier_step
    (file,) = records.glob("*.jsonl")
    turns = history_of(read_record_file(file))
    assert [t.action.client[0].key for t in turns] == ["confirm", "confirm"]


@pytest.mark.anyio
async def test_a_handshake_client_s_refusal_is_an_answer_the_world_model_sees():
    """The client's LLM refuses (an error from its callback). On 2026-07-28 there is no way to
    send a refusal as an input response: the SDK client raises it to its caller instead."""
    engine = FakeEngine("No summary.")
    _, server = make_server(engine, DOMAIN)

    async def refuse(context: Any, params: Any) -> types.ErrorData:
        return types.ErrorData(code=-1, message="User rejected sampling request")

    async with Client(server, mode="legacy", sampling_callback=refuse) as client:
        refused = await client.call_tool("summarise_log", {"log": "x"})
    assert refused.is_error is False
    assert "no answer: client error: User rejected sampling request" in last_prompt(engine)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_optional_request_is_left_out_for_a_client_without_it_in_both_generations(mode):
    engine = FakeEngine("Deployed.")
    _, server = make_server(engine, DOMAIN)
    user = FakeClientUser(elicit={"name": "qa"})
    async with Client(server, mode=mode, **user.callbacks("elicitation", "roots")) as client:
        deployed = await client.call_tool("deploy_workspace", {})
    assert deployed.is_error is False
    assert [kind for kind, _ in user.seen] == ["roots", "elicitation"]
    assert "no answer: no sampling capability" in last_prompt(engine)
    assert '"name": "qa"' in last_prompt(engine)
