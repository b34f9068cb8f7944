"""What the server says about list changes, and ``subscriptions/listen`` (2026-07-28) for
resource updates: per episode, after state-changing calls, with the SDK's own client."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourceUpdated

from aw_mcp.server.episode_identity import EPISODE_HEADER
from aw_mcp.testing import FakeEngine
from tests.helpers import TINY_DOMAIN, make_server
from tests.http_support import http_serve

pytestmark = pytest.mark.anyio
DATA = Path(__file__).parent / "data"
NOTES = DATA / "notes_domain.yaml"
TODO = "notes://todo.md"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_lists_never_change_and_the_server_says_so_in_both_generations(mode):
    _, notes = make_server(FakeEngine("ok"), NOTES)
    async with Client(notes, mode=mode) as client:
        capabilities = client.server_capabilities
    assert capabilities.tools.list_changed is False
    assert capabilities.prompts.list_changed is False
    assert capabilities.resources.list_changed is False
    # handshake: resources/subscribe; 2026-07-28: subscriptions/listen
    assert capabilities.resources.subscribe is True
    _, tiny = make_server(FakeEngine("ok"), TINY_DOMAIN)
    async with Client(tiny, mode=mode) as client:  # no resources: nothing to listen for
        assert client.server_capabilities.resources is None
        assert client.server_capabilities.tools.list_changed is False


async def collect(client: Client, into: list[str], ready: anyio.Event) -> None:
    async with client.listen(resource_subscriptions=[TODO]) as subscription:
        ready.set()
        async for event in subscription:
            assert isinstance(event, ResourceUpdated)
            into.append(event.uri)


async def test_a_listening_client_is_told_after_each_state_changing_call_only():
    _, server = make_server(FakeEngine("ok"), NOTES)
    updated: list[str] = []
    async with Client(server) as client, anyio.create_task_group() as tg:
        ready = anyio.Event()
        tg.start_soon(collect, client, updated, ready)
        await ready.wait()
        await client.call_tool("write_note", {"name": "todo.md", "text": "- tea"})
        await client.read_resource(TODO)  # a read changes nothing
        await client.call_tool("write_note", {"name": "x", "text": 7})  # invalid: no change
        with anyio.fail_after(5):
            while not updated:
                await anyio.sleep(0.05)
        await anyio.sleep(0.3)
        tg.cancel_scope.cancel()
    assert updated == [TODO]


async def test_over_http_one_episode_s_calls_never_wake_another_episode_s_listener(tmp_path):
    args = ["--simulator", str(NOTES), "--faults", str(DATA / "answer-every-call.faults.yaml")]
    with http_serve(tmp_path / "server.log", *args) as url:

        def client(episode: str) -> tuple[httpx2.AsyncClient, Client]:
            http = httpx2.AsyncClient(headers={EPISODE_HEADER: episode}, timeout=30)
            return http, Client(streamable_http_client(url, http_client=http))

        (http_a, listener), (http_a2, same), (http_b, other) = (
            client("ep-a"),
            client("ep-a"),
            client("ep-b"),
        )
        updated: list[str] = []
        async with (
            http_a,
            http_a2,
            http_b,
            listener,
            same,
            other,
            anyio.create_task_group() as tg,
        ):
            ready = anyio.Event()
            tg.start_soon(collect, listener, updated, ready)
            await ready.wait()
            await other.call_tool("write_note", {"name": "todo.md", "text": "b"})
            await anyio.sleep(0.5)
            assert updated == []  # episode ep-b's world is not ep-a's
            await same.call_tool("write_note", {"name": "todo.md", "text": "a"})
            with anyio.fail_after(10):
                while not updated:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    assert updated == [TODO]
