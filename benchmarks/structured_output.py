"""Schema-constrained decoding: speed and validity of each constraint, through the engines.

Runs the embedded model on the outputSchemas of real MCP tools (tests/data captures) and
generates the same prompts greedily through ``LocalEngine.generate`` with each mode,
interleaved so load changes hit all alike:

- none:                 no constraint (the speed ceiling; output is usually not JSON)
- llguidance/full:      llguidance's token mask every step
- llguidance/first:     llguidance, grammar-first (the default: the unconstrained choice is
                        checked alone; the vocabulary is masked only when it is rejected)

For each mode: decode tokens/s (best of --repeats: other work only ever slows a run down),
how many outputs validate against the tool's real outputSchema, and whether the grammar
modes wrote identical text. ``--engine transformers`` runs them on the transformers engine.

Measured 2026-11-30 on the 2-core build machine while other jobs ran (so absolute speeds are
low; compare within a run), SmolLM2-135M, 1 thread, 6 tools, greedy (with llama.cpp's GBNF
sampler as a second constraint, since removed: llguidance is a core dependency, so nothing
could reach it):

    llama.cpp, max_tokens 96, best of 2      tok/s   valid
      none                                   28.0    0/6
      gbnf/full                              19.4    6/6
      gbnf/first                             25.2    6/6
      llguidance/full                        28.4    6/6
      llguidance/first                       27.5    6/6
    transformers, max_tokens 48, 1 run
      none                                    4.7    0/6
      llguidance/full                         4.9    6/6
      llguidance/first                        4.5    6/6

Again on 2026-12-03, after JSON whitespace became one space or a newline and indentation
(json_grammar.JSON_WHITESPACE_*), the machine otherwise idle, llama.cpp, max_tokens 96:
none 60.3 tok/s, gbnf/full 43.4, gbnf/first 57.3, llguidance/full 60.6, llguidance/first
61.0; every constrained mode 6/6 valid, grammar-first the same text as full masking (6/6).

llguidance is the default: every output valid, at the speed of unconstrained decoding (its
token mask is cheap, so grammar-first gains little there), and it is the only one that also
constrains the transformers engine. The hand-written GBNF path needs grammar-first to come
close (full masking costs ~30%). Grammar-first wrote the same text as full masking for GBNF;
with llguidance 5 of 6 were the same: its mask allows only the canonical tokens of forced
text (``{"temperature":`` in one token) while checking the model's own choice accepts any
token that spells it, so the two may tokenize forced text differently (both valid).

    python benchmarks/structured_output.py [--engine llama-cpp|transformers] [--threads 1]
        [--repeats 2] [--max-tokens 96]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import anyio
import jsonschema

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from decode_modes import best_of_rounds  # noqa: E402  (benchmarks/, the script's folder)

from aw_mcp.engines.base import ChatMessage, GenerationRequest  # noqa: E402
from aw_mcp.testing import SMALL_MODEL  # noqa: E402

CAPTURES = REPO / "tests" / "data" / "tool-surfaces"
TOOLS = [
    ("time.json", "get_current_time", '{"timezone": "Europe/Paris"}'),
    (
        "time.json",
        "convert_time",
        '{"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}',
    ),
    ("memory.json", "read_graph", "{}"),
    ("filesystem.json", "read_text_file", '{"path": "/home/alex/notes.txt"}'),
    (
        "sequential-thinking.json",
        "sequentialthinking",
        '{"thought": "Check the cache first", '
        '"nextThoughtNeeded": true, "thoughtNumber": 1, "totalThoughts": 3}',
    ),
    ("everything.json", "get-structured-content", '{"location": "Chicago"}'),
]
# (name, constraint, grammar_first); None: no schema in the request
MODES = {
    "none": (None, True),
    "llguidance/full": ("llguidance", False),
    "llguidance/first": ("llguidance", True),
}


def load_tools() -> list[tuple[str, dict, str]]:
    out = []
    for file, name, arguments in TOOLS:
        tools = json.loads((CAPTURES / file).read_text())["tools"]
        tool = next(t for t in tools if t["name"] == name)
        out.append((name, tool["outputSchema"], arguments))
    return out


def make_engine(kind: str, threads: int):
    if kind == "transformers":
        from aw_mcp.engines.transformers_engine import TransformersEngine, TransformersOptions

        return TransformersEngine(
            TransformersOptions(model=SMALL_MODEL, n_ctx=2048, threads=threads)
        )
    from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions

    return LlamaCppEngine(LlamaCppOptions(model=SMALL_MODEL, n_ctx=2048, threads=threads))


def valid(text: str, schema: dict) -> bool:
    try:
        jsonschema.validate(json.loads(text), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["llama-cpp", "transformers"], default="llama-cpp")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    modes = MODES
    engine = make_engine(args.engine, args.threads)
    await engine.start()
    print(
        f"{args.engine}, {args.threads} threads, max_tokens {args.max_tokens}, "
        f"best of {args.repeats}\n"
    )
    speeds: dict[str, list[float]] = {m: [] for m in modes}
    valid_count = dict.fromkeys(modes, 0)
    identical = 0
    tools = load_tools()
    header = f"{'tool':24}" + "".join(f"{m:>18}" for m in modes) + "   first == full"
    print(header + "\n" + "-" * len(header))
    for name, schema, arguments in tools:
        messages = [
            ChatMessage(role="system", content=f"You are the MCP tool {name}. Reply with JSON."),
            ChatMessage(role="user", content=f"{name} {arguments}"),
        ]

        async def generate(mode: str, messages=messages, schema=schema, name=name):
            constraint, first = modes[mode]
            engine.options.constraint = constraint or "off"
            engine.options.grammar_first = first
            request = GenerationRequest(
                messages=messages,
                max_tokens=args.max_tokens,
                json_schema=schema if constraint else None,
                cache_key=name,  # the prompt is evaluated once, decoding is measured
            )
            return await engine.generate(request)

        best, texts = await best_of_rounds(modes, args.repeats, generate)
        for mode in modes:
            speeds[mode].append(best[mode])
            valid_count[mode] += valid(texts[mode], schema)
        identical += same(texts)
        print(f"{name:24}" + "".join(f"{best[m]:>14.1f} t/s" for m in modes) + f"   {same(texts)}")
    print()
    for mode in modes:
        print(
            f"{mode:18} mean {statistics.mean(speeds[mode]):7.1f} tok/s   "
            f"valid {valid_count[mode]}/{len(tools)}"
        )
    extra = engine.counters.extra
    print(
        f"\ngrammar-first fell back to a full mask on {extra.get('grammar_rejections', 0)} of "
        f"{extra.get('grammar_steps', 0)} constrained steps (all modes together); grammar-first "
        f"wrote what full masking wrote for {identical} of {len(tools)} tools"
    )
    await engine.aclose()


def same(texts: dict[str, str]) -> bool:
    """Grammar-first wrote what full masking wrote."""
    return texts["llguidance/full"] == texts["llguidance/first"]


if __name__ == "__main__":
    anyio.run(main)
