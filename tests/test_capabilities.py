"""Each protocol generation is told only what it is served: every capability the server
advertises, in the handshake generation and in 2026-07-28, has methods that answer."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError, types

from aw_mcp.server.app import build_server
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
CAPTURE = Path(__file__).parent / "data" / "everything-capture.json"  # tools, resources, prompts


async def exercise(client: Client, mode: str) -> dict[str, str]:
    """Call each advertised capability's methods; what each answered (or the error)."""
    capabilities = client.server_capabilities
    answered: dict[str, str] = {}

    async def attempt(name: str, call) -> None:
        try:
            await call()
        except MCPError as exc:
            answered[name] = f"error {exc.error.code}: {exc.error.message}"
        else:
            answered[name] = "ok"

    if capabilities.tools is not None:
        await attempt("tools", client.list_tools)
    if capabilities.prompts is not None:
        await attempt("prompts", client.list_prompts)
    if capabilities.completions is not None:
        prompt = (await client.list_prompts()).prompts[0]
        argument = (prompt.arguments or [types.PromptArgument(name="x")])[0].name
        await attempt(
            "completions",
            lambda: client.complete(
                types.PromptReference(type="ref/prompt", name=prompt.name),
                {"name": argument, "value": ""},
            ),
        )
    if capabilities.logging is not None:
        await attempt("logging", lambda: client.set_logging_level("info"))
    if capabilities.resources is not None:
        uri = (await client.list_resources()).resources[0].uri
        await attempt("resources", lambda: client.read_resource(uri))
        if capabilities.resources.subscribe:
            if mode == "legacy":
                await attempt("subscribe", lambda: client.subscribe_resource(uri))
            else:  # 2026-07-28 subscribes on subscriptions/listen

                async def listen() -> None:
                    with anyio.fail_after(10):
                        async with client.listen(resource_subscriptions=[uri]):
                            pass

                await attempt("subscribe", listen)
    return answered


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["handshake", "2026-07-28"])
async def test_every_advertised_capability_answers_in_each_generation(mode):
    engine = FakeEngine('{"ok": true}')
    server = build_server(build_simulator(ServeSettings(tools_from=[CAPTURE]), engine=engine))
    async with Client(server, mode=mode) as client:
        answered = await exercise(client, mode)
    assert answered and all(result == "ok" for result in answered.values()), answered
    expected = {"tools", "prompts", "completions", "resources", "subscribe"}
    assert set(answered) == (expected | {"logging"} if mode == "legacy" else expected)
