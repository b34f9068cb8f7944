"""Handshake sessions a careless or hostile HTTP client leaves open: does the server stay open?

Starts `aw-mcp serve --transport http` with --max-sessions CAP, then opens CLIENTS sessions
(initialize, never closed: what a client that crashes or forgets DELETE leaves behind) and
prints how many were refused and the server's resident memory after every CHUNK sessions.
With the bound, every client is admitted (the least recently used idle session is closed)
and memory levels off; `--max-sessions` as large as CLIENTS shows the unbounded growth.

    PYTHONPATH=src python benchmarks/http_sessions.py --clients 3000 --max-sessions 1000
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

JSON_AND_SSE = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "careless-client", "version": "0"},
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=3000)
    parser.add_argument("--max-sessions", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=500)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aw_mcp",
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
            "--max-sessions",
            str(args.max_sessions),
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with httpx2.Client(timeout=30) as http:
            for _ in range(100):
                try:
                    http.get(url)
                    break
                except httpx2.TransportError:
                    time.sleep(0.2)
            refused = 0
            started = time.monotonic()
            print(f"max-sessions {args.max_sessions}: sessions opened, refused, server RSS MB")
            for n in range(1, args.clients + 1):
                response = http.post(url, json=INITIALIZE, headers=JSON_AND_SSE)
                refused += response.status_code != 200
                if n % args.chunk == 0:
                    print(f"{n:8d} {refused:8d} {rss_mb(server.pid):10.0f}")
            print(f"{args.clients / (time.monotonic() - started):.0f} initializes/s")
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
