"""What a prompt profile's answers cost to write, for a model that writes them right (an oracle).

    aw-mcp export RECORDS --out A --format chat --profile default
    aw-mcp export RECORDS --out B --format chat --profile small-state
    python lab/format_cost.py A/terminal_chat.jsonl B/terminal_chat.jsonl [--episodes 8]

For each answer of the first EPISODES episodes: the tokens it takes (the real observation, and
in small-state the recall and change before it), the decode steps a model that writes exactly
those tokens needs with prompt-lookup drafts from its context (``ContextDrafter``'s drafts
and their sizing, seven positions a step at most; not the guesses that llama.cpp as PyPI
builds it here adds to reach two positions a step, which would only add cost), the
milliseconds those steps cost at
the step costs measured on the 2-core CI machine (docs/engines.md), and the prompt tokens each
call adds (the call, and in small-state its view). No model runs: this bounds what any model
writing the format pays, whatever its accuracy.
"""

from __future__ import annotations

import argparse
import json

import llama_cpp

from aw_mcp.engines.drafting import ContextDrafter
from aw_mcp.models.fetch import resolve_model

# Milliseconds a decode step of N positions cost (the default model and adapter, ~1,000 tokens
# of context, one thread; docs/engines.md, measured 2026-12-07).
STEP_MS = {1: 40, 2: 76, 3: 90, 4: 100, 5: 137, 6: 152, 7: 170}


def measure(path: str, episodes: int, tokenize) -> str:
    calls = generated = steps = prompt_added = 0
    ms_plain = ms_drafted = 0.0
    with open(path) as lines:
        for line in list(lines)[:episodes]:
            context: list[int] = []
            for message in json.loads(line)["messages"]:
                role, content = message["role"], message["content"]
                if role != "assistant":
                    turn = tokenize(f"<|im_start|>{role}\n{content}<|im_end|>\n")
                    context += turn
                    prompt_added += len(turn) if role == "user" else 0
                    continue
                context += tokenize(f"<|im_start|>{role}\n")
                target = tokenize(content + "<|im_end|>")
                drafter = ContextDrafter(context)
                i = 0
                while i < len(target):
                    drafter.append(target[i])  # chosen from the position before's logits
                    draft = drafter.draft(len(STEP_MS) - 1)
                    taken = 0
                    while (
                        taken < len(draft)
                        and i + 1 + taken < len(target)
                        and draft[taken] == target[i + 1 + taken]
                    ):
                        taken += 1
                    steps += 1
                    ms_drafted += STEP_MS[1 + len(draft)]
                    if draft:
                        drafter.feedback(len(draft), taken)
                    drafter.extend(target[i + 1 : i + 1 + taken])
                    i += 1 + taken
                calls += 1
                generated += len(target)
                ms_plain += STEP_MS[1] * len(target)
                context += target + tokenize("\n")
    return (
        f"{path}: {calls} answers; {generated / calls:.1f} tokens written a call; decode steps "
        f"{generated / calls:.1f} without drafts, {steps / calls:.1f} with; decode ms a call "
        f"{ms_plain / calls:.0f} without drafts, {ms_drafted / calls:.0f} with; prompt tokens a "
        f"call adds {prompt_added / calls:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chats", nargs="+", help="aw-mcp export --format chat files")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    args = parser.parse_args()
    vocab = llama_cpp.Llama(str(resolve_model(args.model)), vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return vocab.tokenize(text.encode(), add_bos=False, special=True)

    for path in args.chats:
        print(measure(path, args.episodes, tokenize))


if __name__ == "__main__":
    main()
