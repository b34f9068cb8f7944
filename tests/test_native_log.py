"""llama.cpp's own log goes through Python logging at the chosen level, never straight to stderr."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions
from aw_mcp.engines.native_log import GGML_CONT, GGML_ERROR, GGML_INFO, GGML_WARN, NativeLog
from tests.conftest import REPO_ROOT

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
