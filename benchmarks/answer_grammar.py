"""Text-answer grammars and the web world's loop rule: what they cost in decoding speed.

Generates page snapshots greedily through ``LocalEngine.generate`` with the embedded model in
four modes, interleaved so load changes hit all alike:

- none:            no grammar, the default loop rule only (the speed ceiling)
- grammar:         browser_snapshot's answer_grammar (simulators/web.yaml)
- loop rule:       the web world's digit-masked loop rule beside the default one
- grammar + rule:  both (what ``serve --simulator web`` does)

For each mode: decode tokens/s (best of --repeats: other work only ever slows a run down),
how many answers hold a snapshot tree that parses as a YAML list, and how many are a
well-formed page state (aw_mcp.evaluation.metrics: also unique element refs, which the
untrained embedded model rarely writes).

    python benchmarks/answer_grammar.py [--threads 1] [--repeats 2] [--max-tokens 384]

Measured 2026-12-02 on the 2-core build machine while the test suite ran (compare within a
run), SmolLM2-135M, 1 thread, max_tokens 384, best of 2 (two runs):

    none             100.8 / 112.8 tok/s   tree parses 0/3
    grammar          107.4 / 110.8 tok/s   tree parses 3/3
    loop rule        102.0 / 111.0 tok/s   tree parses 0/3
    grammar + rule   112.0 / 119.4 tok/s   tree parses 3/3
    (well-formed page state 0/3 in every mode: the untrained model writes no refs)

No cost that the machine's noise shows at 384 tokens: llguidance's grammar-first check is
cheap. The loop rule's check grows with the answer (it decodes up to 4,096 tokens of tail each
step): timed alone on Qwen2.5-Coder-0.5B's vocabulary, at a 2,490-token tail it took 6.3 ms
a step (5.0 detokenizing, 1.3 checking), against 0.5 ms for the default rule. Long snapshots
pay that near their end; this benchmark does not reach that length.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

import anyio
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from decode_modes import best_of_rounds  # noqa: E402  (benchmarks/, the script's folder)

from aw_mcp.domain.loader import load_domain  # noqa: E402
from aw_mcp.engines.base import ChatMessage, GenerationRequest  # noqa: E402
from aw_mcp.engines.llama_cpp import LlamaCppEngine, LlamaCppOptions  # noqa: E402
from aw_mcp.evaluation.metrics import page_state_well_formed  # noqa: E402
from aw_mcp.testing import SMALL_MODEL  # noqa: E402

_TREE = re.compile(r"```yaml\n(.*?)\n```", re.DOTALL)


def tree_parses(text: str) -> bool:
    match = _TREE.search(text)
    if match is None:
        return False
    try:
        return isinstance(yaml.safe_load(match.group(1)), list)
    except yaml.YAMLError:
        return False


PAGES = [
    "http://127.0.0.1:8431/",
    "http://127.0.0.1:8431/books?page=2",
    "http://127.0.0.1:8432/valgrind/FAQ.html",
]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=384)
    args = parser.parse_args()
    web = load_domain("web")  # the bundled web world, by name
    snapshot = next(t for t in web.tools if t.name == "browser_snapshot")
    grammar, rule = snapshot.simulation.answer_grammar, web.generation.loop_guard
    modes = {
        "none": (None, None),
        "grammar": (grammar, None),
        "loop rule": (None, rule),
        "grammar + rule": (grammar, rule),
    }
    engine = LlamaCppEngine(LlamaCppOptions(model=SMALL_MODEL, n_ctx=2048, threads=args.threads))
    await engine.start()
    print(f"llama.cpp, {args.threads} threads, max_tokens {args.max_tokens}, ", end="")
    print(f"best of {args.repeats}")
    speeds: dict[str, list[float]] = {m: [] for m in modes}
    formed = dict.fromkeys(modes, 0)
    parsed = dict.fromkeys(modes, 0)
    for page in PAGES:
        messages = [
            ChatMessage(
                role="system",
                content="You are Playwright MCP. Answer browser_snapshot with '### Page' "
                "(URL, title) and '### Snapshot' with the page's accessibility tree in YAML.",
            ),
            ChatMessage(role="user", content=f"browser_snapshot {{}} (the page is {page})"),
        ]

        async def generate(mode: str, messages=messages, page=page):
            mode_grammar, mode_rule = modes[mode]
            request = GenerationRequest(
                messages=messages,
                max_tokens=args.max_tokens,
                grammar=mode_grammar,
                loop_guard=mode_rule,
                cache_key=page,  # the prompt is evaluated once, decoding is measured
            )
            return await engine.generate(request)

        best, texts = await best_of_rounds(modes, args.repeats, generate)
        for mode in modes:
            speeds[mode].append(best[mode])
            formed[mode] += page_state_well_formed(texts[mode])
            parsed[mode] += tree_parses(texts[mode])
        print(f"{page:44}" + "".join(f"{m}: {best[m]:.1f} t/s  " for m in modes))
    print()
    for mode in modes:
        print(
            f"{mode:16} mean {statistics.mean(speeds[mode]):6.1f} tok/s   "
            f"tree parses {parsed[mode]}/{len(PAGES)}   "
            f"well-formed page state {formed[mode]}/{len(PAGES)}"
        )
    await engine.aclose()


if __name__ == "__main__":
    anyio.run(main)
