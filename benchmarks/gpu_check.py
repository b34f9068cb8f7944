"""GPU check: the transformers engine on CUDA and the llama.cpp engine with layers offloaded.

Run on a machine with an NVIDIA GPU (CI has none and does not run this):

    pip install 'aw-mcp[transformers]'      # a CUDA build of torch
    CMAKE_ARGS="-DGGML_CUDA=on" pip install llama-cpp-python --no-binary llama-cpp-python \\
        --force-reinstall                   # a CUDA build of llama.cpp
    python benchmarks/gpu_check.py [--gguf FILE] [--hf-model ID|DIR] [--cpu-baseline]

For each engine it measures, on the same prompt: prefill tokens/s (a cold prompt), decode
tokens/s (a continuation whose prompt is already cached), and the KV reuse of a second turn.
Without a GPU it says so and exits 0. Default model: the small SmolLM2 GGUF (tiny; the
GPU numbers mean more with a real model, e.g. --hf-model Qwen/Qwen3-4B or --gguf a 7B Q4).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import anyio

from aw_mcp.engines.base import ChatMessage, Engine, GenerationRequest
from aw_mcp.errors import EngineError
from aw_mcp.testing import small_model_path

COUNTING = "Count from 1 to 2000, separated by spaces, with nothing else."
COUNT_SCHEMA = {
    "type": "object",
    "properties": {"numbers": {"type": "array", "items": {"type": "integer"}, "maxItems": 5}},
    "required": ["numbers"],
}
FILLER = "The agent listed the files of the project and read its configuration. " * 40


def gpu_present() -> tuple[bool, str]:
    try:
        import torch
    except ImportError:
        if shutil.which("nvidia-smi") is None:
            return False, "no NVIDIA driver (nvidia-smi not found)"
        return True, "nvidia-smi found (torch not installed: transformers part skipped)"
    if torch.cuda.is_available():
        return True, torch.cuda.get_device_name(0)
    if shutil.which("nvidia-smi") is None:
        return False, "no NVIDIA driver (nvidia-smi not found)"
    return False, f"nvidia-smi found but torch {torch.__version__} sees no CUDA device"


async def measure(engine: Engine, label: str, decode_tokens: int) -> None:
    await engine.start()
    system = ChatMessage(role="system", content="You are a careful assistant. " + FILLER)
    prompt = [system, ChatMessage(role="user", content=COUNTING)]
    cold = await engine.generate(GenerationRequest(messages=prompt, max_tokens=1, cache_key="g"))
    prefill = cold.stats.evaluated_prompt_tokens / max(cold.stats.seconds, 1e-9)
    warm = await engine.generate(
        GenerationRequest(messages=prompt, max_tokens=decode_tokens, cache_key="g")
    )
    decode = warm.stats.completion_tokens / max(warm.stats.seconds, 1e-9)
    follow = [*prompt, ChatMessage(role="assistant", content=warm.text)]
    follow.append(ChatMessage(role="user", content="Now count backwards from 10."))
    turn2 = await engine.generate(GenerationRequest(messages=follow, max_tokens=8, cache_key="g"))
    # A constrained answer: the JSON-schema mask is applied to the logits on the device.
    constrained = await engine.generate(
        GenerationRequest(messages=prompt, max_tokens=64, cache_key="g", json_schema=COUNT_SCHEMA)
    )
    json.loads(constrained.text)  # raises where the mask let something else through
    print(
        f"{label:38} prefill {prefill:9.0f} tok/s ({cold.stats.evaluated_prompt_tokens} tokens)"
        f"   decode {decode:7.1f} tok/s ({warm.stats.completion_tokens} tokens)"
        f"   turn 2 reused {turn2.stats.reused_prompt_tokens}/{turn2.stats.prompt_tokens}"
        f"   JSON {constrained.text[:40]!r}"
    )
    await engine.aclose()


def llama_engine(gguf: Path | None, gpu_layers: int) -> Engine:
    from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions

    return LlamaCppEngine(
        LlamaCppOptions(model=str(gguf or small_model_path()), n_ctx=4096, n_gpu_layers=gpu_layers)
    )


def transformers_engine(model: str | None, gguf: Path | None, device: str) -> Engine:
    from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

    return TransformersEngine(
        TransformersOptions(
            model=str(model or gguf or small_model_path()), device=device, n_ctx=4096
        )
    )


async def run(args: argparse.Namespace) -> int:
    failures = 0
    runs: list[tuple[str, Engine]] = []
    llama_cpp: ModuleType | None
    try:
        import llama_cpp
    except ImportError:
        llama_cpp = None
        print("llama.cpp: llama-cpp-python is not installed; its part is skipped")
        failures += 1
    if llama_cpp is not None and llama_cpp.llama_supports_gpu_offload():
        runs.append(("llama.cpp, all layers on the GPU", llama_engine(args.gguf, -1)))
    elif llama_cpp is not None:
        print(
            "llama.cpp: this llama-cpp-python build cannot offload to a GPU; rebuild it with\n"
            '  CMAKE_ARGS="-DGGML_CUDA=on" pip install llama-cpp-python --no-binary '
            "llama-cpp-python --force-reinstall"
        )
        failures += 1
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401

        runs.append(("transformers on CUDA", transformers_engine(args.hf_model, args.gguf, "cuda")))
    except ImportError:
        print("transformers: not installed (pip install 'aw-mcp[transformers]')")
        failures += 1
    if args.cpu_baseline and llama_cpp is not None:
        runs.append(("llama.cpp on the CPU (baseline)", llama_engine(args.gguf, 0)))
    if args.cpu_baseline:
        runs.append(
            (
                "transformers on the CPU (baseline)",
                transformers_engine(args.hf_model, args.gguf, "cpu"),
            )
        )
    for label, engine in runs:
        try:
            await measure(engine, label, args.decode_tokens)
        except (EngineError, ValueError) as exc:  # ValueError: the constrained answer's JSON
            print(f"{label}: FAILED: {exc}")
            failures += 1
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", type=Path, help="GGUF file (default: the small SmolLM2)")
    parser.add_argument("--hf-model", help="HF model id or folder for the transformers engine")
    parser.add_argument("--decode-tokens", type=int, default=256)
    parser.add_argument("--cpu-baseline", action="store_true", help="also time both on the CPU")
    args = parser.parse_args()
    present, detail = gpu_present()
    if not present:
        print(f"No NVIDIA GPU here ({detail}); nothing to check. Run this on a GPU machine.")
        return 0
    print(f"GPU: {detail}")
    return anyio.run(run, args)


if __name__ == "__main__":
    sys.exit(main())
