"""`aw-mcp serve --transport http` as a subprocess on a loopback address, for transport tests."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVE = [sys.executable, "-m", "aw_mcp", "serve", "--n-ctx", "4096", "--threads", "1"]
JSON_AND_SSE = {"Accept": "application/json, text/event-stream"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_serve(
    log_path: Path, *args: str, host: str = "127.0.0.1", env: dict[str, str] | None = None
) -> Iterator[str]:
    """Run the server with ``args`` until the block ends; yield its /mcp URL."""
    port = free_port(host)
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [*SERVE, "--transport", "http", "--host", host, "--port", str(port), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    socket.create_connection((host, port), timeout=0.5).close()
                    break
                except OSError:
                    if proc.poll() is not None:
                        pytest.fail(f"server exited: {log_path.read_text()}")
                    time.sleep(0.2)
            else:
                pytest.fail("the HTTP server did not start within 60 s")
            yield f"http://{host}:{port}/mcp"
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def initialize_body(request_id: int = 1) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-test-client", "version": "0"},
        },
    }
