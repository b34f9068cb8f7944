"""The OpenAI-compatible engine: a world model served by vLLM, SGLang, llama.cpp's server, ...

The server does the batching (vLLM and SGLang batch concurrent requests continuously,
llama.cpp's server in parallel slots) and usually the prefix caching, so this engine is
a careful client:

- ``POST {base_url}/chat/completions`` with ``stream: true``; the model's own chat template
  is applied by the server.
- httpx rather than the ``openai`` package: retries, timeouts and cancellation stay in our
  hands, and tests plug in an in-process server through the ``transport`` seam.
- Timeouts: connecting, and the longest silence between two streamed chunks (a reasoning
  model streams its thinking, so a long answer is not a silent one); optionally a total.
- Retries with exponential backoff on connection errors, 429 and 5xx, before any part of the
  answer is returned (a stream cut halfway is retried from the start). A ``Retry-After``
  header (seconds or an HTTP date) is honoured: the wait is the longer of it and the backoff,
  at most ``MAX_RETRY_AFTER_S``. (The ``openai`` SDK does the same, but this engine also needs
  vLLM's ``/tokenize``, reasoning fields and the response_format fallback; one client here.)
- Cancelling the awaiting task closes the HTTP stream, which tells the server to stop.
- At most ``concurrency`` requests in flight (an ``anyio.CapacityLimiter``); the rest wait.

Reasoning models (Qwen-AgentWorld thinks for thousands of tokens before answering): each
request may spend ``reasoning_budget`` tokens more than the tool's observation budget
(``simulation.max_tokens`` / the domain's ``generation.max_tokens``). Thinking that a server's
reasoning parser separates (``reasoning_content`` / ``reasoning``) is dropped; thinking left
inline is stripped by the prompt profile (``<think>`` ... and ``<predicted_observation>``).
A model that spends the whole budget thinking gets a clear error, not an empty observation.

Tokens are counted exactly with vLLM's ``/tokenize`` when the server has it, else estimated
(about four characters a token, plus a few per message).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import anyio
import httpx
from pydantic import Field

from aw_mcp.engines.base import ChatMessage, GenerationControl, GenerationRequest, GenerationResult
from aw_mcp.engines.counters import EngineCounters, GenerationStats
from aw_mcp.engines.reasoning import only_thinking
from aw_mcp.engines.sequences import first_stop
from aw_mcp.engines.settings import JsonMode, OpenAISettings
from aw_mcp.errors import EngineError

log = logging.getLogger(__name__)

API_KEY_ENV_FALLBACK = "OPENAI_API_KEY"
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 8  # role markers and separators a chat template adds per message
MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 120.0  # a longer Retry-After is cut to this (the call still retries)
# With no model list from the server, ask again at most this often (vLLM may still be loading).
MODEL_PROBE_INTERVAL_S = 30.0


class OpenAICompatOptions(OpenAISettings):
    """The OpenAI-compatible engine's settings (``OpenAISettings``: the server, the model name,
    timeouts, retries, ...) and what no flag sets. ``json_mode`` says how
    GenerationRequest.json_schema is passed: OpenAI's response_format json_schema (vLLM,
    SGLang, llama.cpp's llama-server), llama-cpp-python's json_object + schema, or not at all;
    a server that rejects it is asked again without, once, and then never."""

    backoff_s: float = 0.5  # first retry delay; doubles each time (with jitter)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # merged into every request


class _RetryableError(Exception):
    pass


class OpenAICompatEngine:
    name = "openai-compatible"

    def __init__(
        self,
        options: OpenAICompatOptions | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,  # tests: an in-process server
    ):
        self.options = options or OpenAICompatOptions()
        self._transport = transport
        self.counters = EngineCounters()
        self.base_url = self.options.base_url.rstrip("/")
        self._client: httpx.AsyncClient | None = None
        self._model: str | None = self.options.model_name
        self._limiter: anyio.CapacityLimiter | None = None
        self._json_mode: JsonMode = self.options.json_mode
        self._exact_count: bool | None = None  # None: /tokenize not tried yet
        self._next_probe_at = 0.0
        self._context_window = self.options.n_ctx
        self._sleep: Callable[[float], Awaitable[None]] = anyio.sleep  # tests record waits

    # -- connection ------------------------------------------------------------------------

    def _api_key(self) -> str | None:
        return os.environ.get(self.options.api_key_env) or os.environ.get(API_KEY_ENV_FALLBACK)

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Accept": "application/json"}
            if key := self._api_key():
                headers["Authorization"] = f"Bearer {key}"
            o = self.options
            self._client = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(
                    connect=o.connect_timeout, read=o.read_timeout, write=30.0, pool=None
                ),
                limits=httpx.Limits(max_connections=o.concurrency, max_keepalive_connections=16),
                transport=self._transport,
            )
        return self._client

    @property
    def context_window(self) -> int:
        # The server's window holds the thinking too: the simulator fits prompt plus answer
        # into what is left once the reasoning budget is set aside.
        return self._context_window - self.options.reasoning_budget

    @property
    def model(self) -> str | None:
        return self._model

    async def start(self) -> None:
        """Ask the server which models it serves (a missing server is only logged here:
        vLLM may still be loading; calls retry and fail clearly if it stays away)."""
        try:
            await self._resolve_model()
        except EngineError as exc:
            log.warning("%s", exc)

    async def _resolve_model(self) -> str:
        if self._model is not None and self._exact_count is not None:
            return self._model
        if self._model is not None and time.monotonic() < self._next_probe_at:
            return self._model  # the server was not ready a moment ago: ask again later
        try:
            data = await self._with_retries(self._get_models)
        except EngineError as exc:
            if self._model is None:
                raise
            # Some gateways serve chat completions but no model list, and vLLM may still be
            # loading: go on with the configured name, and ask again on the next call
            # (``_exact_count`` stays unknown) to learn the context length and /tokenize.
            log.warning("%s; using the configured model name %r as is", exc, self._model)
            self._next_probe_at = time.monotonic() + MODEL_PROBE_INTERVAL_S
            return self._model
        if not isinstance(data, dict):
            data = {}
        models = [m for m in data.get("data", []) if isinstance(m, dict)]
        if self._model is None:
            if not models:
                raise EngineError(f"the server at {self.base_url} lists no models")
            self._model = str(models[0].get("id"))
            log.info("using model %r from %s", self._model, self.base_url)
        served = next((m for m in models if m.get("id") == self._model), {})
        limit = served.get("max_model_len")  # vLLM reports the context length it serves
        if isinstance(limit, int) and limit < self._context_window:
            log.warning(
                "the server serves %s with a %d-token context; using that instead of %d",
                self._model,
                limit,
                self._context_window,
            )
            self._context_window = limit
        if self._exact_count is None:
            self._exact_count = await self._probe_tokenize()
        return self._model

    async def _get_models(self) -> dict[str, Any]:
        response = await self._http().get(f"{self.base_url}/models")
        self._raise_for_status(response, "GET /models")
        return response.json()

    @property
    def load(self) -> int:
        """Requests in flight here (the server batches them; it has no queue of ours)."""
        return 0 if self._limiter is None else self._limiter.borrowed_tokens

    def forget(self, cache_key: str) -> None:
        """Nothing to drop: the server keeps no per-episode state of ours (its prefix cache
        is its own business)."""

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- token counts ----------------------------------------------------------------------

    @property
    def _root_url(self) -> str:
        return self.base_url.removesuffix("/v1")

    async def _probe_tokenize(self) -> bool:
        try:
            await self._tokenize_remote([ChatMessage(role="user", content="hello")])
        except (EngineError, httpx.HTTPError, ValueError) as exc:
            log.info(
                "no usable /tokenize on %s (%s); token counts are estimated", self._root_url, exc
            )
            return False
        return True

    async def _tokenize_remote(self, messages: list[ChatMessage]) -> int:
        """vLLM's chat-aware tokenizer endpoint: the exact prompt length."""
        response = await self._http().post(
            f"{self._root_url}/tokenize",
            json={
                "model": self._model,
                "messages": [m.model_dump() for m in messages],
                "add_generation_prompt": True,
            },
        )
        self._raise_for_status(response, "POST /tokenize")
        data = response.json()
        if isinstance(data.get("count"), int):
            return data["count"]
        if isinstance(data.get("tokens"), list):
            return len(data["tokens"])
        raise ValueError("unexpected /tokenize answer")

    async def count_tokens(self, messages: list[ChatMessage]) -> int:
        if self._exact_count is None:
            try:
                await self._resolve_model()
            except EngineError:
                return estimate_tokens(messages)
        if self._exact_count:
            try:
                return await self._tokenize_remote(messages)
            except (EngineError, httpx.HTTPError, ValueError) as exc:
                log.warning("/tokenize failed (%s); estimating this prompt's length", exc)
        return estimate_tokens(messages)

    # -- generation ------------------------------------------------------------------------

    async def generate(
        self, request: GenerationRequest, control: GenerationControl | None = None
    ) -> GenerationResult:
        control = control or GenerationControl()
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.options.concurrency)
        started = time.perf_counter()
        async with self._limiter:
            await self._resolve_model()
            if self.options.request_timeout is not None:
                try:
                    with anyio.fail_after(self.options.request_timeout):
                        result = await self._with_retries(self._stream_once, request, control)
                except TimeoutError:
                    raise EngineError(
                        f"the server at {self.base_url} did not finish within "
                        f"{self.options.request_timeout:g} s"
                    ) from None
            else:
                result = await self._with_retries(self._stream_once, request, control)
        result.stats.seconds = round(time.perf_counter() - started, 4)
        self.counters.add_generation(result.stats)
        return result

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [m.model_dump() for m in request.messages],
            "max_tokens": request.max_tokens + self.options.reasoning_budget,
            "temperature": request.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.stop:
            body["stop"] = request.stop
        if request.seed is not None:
            body["seed"] = request.seed
        if request.json_schema is not None and self._json_mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "observation", "schema": request.json_schema},
            }
        elif request.json_schema is not None and self._json_mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": request.json_schema}
        # request.grammar (a text answer's Lark grammar) and request.loop_guard are not sent:
        # servers take grammars in their own dialects (GBNF, xgrammar's EBNF), and decode
        # themselves. A served model's text answers are used as it writes them.
        body.update(self.options.extra_body)
        return body

    async def _stream_once(
        self, request: GenerationRequest, control: GenerationControl
    ) -> GenerationResult:
        body = self._body(request)
        url = f"{self.base_url}/chat/completions"
        answer: list[str] = []
        reasoning_chunks = 0
        content_chunks = 0
        finish: str | None = None
        usage: dict[str, Any] = {}
        stops = [s for s in request.stop if s]
        async with self._http().stream("POST", url, json=body) as response:
            if response.status_code >= 400:
                await response.aread()
                if "response_format" in body and _rejects_response_format(response):
                    log.warning(
                        "%s rejected response_format %s (%s); sending requests without it",
                        self.base_url,
                        self._json_mode,
                        _error_text(response),
                    )
                    self._json_mode = "off"
                    raise _RetryableError("retry without response_format")
            self._raise_for_status(response, "POST /chat/completions")
            async for line in response.aiter_lines():
                if control.cancelled.is_set():
                    finish = "cancelled"
                    break  # leaving the block closes the stream: the server stops
                chunk = _sse_data(line)
                if chunk is None:
                    continue
                if chunk == "[DONE]":
                    break
                try:
                    event = json.loads(chunk)
                except json.JSONDecodeError as exc:
                    raise EngineError(
                        f"the server sent a malformed stream event: {chunk[:200]}"
                    ) from exc
                if "error" in event:
                    raise EngineError(f"the server reported an error: {event['error']}")
                usage = event.get("usage") or usage
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("reasoning_content") or delta.get("reasoning"):
                        reasoning_chunks += 1
                    if text := delta.get("content"):
                        answer.append(text)
                        content_chunks += 1
                    finish = choice.get("finish_reason") or finish
                if control.on_token is not None and (reasoning_chunks or content_chunks):
                    control.on_token(reasoning_chunks + content_chunks)
                text = "".join(answer)
                if stops and (cut := first_stop(text, stops)) is not None:
                    answer, finish = [text[:cut]], "stop"
                    break
        text = "".join(answer)
        finish_reason = _finish_reason(finish)
        if finish_reason == "length" and (
            (reasoning_chunks and not text.strip()) or only_thinking(text)
        ):
            raise EngineError(
                f"the model used its whole budget ({body['max_tokens']} tokens) thinking and "
                "wrote no observation; raise --reasoning-budget or the tool's "
                "simulation.max_tokens"
            )
        return GenerationResult(
            text=text, finish_reason=finish_reason, stats=_stats(usage, content_chunks)
        )

    async def _with_retries(self, attempt: Any, *args: Any) -> Any:
        """Run ``attempt`` again after connection errors, 429 and 5xx, with backoff."""
        retries = self.options.max_retries
        failures = 0
        while True:
            try:
                return await attempt(*args)
            except _RetryableError:
                continue  # a changed request (no response_format), not a failure
            except (httpx.TransportError, _ServerBusyError) as exc:
                failures += 1
                if failures > retries:
                    raise EngineError(
                        f"the server at {self.base_url} failed {failures} times: {_describe(exc)}"
                    ) from exc
                delay = min(MAX_BACKOFF_S, self.options.backoff_s * 2 ** (failures - 1))
                delay *= random.uniform(0.8, 1.2)  # spread the retries of many episodes
                if isinstance(exc, _ServerBusyError) and exc.retry_after is not None:
                    delay = max(delay, min(exc.retry_after, MAX_RETRY_AFTER_S))
                log.warning(
                    "%s: %s; retry %d/%d in %.1fs",
                    self.base_url,
                    _describe(exc),
                    failures,
                    retries,
                    delay,
                )
                await self._sleep(delay)

    def _raise_for_status(self, response: httpx.Response, what: str) -> None:
        if response.status_code < 400:
            return
        message = f"{what} answered HTTP {response.status_code}: {_error_text(response)}"
        if response.status_code in RETRY_STATUSES:
            raise _ServerBusyError(message, retry_after(response))
        if response.status_code in (401, 403):
            message += (
                f" (set the API key in ${self.options.api_key_env} or ${API_KEY_ENV_FALLBACK})"
            )
        raise EngineError(f"the server at {self.base_url}: {message}")


class _ServerBusyError(Exception):
    """A status worth retrying (429, 5xx), with the server's Retry-After in seconds if any."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(response: httpx.Response) -> float | None:
    """Seconds the server asks to wait (``Retry-After: 5`` or an HTTP date), or None."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def estimate_tokens(messages: list[ChatMessage]) -> int:
    chars = sum(len(m.content) for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * (len(messages) + 1)


def _sse_data(line: str) -> str | None:
    if not line.startswith("data:"):
        return None  # comments (": ping"), event names, blank separators
    return line[5:].strip()


def _finish_reason(value: str | None) -> Literal["stop", "length", "cancelled"]:
    if value in ("length", "cancelled"):
        return value  # type: ignore[return-value]
    return "stop"


def _stats(usage: dict[str, Any], content_chunks: int) -> GenerationStats:
    prompt = int(usage.get("prompt_tokens") or 0)
    details = usage.get("prompt_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)  # servers with prefix caching report it
    return GenerationStats(
        prompt_tokens=prompt,
        reused_prompt_tokens=cached,
        evaluated_prompt_tokens=max(0, prompt - cached),
        completion_tokens=int(usage.get("completion_tokens") or content_chunks),
    )


def _rejects_response_format(response: httpx.Response) -> bool:
    """The server refused the request because of response_format. Only an error that names it
    counts: a 400 for an over-long prompt must not switch structured output off for good
    (llama-cpp-python's server even answers 500 to a schema type it does not know)."""
    if response.status_code not in (400, 422) and response.status_code < 500:
        return False
    text = _error_text(response).lower()
    return any(word in text for word in ("response_format", "json_schema", "schema"))


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:500]
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        error = error.get("message", error)
    return str(error)[:500]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
