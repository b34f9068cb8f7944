"""Helpers for engine tests: a tiny domain, a request-recording wrapper, a real llama.cpp
OpenAI-compatible server on loopback, and an in-process Streamable HTTP server."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx

from aw_mcp.engines.base import (
    ChatMessage,
    Engine,
    GenerationControl,
    GenerationRequest,
    GenerationResult,
)
from tests.conftest import TEST_THREADS

TINY_DOMAIN = """\
name: tinyterm
description: A tiny terminal used by engine tests.
instructions: |
  You are a Linux terminal. For each command, print exactly what bash prints and nothing else.
generation:
  max_tokens: 16
tools:
- name: run_command
  description: Run a shell command and return its output.
  inputSchema:
    type: object
    properties:
      command: {type: string}
    required: [command]
    additionalProperties: false
"""


def write_tiny_domain(folder: Path) -> Path:
    path = folder / "tinyterm.yaml"
    path.write_text(TINY_DOMAIN, encoding="utf-8")
    return path


class RecordingEngine:
    """Wraps a real engine and keeps every request it was given (to see what reached the
    prompt). The wrapped engine does all the work."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.name = engine.name
        self.requests: list[GenerationRequest] = []
        self.results: list[GenerationResult] = []

    @property
    def context_window(self) -> int:
        return self.engine.context_window

    @property
    def counters(self):
        return self.engine.counters

    @property
    def load(self) -> int:
        return self.engine.load

    def forget(self, cache_key: str) -> None:
        self.engine.forget(cache_key)

    async def start(self) -> None:
        await self.engine.start()

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        return await self.engine.count_tokens(messages)

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        self.requests.append(request)
        result = await self.engine.generate(request, control)
        self.results.append(result)
        return result

    async def aclose(self) -> None:
        await self.engine.aclose()


def prompt_text(request: GenerationRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, process: subprocess.Popen, log: Path, timeout_s: float = 60.0) -> None:
    """Poll ``url`` until it answers (bounded); fail with the process's output if it died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"server exited with {process.returncode}:\n{output}")
        try:
            if httpx.get(url, timeout=2.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not answer within {timeout_s:g} s")


@contextlib.contextmanager
def running_process(args: list[str], ready_url: str, env: dict | None = None) -> Iterator[None]:
    """Start a server process (test infrastructure), wait until it answers, stop it after.

    Its output goes to a file: a pipe nobody reads fills up and blocks the server."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "server.log"
        with log.open("w") as out:
            process = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
            )
            try:
                wait_for_http(ready_url, process, log)
                yield
            finally:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@contextlib.contextmanager
def llama_cpp_server(model: Path, n_ctx: int = 4096) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on a free loopback port; yields base URL."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    args = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(TEST_THREADS),
    ]
    with running_process(args, f"{base_url}/models"):
        yield base_url


@contextlib.asynccontextmanager
async def serving_http(server, port: int) -> AsyncIterator[str]:
    """Serve an MCP ``Server`` over Streamable HTTP in this event loop; yields its URL."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    uv = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(uv.serve)
        with anyio.fail_after(30):
            while not uv.started:
                await anyio.sleep(0.05)
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            uv.should_exit = True
