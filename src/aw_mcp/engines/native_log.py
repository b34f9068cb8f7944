"""llama.cpp's own log, through Python logging (the logger ``aw_mcp.llama_cpp``).

llama-cpp-python's default handler prints llama.cpp's messages to stderr itself, whatever
``--log-level`` says, and reads ggml's levels by an older enum: its warnings (one line per
LoRA tensor on CPUs with repacked weights, "cannot use buft 'CPU_REPACK', fallback to CPU")
came out as errors. Here each message is a log record at the level ggml gave it:

- ggml's DEBUG and INFO (the model's metadata, buffer sizes: hundreds of lines a load) ->
  DEBUG;
- WARN -> INFO, once per shape: a warning repeated with other numbers (one per tensor) is
  logged the first time, its repeats at DEBUG;
- ERROR -> ERROR.

So a plain start prints a few lines, ``--log-level DEBUG`` shows everything, and
``--log-level WARNING`` nothing of llama.cpp's but its errors.
"""

from __future__ import annotations

import ctypes
import logging
import re
import threading
from typing import Any

log = logging.getLogger("aw_mcp.llama_cpp")

# enum ggml_log_level (llama.cpp's ggml.h as pinned): NONE, DEBUG, INFO, WARN, ERROR, CONT.
GGML_NONE, GGML_DEBUG, GGML_INFO, GGML_WARN, GGML_ERROR, GGML_CONT = range(6)
LEVELS = {
    GGML_NONE: logging.DEBUG,
    GGML_DEBUG: logging.DEBUG,
    GGML_INFO: logging.DEBUG,
    GGML_WARN: logging.INFO,
    GGML_ERROR: logging.ERROR,
}


class NativeLog:
    """Turns llama.cpp's pieces of text into whole lines, and lines into log records."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # llama.cpp may log from its own threads
        self._local = threading.local()  # per thread: inside write(), and what came meanwhile
        self._pending = ""
        self._level = GGML_DEBUG
        self._warned: set[str] = set()

    def write(self, level: int, text: str) -> None:
        # Anything that allocates may run the garbage collector, which may free a model
        # nobody closed, and llama.cpp logs that free through this same object, in this same
        # thread: inside the lock, that would wait for itself. So a write from inside a write
        # is kept for the outer one, and the lines are logged after the lock is let go.
        local = self._local
        if getattr(local, "writing", False):
            local.meanwhile.append((level, text))
            return
        local.writing, local.meanwhile = True, []
        try:
            records = self._records(level, text)
            while local.meanwhile:
                records += self._records(*local.meanwhile.pop(0))
        finally:
            local.writing = False
        for python_level, line in records:
            log.log(python_level, "%s", line)

    def _records(self, level: int, text: str) -> list[tuple[int, str]]:
        """The whole lines ``text`` completes, with their Python levels."""
        with self._lock:
            if level != GGML_CONT:
                self._level = level
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            whole = [line.rstrip() for line in lines if line.strip()]
            return [(self._python_level(line), line) for line in whole]

    def _python_level(self, line: str) -> int:
        python_level = LEVELS.get(self._level, logging.DEBUG)
        if self._level == GGML_WARN:
            shape = re.sub(r"\d+", "N", line)
            if shape in self._warned:
                python_level = logging.DEBUG
            self._warned.add(shape)
        return python_level


_native_log = NativeLog()
_installed: list[Any] = []  # the ctypes callback, kept alive for as long as llama.cpp may call it


def install() -> None:
    """Route llama.cpp's log through ``aw_mcp.llama_cpp`` (once per process; idempotent)."""
    if _installed:
        return
    import llama_cpp

    @llama_cpp.llama_log_callback
    def callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        _native_log.write(level, text.decode("utf-8", errors="replace"))

    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    _installed.append(callback)
