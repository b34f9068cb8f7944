"""Concurrent RL rollouts from OpenEnv against aw-mcp's simulated terminal.

OpenEnv (``pip install openenv-core==0.3.0``; its MCP environments follow RFC 003) runs the
rollouts: an OpenEnv environment server hosts one ``AwMcpEnvironment`` per WebSocket session,
and each rollout is an OpenEnv ``MCPToolClient`` that resets its environment and steps it with
``CallToolAction``s. The environment forwards each tool call to ``aw-mcp serve --transport
http``, where the world model answers it, and scores the episode (its reward).

Per rollout:
- episode: ``reset(episode_id=...)`` names the aw-mcp episode; every request of that rollout
  carries it as the ``Aw-Episode-Id`` header, so rollouts never share a world, and aw-mcp
  records each in its own file (``--record-dir``);
- reset: the first call after a reset carries ``_meta["aw-mcp/reset"] = true``, so reusing an
  id starts from a fresh world (and fresh fault counters);
- faults: whatever ``aw-mcp serve --faults`` loads; decisions are seeded by (scenario seed,
  episode id, call index), so the same ids give the same faults on every run.

The task: get ``hello`` into notes.txt and show it. The scripted policy writes, then reads,
repeating a call that failed; the environment ends the episode when ``cat notes.txt`` shows
``hello`` or after ``MAX_STEPS`` calls, and its reward is the share of its calls that did not
fail (a fault costs reward).

    aw-mcp serve --transport http --record-dir records/ --faults examples/rl-faults.yaml &
    python examples/openenv_rollouts.py --aw-url http://127.0.0.1:8765/mcp --rollouts 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
import time
from collections.abc import Generator
from typing import Any

import httpx2
import uvicorn
from fastmcp.client.transports import StreamableHttpTransport
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Observation, State
from openenv.core.mcp_client import MCPToolClient

EPISODE_HEADER = "Aw-Episode-Id"  # aw-mcp's episode of a request
RESET_META = "aw-mcp/reset"
MAX_STEPS = 6
PLAN = ["echo hello > notes.txt", "cat notes.txt"]


class EpisodeHeader(httpx2.Auth):
    """Sets the rollout's episode id on every request to aw-mcp (it changes at each reset)."""

    def __init__(self) -> None:
        self.episode_id = "unset"

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, Any, None]:
        request.headers[EPISODE_HEADER] = self.episode_id
        yield request


def call_failed(observation: CallToolObservation) -> bool:
    """A framework error, or an ``isError`` result (an object on the environment's side, a dict
    on the client's: OpenEnv sends observations as JSON and leaves ``metadata`` out)."""
    result = observation.result
    is_error = result.get("is_error") if isinstance(result, dict) else result.is_error
    return observation.error is not None or bool(is_error)


def call_text(result: Any) -> str:
    """The text blocks of a tool result (an object on the server side, a dict on the client)."""
    content = result.get("content", []) if isinstance(result, dict) else result.content
    texts = [b.get("text", "") if isinstance(b, dict) else getattr(b, "text", "") for b in content]
    return "\n".join(texts)


class AwMcpEnvironment(MCPEnvironment):
    """One rollout's environment: aw-mcp's tools, one aw-mcp episode per reset."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, aw_url: str):
        self._episode = EpisodeHeader()
        super().__init__(StreamableHttpTransport(aw_url, auth=self._episode))
        self._state = State(episode_id=None, step_count=0)
        self.calls = self.failures = 0
        self._fresh = False

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        if not episode_id:
            raise ValueError("give each rollout its episode_id (the aw-mcp episode)")
        self._episode.episode_id = episode_id
        self._state = State(episode_id=episode_id, step_count=0)
        self.calls = self.failures = 0
        self._fresh = True
        return Observation(done=False, reward=0.0, metadata={"episode_id": episode_id})

    async def _async_call_tool(self, tool_name: str, arguments: dict) -> Any:
        meta = {RESET_META: True} if self._fresh else None  # a fresh world for a reused id
        self._fresh = False
        async with self.mcp_session() as client:
            return await client.call_tool(tool_name, arguments, raise_on_error=False, meta=meta)

    async def step_async(
        self, action: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if isinstance(action, CallToolAction) and isinstance(observation, CallToolObservation):
            self._state.step_count += 1
            self.calls += 1
            failed = call_failed(observation)
            self.failures += failed
            solved = (
                not failed
                and action.arguments.get("command") == "cat notes.txt"
                and "hello" in call_text(observation.result)
            )
            observation.done = solved or self.calls >= MAX_STEPS
            observation.reward = (
                (self.calls - self.failures) / self.calls if observation.done else 0.0
            )
        return observation

    def _step_impl(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise ValueError(f"only MCP actions are understood, not {type(action).__name__}")

    @property
    def state(self) -> State:
        return self._state


async def rollout(env_url: str, episode_id: str) -> dict[str, Any]:
    """The scripted policy: the plan's next command after a success, the same one again after
    a failure, until the environment says the episode is done."""
    steps: list[dict[str, Any]] = []
    plan = iter(PLAN)
    command = next(plan)
    async with MCPToolClient(base_url=env_url, message_timeout_s=120) as env:
        await env.reset(episode_id=episode_id)
        while True:
            result = await env.step(
                CallToolAction(tool_name="run_command", arguments={"command": command})
            )
            assert isinstance(result.observation, CallToolObservation)
            failed = call_failed(result.observation)
            steps.append({"command": command, "failed": failed})
            if result.done:
                return {"episode": episode_id, "reward": result.reward, "steps": steps}
            if not failed:
                command = next(plan, command)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_environments(aw_url: str, sessions: int) -> tuple[uvicorn.Server, str]:
    """OpenEnv's environment server on loopback, one AwMcpEnvironment per session."""
    app = create_fastapi_app(
        lambda: AwMcpEnvironment(aw_url),
        CallToolAction,
        CallToolObservation,
        max_concurrent_envs=sessions,
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the OpenEnv environment server did not start")
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


async def run_rollouts(env_url: str, episodes: list[str]) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(rollout(env_url, e) for e in episodes)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aw-url", required=True, help="aw-mcp's Streamable HTTP URL (/mcp)")
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--prefix", default="rollout", help="episode ids: PREFIX-00, -01, ...")
    args = parser.parse_args()
    server, env_url = serve_environments(args.aw_url, args.rollouts)
    try:
        episodes = [f"{args.prefix}-{i:02d}" for i in range(args.rollouts)]
        results = asyncio.run(run_rollouts(env_url, episodes))
    finally:
        server.should_exit = True
    print(json.dumps({"rollouts": results}, indent=1))


if __name__ == "__main__":
    main()
