"""The OpenAI-compatible engine.

Against a real server: llama-cpp-python's ``llama_cpp.server`` on loopback running the
shipped SmolLM2 GGUF (started by a fixture, stopped after). The retry and reasoning-stream
plumbing is also checked with httpx's in-process transport, where a real small model
cannot be made to fail or to think on cue.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import anyio
import httpx
import pytest

from aw_mcp.engines.base import ChatMessage, GenerationControl, GenerationRequest
from aw_mcp.engines.openai_compat import (
    OpenAICompatEngine,
    OpenAICompatOptions,
    estimate_tokens,
)
from aw_mcp.episode.prompt import AgentWorldProfile
from aw_mcp.errors import EngineError
from aw_mcp.testing import free_port, small_model_path
from tests.engine_support import llama_cpp_server

HELLO = [ChatMessage(role="user", content="Say hello.")]


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with llama_cpp_server(small_model_path()) as url:
        yield url


def _engine(url: str, **options) -> OpenAICompatEngine:
    return OpenAICompatEngine(OpenAICompatOptions(base_url=url, n_ctx=4096, **options))


@pytest.mark.anyio
async def test_streams_an_answer_from_a_real_server(server_url):
    engine = _engine(server_url)
    await engine.start()
    assert engine.model is not None and engine.model.endswith(".gguf")
    counts: list[int] = []
    control = GenerationControl(on_token=counts.append)
    result = await engine.generate(GenerationRequest(messages=HELLO, max_tokens=8), control)
    assert result.text.strip()
    assert result.finish_reason in ("stop", "length")
    assert counts and counts == sorted(counts)  # progress per streamed chunk
    assert result.stats.completion_tokens == counts[-1]
    assert engine.counters.generations == 1
    await engine.aclose()


@pytest.mark.anyio
async def test_stop_strings_cut_the_answer(server_url):
    engine = _engine(server_url)
    free = await engine.generate(GenerationRequest(messages=HELLO, max_tokens=12))
    words = free.text.split()
    assert len(words) >= 3, free.text
    stop = " " + words[2]
    cut = await engine.generate(GenerationRequest(messages=HELLO, max_tokens=12, stop=[stop]))
    assert cut.text == free.text[: free.text.index(stop)]
    await engine.aclose()


@pytest.mark.anyio
async def test_cancelling_closes_the_stream_and_the_server_keeps_serving(server_url):
    engine = _engine(server_url)
    long_request = GenerationRequest(
        messages=[ChatMessage(role="user", content="Count from 1 to 500, one per line.")],
        max_tokens=400,
    )
    with anyio.move_on_after(60) as scope:
        async with anyio.create_task_group() as tg:
            control = GenerationControl()

            def on_token(n: int) -> None:
                if n >= 3:
                    tg.cancel_scope.cancel()  # what a client's notifications/cancelled does

            control.on_token = on_token
            tg.start_soon(engine.generate, long_request, control)
    assert not scope.cancelled_caught  # cancelled by us, not by the safety timeout
    assert engine.counters.generations == 0  # nothing was returned as an answer
    # The connection was closed, not left streaming: the next request is served.
    result = await engine.generate(GenerationRequest(messages=HELLO, max_tokens=4))
    assert result.text
    await engine.aclose()


@pytest.mark.anyio
async def test_schema_mode_the_server_rejects_is_dropped_once(server_url):
    """llama-cpp-python's server knows response_format json_object but not json_schema."""
    engine = _engine(server_url)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    request = GenerationRequest(messages=HELLO, max_tokens=16, json_schema=schema)
    result = await engine.generate(request)
    assert engine._json_mode == "off"
    assert result.finish_reason in ("stop", "length")

    constrained = _engine(server_url, json_mode="json_object")
    result = await constrained.generate(request.model_copy(update={"max_tokens": 32}))
    assert constrained._json_mode == "json_object"
    assert result.text.lstrip().startswith("{")
    await engine.aclose()
    await constrained.aclose()


@pytest.mark.anyio
async def test_token_counts_fall_back_to_an_estimate(server_url):
    engine = _engine(server_url)  # this server has no /tokenize: estimated
    messages = [ChatMessage(role="system", content="x" * 400), *HELLO]
    assert await engine.count_tokens(messages) == estimate_tokens(messages)
    assert estimate_tokens(messages) == 100 + 3 + 8 * 3
    await engine.aclose()


@pytest.mark.anyio
async def test_unreachable_server_fails_clearly_after_retries():
    port = free_port()  # nothing listens there
    engine = _engine(f"http://127.0.0.1:{port}/v1", max_retries=2, backoff_s=0.01)
    with pytest.raises(EngineError, match="failed 3 times: ConnectError"):
        await engine.generate(GenerationRequest(messages=HELLO, max_tokens=4))


# -- plumbing with an in-process transport ----------------------------------------------------


def _sse(*events: dict) -> bytes:
    lines = [f"data: {json.dumps(e)}\n\n" for e in events]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def _delta(finish: str | None = None, **delta) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


MODELS = {"data": [{"id": "served-model", "max_model_len": 2048}]}


def _transport(chat_responses: list[httpx.Response], seen: list[httpx.Request]):
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json=MODELS)
        if request.url.path.endswith("/tokenize"):
            return httpx.Response(404, json={"detail": "Not Found"})
        return chat_responses.pop(0)

    return httpx.MockTransport(handle)


def _stream_response(*events: dict) -> httpx.Response:
    return httpx.Response(200, content=_sse(*events), headers={"content-type": "text/event-stream"})


@pytest.mark.anyio
async def test_retries_5xx_with_backoff_and_sends_the_api_key(monkeypatch):
    monkeypatch.setenv("AW_MCP_OPENAI_API_KEY", "sk-test-123")
    seen: list[httpx.Request] = []
    responses = [
        httpx.Response(503, json={"error": {"message": "overloaded"}}),
        httpx.Response(502, text="bad gateway"),
        _stream_response(_delta(content="hel"), _delta("stop", content="lo")),
    ]
    engine = OpenAICompatEngine(
        OpenAICompatOptions(base_url="http://server/v1", backoff_s=0.01, n_ctx=4096),
        transport=_transport(responses, seen),
    )
    result = await engine.generate(GenerationRequest(messages=HELLO, max_tokens=4))
    assert result.text == "hello" and result.finish_reason == "stop"
    chats = [r for r in seen if r.url.path.endswith("/chat/completions")]
    assert len(chats) == 3
    assert all(r.headers["authorization"] == "Bearer sk-test-123" for r in chats)
    body = json.loads(chats[0].content)
    assert body["model"] == "served-model" and body["stream"] is True
    assert engine.context_window == 2048  # the server's smaller limit wins


@pytest.mark.anyio
@pytest.mark.parametrize("header", ["1", "HTTP-DATE"])
async def test_a_429_waits_as_long_as_retry_after_says(header):
    if header == "HTTP-DATE":
        from email.utils import formatdate

        header = formatdate(time.time() + 2, usegmt=True)  # 1-2 s from now, by the clock
    seen: list[httpx.Request] = []
    responses = [
        httpx.Response(
            429, json={"error": {"message": "slow down"}}, headers={"Retry-After": header}
        ),
        _stream_response(_delta("stop", content="ok")),
    ]
    engine = OpenAICompatEngine(
        OpenAICompatOptions(base_url="http://server/v1", backoff_s=0.01),
        transport=_transport(responses, seen),
    )
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    engine._sleep = record
    result = await engine.generate(GenerationRequest(messages=HELLO, max_tokens=4))
    assert result.text == "ok"
    (wait,) = waits
    assert 0.9 <= wait <= 2.0  # the server's wait, not the 0.01 s backoff


@pytest.mark.anyio
async def test_client_errors_are_not_retried():
    seen: list[httpx.Request] = []
    responses = [httpx.Response(401, json={"error": {"message": "invalid api key"}})]
    engine = OpenAICompatEngine(
        OpenAICompatOptions(base_url="http://server/v1", backoff_s=0.01),
        transport=_transport(responses, seen),
    )
    with pytest.raises(EngineError, match=r"HTTP 401: invalid api key.*AW_MCP_OPENAI_API_KEY"):
        await engine.generate(GenerationRequest(messages=HELLO, max_tokens=4))


@pytest.mark.anyio
async def test_an_error_that_is_not_about_the_schema_keeps_structured_output_on():
    seen: list[httpx.Request] = []
    too_long = {"error": {"message": "This model's maximum context length is 2048 tokens"}}
    responses = [httpx.Response(400, json=too_long)]
    engine = OpenAICompatEngine(
        OpenAICompatOptions(base_url="http://server/v1", backoff_s=0.01),
        transport=_transport(responses, seen),
    )
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    with pytest.raises(EngineError, match="maximum context length"):
        await engine.generate(GenerationRequest(messages=HELLO, max_tokens=4, json_schema=schema))
    assert engine._json_mode == "json_schema"


@pytest.mark.anyio
async def test_the_reasoning_budget_is_set_aside_from_the_context_window():
    engine = OpenAICompatEngine(
        OpenAICompatOptions(base_url="http://server/v1", n_ctx=8192, reasoning_budget=3000)
    )
    assert engine.context_window == 8192 - 3000


@pytest.mark.anyio
async def test_reasoning_budget_and_separated_thinking():
    seen: list[httpx.Request] = []
    responses = [
        # A server with a reasoning parser: thinking arrives apart from the answer.
        _stream_response(
            _delta(reasoning_content="The user ran ls, "),
            _delta(reasoning_content="so list files."),
            _delta("stop", content="README.md\nmain.py"),
        ),
        # The budget ran out while thinking: no observation at all.
        _stream_response(_delta(reasoning_content="hmm " * 5), _delta("length")),
        # Thinking inline, cut off before the closing tag.
        _stream_response(_delta("length", content="<think>Let me consider the")),
    ]
    engine = OpenAICompatEngine(
        OpenAICompatOptions(base_url="http://server/v1", reasoning_budget=4000),
        transport=_transport(responses, seen),
    )
    request = GenerationRequest(messages=HELLO, max_tokens=64)
    result = await engine.generate(request)
    assert result.text == "README.md\nmain.py"
    assert json.loads(seen[-1].content)["max_tokens"] == 64 + 4000
    for _ in range(2):
        with pytest.raises(EngineError, match="whole budget \\(4064 tokens\\) thinking"):
            await engine.generate(request)


@pytest.mark.anyio
async def test_inline_reasoning_reaches_the_agentworld_profile_as_an_observation():
    seen: list[httpx.Request] = []
    raw = (
        "<think>ls in an empty folder prints nothing.</think>\n"
        "<predicted_observation>\ntotal 0\n</predicted_observation>"
    )
    engine = OpenAICompatEngine(
        OpenAICompatOptions(base_url="http://server/v1"),
        transport=_transport([_stream_response(_delta("stop", content=raw))], seen),
    )
    result = await engine.generate(GenerationRequest(messages=HELLO, max_tokens=64))
    assert result.text == raw  # the engine passes the text through...
    assert AgentWorldProfile().extract_observation(result.text) == "total 0"  # ...the profile cuts
