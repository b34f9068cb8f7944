"""`aw-mcp view` in a real headless browser (Debian's chromium): the page's script runs
without console errors, shows every step, and filters by the URL hash.

Skipped, saying so, where chromium is not installed (``apt-get install chromium``; .ci/run
installs it when it can). Set AW_MCP_CHROMIUM to use another binary.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from aw_mcp.cli import main
from aw_mcp.server.episode_identity import EPISODE_HEADER
from tests.helpers import TINY_DOMAIN
from tests.http_support import http_serve
from tests.test_viewer import step_items
from tests.viewer_support import real_counterpart, simulated_record_dir

CHROMIUM = (
    os.environ.get("AW_MCP_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
pytestmark = [
    pytest.mark.external,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no chromium on PATH (apt-get install chromium, or AW_MCP_CHROMIUM)",
    ),
]
CONSOLE = re.compile(r":CONSOLE[:(]")


def headless(profile: Path, url: str, *flags: str) -> tuple[str, list[str]]:
    """Load ``url``; return what --dump-dom printed and the page's console messages."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",  # tests may run as root, in a container
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *flags,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if CONSOLE.search(line)]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    records = simulated_record_dir(tmp_path_factory.mktemp("records"))
    real_counterpart(records / "real")
    out = tmp_path_factory.mktemp("page") / "report.html"
    assert main(["view", str(records), "--out", str(out)]) == 0
    return out


def test_the_console_check_sees_a_script_error(tmp_path: Path) -> None:
    """The check below can fail: a page whose script throws shows up in the console lines."""
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>throw new Error('boom')</script></body></html>")
    _, console = headless(tmp_path / "profile", broken.as_uri(), "--dump-dom")
    assert any("boom" in line for line in console)


def test_every_step_shows_without_console_errors(page: Path, tmp_path: Path) -> None:
    dom, console = headless(tmp_path / "profile", page.as_uri(), "--dump-dom")
    assert console == []
    steps = step_items(dom)
    assert len(steps) == 11
    assert not [s for s in steps if "hidden" in s]
    assert 'data-shown="11"' in dom


def test_a_filter_in_the_hash_hides_the_other_steps(page: Path, tmp_path: Path) -> None:
    dom, console = headless(
        tmp_path / "profile", page.as_uri() + "#source=fault&error=1", "--dump-dom"
    )
    assert console == []
    shown = [s for s in step_items(dom) if "hidden" not in s]
    assert [(s["data-tool"], s["data-source"]) for s in shown] == [("search", "fault")]
    assert 'data-shown="1"' in dom
    # the select shows the filter the hash chose
    dom_tool, _ = headless(tmp_path / "profile", page.as_uri() + "#tool=get_item", "--dump-dom")
    assert {s["data-tool"] for s in step_items(dom_tool) if "hidden" not in s} == {"get_item"}


def test_screenshot(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "viewer.png"
    headless(
        tmp_path / "profile",
        page.as_uri(),
        f"--screenshot={shot}",
        "--window-size=1280,1800",
        "--hide-scrollbars",
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    print(f"screenshot: {shot}")


def test_the_live_ui_runs_under_its_content_security_policy(tmp_path: Path) -> None:
    """/ui of a server answering with the embedded model: the inline script runs (the CSP
    allows it and nothing else), the hash filter applies, and nothing breaks in the console."""

    async def calls(url: str) -> None:
        http = httpx2.AsyncClient(headers={EPISODE_HEADER: "browser-ep"}, timeout=120)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            await client.call_tool("run_command", {"command": "ls"})
            await client.call_tool("run_command", {})  # refused: invalid arguments

    args = ["--simulator", str(TINY_DOMAIN), "--ui"]
    with http_serve(tmp_path / "server.log", *args) as url:
        anyio.run(calls, url)
        ui = url.removesuffix("/mcp") + "/ui"
        dom, console = headless(tmp_path / "profile", ui + "#error=1", "--dump-dom")
        shot = tmp_path / "ui.png"
        headless(tmp_path / "profile", ui, f"--screenshot={shot}", "--window-size=1280,900")
    assert console == []
    shown = [s for s in step_items(dom) if "hidden" not in s]
    assert [s["data-source"] for s in shown] == ["invalid-arguments"]
    assert 'data-shown="1"' in dom  # set by the script: it ran
    print(f"screenshot: {shot}")
