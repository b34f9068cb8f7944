"""A simulated tool never touches the host: no process, no file write, no network, no reads of
the files an agent names. Proven with a Python audit hook that sees every such operation in
every thread (the model runs in a worker thread) while real calls go through the server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client

import aw_mcp
from tests.helpers import make_server

pytestmark = pytest.mark.anyio

PROCESS_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
)
MUTATING_EVENTS = (
    "os.remove",
    "os.unlink",
    "os.rename",
    "os.replace",
    "os.mkdir",
    "os.rmdir",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.link",
    "os.symlink",
    "os.utime",
    "shutil.rmtree",
    "shutil.move",
    "shutil.copyfile",
)
NETWORK_EVENTS = ("socket.connect", "socket.sendto", "socket.getaddrinfo", "urllib.Request")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

_recording: list[tuple[str, tuple]] | None = None


def _hook(event: str, args: tuple) -> None:
    if _recording is not None and (
        event == "open" or event.startswith(PROCESS_EVENTS + MUTATING_EVENTS + NETWORK_EVENTS)
    ):
        _recording.append((event, args))


sys.addaudithook(_hook)  # hooks cannot be removed; it records only inside `record_host_events`


class record_host_events:
    def __enter__(self) -> list[tuple[str, tuple]]:
        global _recording
        _recording = []
        return _recording

    def __exit__(self, *exc) -> None:
        global _recording
        _recording = None


def _is_write(args: tuple) -> bool:
    _, mode, flags = ([*list(args), None, None, None])[:3]
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        return True
    return isinstance(flags, int) and bool(flags & WRITE_FLAGS)


def _allowed_read(path: object) -> bool:
    """Reads the interpreter itself may do mid-call: modules, the model's own package data."""
    if isinstance(path, int):
        return True
    text = os.fsdecode(path) if isinstance(path, bytes | str | os.PathLike) else str(path)
    roots = {sys.prefix, sys.base_prefix, str(Path(aw_mcp.__file__).parent)}
    return any(text.startswith(root) for root in roots)


async def test_tool_calls_run_no_process_and_touch_no_host_file(small_model_engine, tmp_path):
    canary = tmp_path / "canary.txt"
    canary.write_text("SECRET-CONTENT-ON-THE-HOST")
    created = tmp_path / "created-by-agent.txt"
    _, server = make_server(small_model_engine)
    async with Client(server, mode="legacy") as client:
        await client.call_tool("run_command", {"command": "true"})  # warm: model loaded
        with record_host_events() as events:
            calls = [
                ("run_command", {"command": f"rm -f {canary} && touch {created}"}),
                ("run_command", {"command": "curl -s http://127.0.0.1:9/ ; python3 -c 'print(1)'"}),
                ("read_file", {"path": str(canary)}),
            ]
            results = [await client.call_tool(name, args) for name, args in calls]
    assert all(r.is_error is False for r in results)
    assert canary.read_text() == "SECRET-CONTENT-ON-THE-HOST"  # not deleted
    assert not created.exists()  # not created
    assert all("SECRET-CONTENT" not in r.content[0].text for r in results)  # never read
    assert [e for e, _ in events if e.startswith(PROCESS_EVENTS)] == []
    assert [e for e, _ in events if e.startswith(MUTATING_EVENTS)] == []
    assert [e for e, _ in events if e.startswith(NETWORK_EVENTS)] == []
    opens = [args for event, args in events if event == "open"]
    assert [a for a in opens if _is_write(a)] == []
    assert [a for a in opens if not _allowed_read(a[0])] == []


async def test_the_audit_hook_does_see_host_operations(tmp_path):
    """The hook is live: the same checks catch a process, a write and a delete."""
    import subprocess

    target = tmp_path / "x.txt"
    with record_host_events() as events:
        target.write_text("x")
        target.unlink()
        subprocess.run(["true"], check=True)
    names = [e for e, _ in events]
    assert "subprocess.Popen" in names
    assert "os.remove" in names
    assert any(_is_write(args) for e, args in events if e == "open")
