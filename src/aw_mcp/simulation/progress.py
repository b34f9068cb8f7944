"""Progress notifications while the model generates (a no-op unless the client asked)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from aw_mcp.engines.base import Engine, GenerationControl, GenerationRequest, GenerationResult

# Progress is reported to the client at most this often while the model generates.
PROGRESS_INTERVAL_S = 0.5

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


async def generate_with_progress(
    engine: Engine, request: GenerationRequest, progress: ProgressCallback | None
) -> GenerationResult:
    """``engine.generate``, telling ``progress`` how many tokens are out every interval.

    An engine failure is raised as itself, not wrapped in the task group's exception group."""
    control = GenerationControl()
    if progress is None:
        return await engine.generate(request, control)
    tokens = 0

    def on_token(count: int) -> None:
        nonlocal tokens
        tokens = count

    control.on_token = on_token
    result: GenerationResult | None = None
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:

        async def report() -> None:
            reported = -1
            while True:
                await anyio.sleep(PROGRESS_INTERVAL_S)
                if tokens != reported:
                    reported = tokens
                    await progress(
                        float(tokens),
                        float(request.max_tokens),
                        f"world model: {tokens} tokens generated",
                    )

        tg.start_soon(report)
        try:
            result = await engine.generate(request, control)
        except Exception as exc:  # re-raised below, unwrapped from the task group
            failure = exc
        finally:
            tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    assert result is not None
    return result
