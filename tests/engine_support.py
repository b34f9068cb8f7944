"""Helpers for engine tests: a tiny domain, a request-recording wrapper, a real llama.cpp
OpenAI-compatible server on loopback, and an in-process Streamable HTTP server."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from aw_mcp.engines.base import (
    GenerationRequest,
)
from aw_mcp.testing import free_port
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


def prompt_text(request: GenerationRequest) -> str:
    return "\n".join(m.content for m in request.messages)


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
