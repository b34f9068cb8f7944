"""Re-quantize a GGUF model once, into a cache folder, with llama.cpp's own quantizer.

Why: the embedded SmolLM2 file is Q4_1, which llama.cpp's CPU backend multiplies with its
generic kernels; Q8_0 has fast matrix kernels on x86. Measured on the 2-core build machine
(benchmarks/batch_decode.py, one thread, quiet): prompt evaluation 1.8x faster, one-sequence
decoding 1.22x, for ~50 MB more memory. Q8_0 holds Q4_1's values almost exactly (8 bits per weight
against Q4_1's 16 levels per block), so the model's answers barely change.

The converted file is named after the source's path, size and modification time, so a changed
source is converted again; it is written under a temporary name and renamed into place, so
two servers starting at once never read half a file.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Literal

from aw_mcp.errors import EngineError
from aw_mcp.models.catalogue import cache_folder

log = logging.getLogger(__name__)

QuantType = Literal["q8_0"]
_FTYPES: dict[str, str] = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0"}  # llama_cpp constant names


def requantized(source: Path, kind: QuantType, folder: Path | None = None) -> Path:
    """The ``kind`` version of ``source``, converted now if the cache does not hold it yet."""
    import llama_cpp

    if kind not in _FTYPES:
        raise EngineError(f"cannot re-quantize to {kind!r}; known: {', '.join(_FTYPES)}")
    stat = source.stat()
    key = f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    folder = folder or cache_folder()
    target = folder / f"{source.stem}.{kind}-{digest}.gguf"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{target.name}.{os.getpid()}.partial"
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, _FTYPES[kind])
    params.allow_requantize = True  # the source is quantized already
    started = time.perf_counter()
    llama_log = logging.getLogger("llama-cpp-python")  # llama-cpp-python's log of llama.cpp
    level = llama_log.level
    llama_log.setLevel(logging.ERROR)  # the quantizer prints a line per tensor otherwise
    try:
        code = llama_cpp.llama_model_quantize(
            str(source).encode(), str(partial).encode(), ctypes.byref(params)
        )
    finally:
        llama_log.setLevel(level)
    if code != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise EngineError(f"llama.cpp could not re-quantize {source} to {kind} (code {code})")
    partial.replace(target)
    log.info(
        "re-quantized %s to %s in %.1fs: %s",
        source.name,
        kind,
        time.perf_counter() - started,
        target,
    )
    return target
