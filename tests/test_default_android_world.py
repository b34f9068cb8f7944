"""What a new user gets from plain `aw-mcp serve --simulator android`: mobile-mcp's
confirmations come back as the one line the real server prints.

mobile-mcp answers its app, tap, key and orientation tools with one templated line (its
source: ``return `Launched app ${packageName}```) or a thrown error's message. Without a form
for those answers, the default world model (plain Qwen2.5-Coder-0.5B: no adapter is trained
on android) copied the latest element list from the history under every confirmation. The
model runs on the CPU, one thread.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from tests.helpers import default_server, text_of

pytestmark = pytest.mark.quality

DEVICE = {"device": "emulator-5554"}
NOTES = {**DEVICE, "packageName": "com.example.notes"}
# A first session: (tool, arguments, and for a tool mobile-mcp answers with one templated line,
# the template's fixed text before the arguments' values).
SESSION: list[tuple[str, dict[str, str], str | None]] = [
    ("mobile_list_available_devices", {}, None),
    ("mobile_list_apps", DEVICE, "Found these apps on device: "),
    ("mobile_launch_app", NOTES, "Launched app "),
    ("mobile_list_elements_on_screen", DEVICE, None),
    ("mobile_get_foreground_app", DEVICE, "Foreground app: "),
    ("mobile_press_button", {**DEVICE, "button": "HOME"}, "Pressed the button: "),
    ("mobile_get_screen_size", DEVICE, "Screen size is "),
]


def test_a_first_session_gets_mobile_mcps_one_line_confirmations():
    async def episode() -> list[str]:
        async with Client(default_server("--simulator", "android")) as client:
            return [text_of(await client.call_tool(t, arguments)) for t, arguments, _ in SESSION]

    answers = anyio.run(episode)
    elements = answers[3]
    assert len(elements.splitlines()) > 1, elements  # a screen's list, which was copied before
    for (tool, _, prefix), answer in zip(SESSION, answers, strict=True):
        if prefix is not None:
            assert "\n" not in answer.strip(), f"{tool}: {answer!r}"
            assert answer.startswith(prefix), f"{tool}: {answer!r}"
