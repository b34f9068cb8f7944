"""Progress notifications while the model generates (a no-op unless the client asked)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from aw_mcp.engines.base import Engine, GenerationControl, GenerationRequest, GenerationResult

# Progress is reported to the client at most this often while the model generates.
PROGRESS_INTERVAL_S = 0.5
FIRST_TOKEN_POLL_S = 0.01

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


async def generate_with_progress(
    engine: Engine, request: GenerationRequest, progress: ProgressCallback | None
) -> GenerationResult:
    """``engine.generate``, telling ``progress`` how many tokens are out: when it starts, every
    interval while it runs, and when it is done.

    An engine failure is raised as itself, not wrapped in the task group's exception group."""
    control = GenerationControl()
    if progress is None:
        return await engine.generate(request, control)
    tokens = 0

    def on_token(count: int) -> None:
        nonlocal tokens
        tokens = count

    control.on_token = on_token
    reported = -1

    async def report(count: int, total: float) -> None:
        # Progress must increase with every notification (MCP): equal counts are skipped.
        nonlocal reported
        if count > reported:
            reported = count
            await progress(float(count), total, f"world model: {count} tokens generated")

    result: GenerationResult | None = None
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:

        async def report_while_generating() -> None:
            # At once (a fast answer still shows it started); at the first token (the prompt
            # is evaluated: often most of the wait), watched closely; then every interval.
            await report(0, float(request.max_tokens))
            while tokens == 0:
                await anyio.sleep(FIRST_TOKEN_POLL_S)
            while True:
                await report(tokens, float(request.max_tokens))
                await anyio.sleep(PROGRESS_INTERVAL_S)

        tg.start_soon(report_while_generating)
        try:
            result = await engine.generate(request, control)
        except Exception as exc:  # re-raised below, unwrapped from the task group
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    assert result is not None
    # Done: the total is what was generated, so a client's bar ends full.
    done = max(tokens, result.stats.completion_tokens)
    await report(done, float(done))
    return result
