"""Decode speed of schema-constrained generation: grammar-first sampling vs full-vocabulary.

Runs the embedded model (or --model) on the outputSchemas of real MCP tools and decodes the
same prompts greedily with four samplers, interleaved so load changes hit all alike:

- none:         no grammar (the speed ceiling; output is not JSON)
- library:      llama-cpp-python's own chain with LlamaGrammar (grammar on the whole
                vocabulary at every step, in C++)
- full-vocab:   GrammarFirstSampler(check_first=False): our sampler, grammar on the whole
                vocabulary at every step
- grammar-first GrammarFirstSampler(check_first=True): the unconstrained choice is checked
                against the grammar alone, the vocabulary filtered only when it is rejected

and prints decode tokens/s per mode (the best of --repeats: on a shared machine other work
only ever slows a run down), the ratio to "none", whether the three grammar modes produced
identical text, and how often grammar-first had to fall back.

    python benchmarks/structured_output.py [--model PATH] [--threads 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from aw_mcp.engines.json_grammar import GrammarFirstSampler, json_schema_grammar  # noqa: E402

CAPTURES = REPO / "tests" / "data"
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
MODES = ("none", "library", "full-vocab", "grammar-first")


def load_tools() -> list[tuple[str, dict, str]]:
    out = []
    for file, name, arguments in TOOLS:
        tools = json.loads((CAPTURES / file).read_text())["tools"]
        tool = next(t for t in tools if t["name"] == name)
        out.append((name, tool["outputSchema"], arguments))
    return out


def prompt_for(llm, name: str, arguments: str) -> list[int]:
    messages = [
        {"role": "system", "content": f"You are the MCP tool {name}. Reply with its JSON result."},
        {"role": "user", "content": f"{name} {arguments}"},
    ]
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata["tokenizer.chat_template"]
    text = Jinja2ChatFormatter(template, eos_token="", bos_token="")(messages=messages).prompt
    return llm.tokenize(text.encode(), add_bos=False, special=True)


def make_sampler(llm, mode: str, grammar):
    from llama_cpp import LlamaGrammar

    if mode == "none":
        return llm._init_sampler(temp=0.0)
    if mode == "library":
        return llm._init_sampler(temp=0.0, grammar=LlamaGrammar.from_string(grammar.gbnf))
    return GrammarFirstSampler(
        llm, grammar, llm._init_sampler(temp=0.0), check_first=mode == "grammar-first"
    )


def decode(llm, sampler, prompt: list[int], max_tokens: int) -> tuple[str, int, float]:
    """Greedy decode after a fresh prompt evaluation: (text, tokens, decode seconds)."""
    import llama_cpp

    llm.reset()
    llm.eval(prompt)
    out = bytearray()
    started = time.perf_counter()
    n = 0
    while n < max_tokens:
        token = sampler.sample(llm._ctx, -1)
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
            break
        out += llm._model.detokenize([token])
        n += 1
        llm.eval([token])
    return out.decode("utf-8", errors="replace"), n, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="GGUF file (default: embedded SmolLM2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()

    import llama_cpp

    from aw_mcp.engines.llama_cpp import embedded_model_path

    path = args.model or embedded_model_path()
    llm = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=2048,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        verbose=False,
    )
    print(
        f"model {path.name}, vocabulary {llm.n_vocab()}, {args.threads} threads, "
        f"max_tokens {args.max_tokens}, best of {args.repeats} runs\n"
    )
    speeds: dict[str, list[float]] = {m: [] for m in MODES}
    identical = 0
    fallbacks = steps = 0
    tools = load_tools()
    header = f"{'tool':24}" + "".join(f"{m:>15}" for m in MODES) + "   same text"
    print(header + "\n" + "-" * len(header))
    for name, schema, arguments in tools:
        grammar = json_schema_grammar(schema, args.max_tokens)
        prompt = prompt_for(llm, name, arguments)
        runs: dict[str, list[float]] = {m: [] for m in MODES}
        texts: dict[str, str] = {}
        for _ in range(args.repeats):
            for mode in MODES:  # interleaved: a load change hits every mode alike
                sampler = make_sampler(llm, mode, grammar)
                text, n, seconds = decode(llm, sampler, prompt, args.max_tokens)
                runs[mode].append(n / seconds if seconds > 0 else 0.0)
                texts[mode] = text
                if mode == "grammar-first":
                    fallbacks += sampler.rejections
                    steps += sampler.steps
        best = {m: max(runs[m]) for m in MODES}
        for mode in MODES:
            speeds[mode].append(best[mode])
        same = texts["library"] == texts["full-vocab"] == texts["grammar-first"]
        identical += same
        print(f"{name:24}" + "".join(f"{best[m]:>11.1f} t/s" for m in MODES) + f"   {same}")
    print()
    baseline = statistics.mean(speeds["none"])
    for mode in MODES:
        mean = statistics.mean(speeds[mode])
        print(f"{mode:14} mean {mean:7.1f} tok/s   {mean / baseline:5.2f}x of no grammar")
    print(
        f"\ngrammar-first fell back to the full vocabulary on {fallbacks} of {steps} steps "
        f"({100 * fallbacks / max(steps, 1):.1f}%); identical text in all grammar modes for "
        f"{identical} of {len(tools)} tools"
    )


if __name__ == "__main__":
    main()
