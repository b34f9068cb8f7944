"""Builders for evaluation tests: AgentWorldBench-shaped samples and a fake judge server."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from aw_mcp.domain.models import ToolCall
from aw_mcp.episode.prompt import AgentWorldProfile, PromptProfile
from aw_mcp.testing import free_port


def episode_samples(
    task: str,
    episode: str,
    calls: list[tuple[str, dict[str, Any], str]],
    gens: list[str],
    profile: PromptProfile | None = None,
) -> list[dict[str, Any]]:
    """One prediction row per turn of an episode of (tool, arguments, real observation),
    rendered as AgentWorldBench does (the AgentWorld profile by default)."""
    profile = profile or AgentWorldProfile()
    prompt = [
        profile.action_message(k, ToolCall(tool=tool, arguments=args), [])
        for k, (tool, args, _) in enumerate(calls, start=1)
    ]
    response = [profile.observation_message(obs) for _, _, obs in calls]
    return [
        {
            "task": task,
            "id": f"{episode}-{k}",
            "prompt": prompt,
            "response": response,
            "current_prompt": prompt[k - 1],
            "system_str": f"You simulate {task}.",
            "turn_idx": k,
            "total_turns": len(calls),
            "gen": gen,
        }
        for k, gen in enumerate(gens, start=1)
    ]


def write_jsonl(path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@contextlib.contextmanager
def fake_openai_server(answer: Callable[[list[dict[str, str]]], str]) -> Iterator[tuple[str, list]]:
    """A minimal OpenAI-compatible server on loopback (models list, streamed chat
    completions); ``answer(messages)`` gives each reply. Yields (base URL, requests seen)."""
    seen: list[dict[str, Any]] = []

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"data": [{"id": "fake-judge"}]})

    async def chat(request: Request) -> StreamingResponse:
        body = await request.json()
        seen.append(body)
        text = answer(body["messages"])

        async def events():
            chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
            yield f"data: {json.dumps(chunk)}\n\n"
            done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            yield f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(
        routes=[
            Route("/v1/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.should_exit = True
        thread.join(timeout=10)
