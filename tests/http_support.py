"""`aw-mcp serve --transport http` as a subprocess on a loopback address, for transport tests."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

SERVE = [sys.executable, "-m", "aw_mcp", "serve", "--n-ctx", "4096", "--threads", "1"]
JSON_AND_SSE = {"Accept": "application/json, text/event-stream"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def start_http_server(
    log,
    *args: str,
    host: str = "127.0.0.1",
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start the server with ``args`` (output to the open file ``log``) on ``port`` (default:
    a free one) and wait until it accepts connections; return the process and its /mcp URL."""
    port = port or free_port(host)
    proc = subprocess.Popen(
        [*SERVE, "--transport", "http", "--host", host, "--port", str(port), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return proc, f"http://{host}:{port}/mcp"
        except OSError:
            if proc.poll() is not None:
                log.flush()
                pytest.fail(f"server exited: {Path(log.name).read_text()}")
            time.sleep(0.2)
    proc.kill()
    pytest.fail("the HTTP server did not start within 60 s")


@contextlib.contextmanager
def http_serve(
    log_path: Path,
    *args: str,
    host: str = "127.0.0.1",
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> Iterator[str]:
    """Run the server with ``args`` until the block ends; yield its /mcp URL."""
    with log_path.open("w") as log:
        proc, url = start_http_server(log, *args, host=host, env=env, port=port)
        try:
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=20)


class RawHttpSession:
    """One Streamable HTTP session driven with raw JSON-RPC bodies; every answer is read,
    whether the server sends it as JSON or as an SSE stream."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout: float = 30):
        self.url = url
        self.http = httpx2.Client(timeout=timeout)
        response = self.http.post(
            url, json=initialize_body(), headers={**JSON_AND_SSE, **(headers or {})}
        )
        assert response.status_code == 200, response.text
        self.headers = {
            **JSON_AND_SSE,
            **(headers or {}),
            "content-type": "application/json",
            "mcp-session-id": response.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        self.post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def post(self, body: str) -> tuple[int, list[Any]]:
        """The status and the JSON-RPC messages of the answer to ``body``."""
        response = self.http.post(self.url, content=body.encode("utf-8"), headers=self.headers)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            messages = [
                json.loads(data)
                # SSE lines end at CR or LF only (str.splitlines also splits at U+2028).
                for line in re.split(r"\r\n|\r|\n", response.text)
                if line.startswith("data:") and (data := line.removeprefix("data:").strip())
            ]
        elif response.content:
            parsed = response.json()
            messages = parsed if isinstance(parsed, list) else [parsed]
        else:
            messages = []
        return response.status_code, messages

    def call_tool(self, request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The result of a tools/call (AssertionError if the answer is not one)."""
        body = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        status, messages = self.post(json.dumps(body))
        [answer] = [m for m in messages if m.get("id") == request_id]
        assert status == 200 and "result" in answer, (status, messages)
        return answer["result"]

    def close(self) -> None:
        self.http.close()


def initialize_body(request_id: int | str = 1) -> dict:
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


# For servers whose every call a fault rule answers: an engine that loads nothing (an
# OpenAI-compatible server nobody runs; its absence is only logged), so these tests neither
# wait for nor depend on a local model.
NO_MODEL = ["--engine", "openai", "--base-url", "http://127.0.0.1:9/v1", "--max-retries", "0"]
