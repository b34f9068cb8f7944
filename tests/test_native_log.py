"""llama.cpp's own log goes through Python logging at the chosen level, never straight to stderr."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from aw_mcp.engines import native_log
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.engines.native_log import GGML_CONT, GGML_ERROR, GGML_INFO, GGML_WARN, NativeLog
from aw_mcp.models.fetch import resolve_model
from tests.conftest import REPO_ROOT, SMALL_MODEL

LOGGER = "aw_mcp.llama_cpp"


def records(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def test_pieces_become_lines_at_ggml_s_levels_and_a_repeated_warning_is_said_once(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    native = NativeLog()
    native.write(GGML_INFO, "llama_model_loader: loaded 26 key-value pairs")
    native.write(GGML_CONT, " and 291 tensors\n")
    for layer in range(3):
        native.write(GGML_WARN, f"lora for 'blk.{layer}.ffn_down.weight' cannot use buft\n")
    native.write(GGML_ERROR, "failed to open the file\n")
    assert records(caplog) == [
        (logging.DEBUG, "llama_model_loader: loaded 26 key-value pairs and 291 tensors"),
        (logging.INFO, "lora for 'blk.0.ffn_down.weight' cannot use buft"),
        (logging.DEBUG, "lora for 'blk.1.ffn_down.weight' cannot use buft"),
        (logging.DEBUG, "lora for 'blk.2.ffn_down.weight' cannot use buft"),
        (logging.ERROR, "failed to open the file"),
    ]


@pytest.mark.slow
def test_loading_the_default_model_with_its_adapter_writes_nothing_to_stderr(capfd, caplog):
    """The default world model with its bundled adapter: llama.cpp warns once per LoRA tensor
    it cannot repack (12 lines on this machine's CPU); they went to stderr at every level."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    adapter = REPO_ROOT / "adapters" / "qwen2.5-coder-0.5b.gguf"
    engine = LlamaCppEngine(LlamaCppOptions(n_ctx=512, threads=1, lora=[Path(adapter)]))
    engine.load_now()
    assert capfd.readouterr().err == ""
    assert len(records(caplog)) <= 3  # a plain start says a few lines, not one per tensor


def test_a_model_freed_while_a_line_is_logged_logs_through_it_without_a_deadlock():
    """Logging a line allocates, so the garbage collector may run there, and with it the
    finalizer of a model nobody closed, which llama.cpp logs ("~llama_context: ...") through
    this same log. Before, the line was logged with the log's lock held and that second
    message waited for it forever: the likely cause of CI's 85-minute hang in
    tests/test_batching.py (a test loading a model, hundreds of lines, after earlier tests
    left engines unclosed). Here the model's last reference goes inside the handler, which
    frees it there, every time."""
    import llama_cpp

    native_log.install()  # llama.cpp's messages go through the module's log, as when serving
    model = llama_cpp.Llama(model_path=str(resolve_model(SMALL_MODEL)), n_ctx=256, verbose=False)
    last_reference = [model]
    del model
    freed: list[str] = []

    class FreeTheModel(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if last_reference:
                last_reference.pop()  # Llama.__del__ runs here, in the middle of a line
            else:
                freed.append(record.getMessage())

    logger = logging.getLogger(LOGGER)
    handler, level = FreeTheModel(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    finished = threading.Event()

    def log_a_line() -> None:
        native_log._native_log.write(GGML_INFO, "a line\n")
        finished.set()

    try:
        threading.Thread(target=log_a_line, daemon=True).start()
        assert finished.wait(timeout=60), "the log waited for itself"
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert any("llama_context" in message for message in freed)  # the free was logged too


def test_a_write_from_inside_a_write_under_the_lock_is_kept_and_never_waits(monkeypatch):
    """The garbage collector may also run while the lock is held (splitting the text
    allocates), free an unclosed model there, and llama.cpp logs that free through the same
    log in the same thread: before, that write waited for the lock its own thread held (seen
    as a hung tests/test_local_engines.py, a worker thread in ``NativeLog.write`` under
    ``Llama.__del__``). Here the nested write happens inside the lock, every time."""
    log = NativeLog()
    nested = ["~llama_context: freed\n"]
    python_level = log._python_level

    def level_and_a_free(line: str) -> int:
        if nested:  # as a collection that frees a model would, inside the lock
            log.write(GGML_INFO, nested.pop())
        return python_level(line)

    monkeypatch.setattr(log, "_python_level", level_and_a_free)
    logged: list[str] = []
    monkeypatch.setattr(native_log.log, "log", lambda level, fmt, line: logged.append(line))
    writer = threading.Thread(target=log.write, args=(GGML_ERROR, "a line\n"), daemon=True)
    writer.start()
    writer.join(timeout=10)
    assert not writer.is_alive(), "a write from inside a write waited for its own lock"
    assert logged == ["a line", "~llama_context: freed"]
