"""Load a model once, in a worker thread, and let every caller wait for the same load."""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from aw_mcp.errors import EngineError

log = logging.getLogger(__name__)


class BackgroundLoad:
    """Runs ``load`` at most once, off the event loop.

    ``start()`` is what the server calls at startup (tools/list answers while the model loads);
    ``ready()`` is what each request awaits: it returns once the model is loaded or raises the
    load's ``EngineError`` again, so a model that failed to load fails every call clearly
    instead of taking the server down.
    """

    def __init__(self, load: Callable[[], None]):
        self._load = load
        self._done = anyio.Event()
        self._started = False
        self.error: EngineError | None = None

    async def start(self) -> None:
        if self._started:
            await self._done.wait()
            return
        self._started = True
        try:
            await anyio.to_thread.run_sync(self._load)
        except EngineError as exc:
            self.error = exc
            log.error("%s", exc)
        except Exception as exc:  # an unexpected failure still fails calls, not the server
            self.error = EngineError(f"could not load the model: {type(exc).__name__}: {exc}")
            log.exception("model load failed")
        finally:
            self._done.set()

    def load_now(self) -> None:
        """Load synchronously (scripts, benchmarks, test fixtures outside an event loop)."""
        if self._started:
            return
        self._started = True
        try:
            self._load()
        except EngineError as exc:
            self.error = exc
            raise
        finally:
            self._done.set()

    async def ready(self) -> None:
        if not self._started:
            await self.start()
        await self._done.wait()
        if self.error is not None:
            raise self.error
