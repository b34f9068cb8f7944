"""How much of the held-out split a model can get exactly right without knowing the held-out
commands, and whether the base models know them at all.

    python benchmarks/heldout_ceiling.py [--records data/terminal/heldout]
        [--probe] [--model FILE.gguf ...] [--threads 2]

The held-out split's command families (``HELDOUT_FAMILIES``: tr, cut, find) never occur in
training, so whatever a trained model knows of them it must bring from pretraining. This
script counts, from the recorded real episodes alone (no model), the calls whose real output
cannot be known without that knowledge:

- **unseen command**: a stage of the command line (``command_stages``: split at ``|``,
  ``&&``, ``;`` ...) runs a held-out command and the call prints something other than an error;
- **reads its output**: the call names a file that an unseen command's redirection wrote;
- **unseen identifiers**: the output shows a hexadecimal id (a git hash) that no earlier
  command shows, nor any earlier output a simulator could know (closed loop, the model sees
  its own answers: hashes first printed by ``git merge`` are unknowable in ``git log`` too).

Errors (non-zero exit code) of unseen commands are counted apart and as reachable: the
``CMD: FILE: No such file or directory`` pattern of known commands may carry over. The
ceiling is then generous: every reachable call (those errors included) assumed right.
``--predictions`` (``aw-mcp eval closed-loop``'s output) adds each kind's exact share.

``--probe`` then asks each base model (plain transcript completion, greedy, no adapter) to
continue the real history of every "unseen command" call and counts exact answers: what
pretraining alone knows of these commands.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src")]

from aw_mcp.evaluation.metrics import (  # noqa: E402
    command_stages,
    command_words,
    exact_match,
    exit_code,
    stage_program,
)
from aw_mcp.generation.terminal_scripts import HELDOUT_FAMILIES  # noqa: E402

EXIT_LINE = "[exit code: "
HEX_ID = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
REDIRECTS = {">", ">>"}


KINDS = (
    "unseen command",
    "reads its output",
    "unseen identifiers",
    "unseen command's error",
    "reachable",
)
REACHABLE = ("unseen command's error", "reachable")


@dataclass
class Call:
    episode: str
    index: int
    command: str
    body: str  # the real output before its exit-code line
    exit_code: int
    history: list[tuple[str, str]]  # earlier (command, body) of the episode
    kind: str = "reachable"

    @property
    def key(self) -> str:
        return f"{self.episode}#{self.index}"


def redirect_targets(tokens: list[str]) -> set[str]:
    return {b for a, b in itertools.pairwise(tokens) if a in REDIRECTS}


def load(records: Path) -> list[Call]:
    calls: list[Call] = []
    for path in sorted(records.glob("*.jsonl")):
        history: list[tuple[str, str]] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            command = row["arguments"].get("command", json.dumps(row["arguments"]))
            observation = row["observation"]
            code = exit_code(observation)
            body = observation[: observation.rfind(EXIT_LINE)] if code is not None else observation
            body = body.removesuffix("\n")
            # Blank lines are output too (exact answers keep them), so only a call that
            # printed nothing at all has an empty body.
            calls.append(
                Call(row["episode"], row["index"], command, body, code or 0, list(history))
            )
            history.append((command, body))
    return calls


def classify(calls: list[Call]) -> None:
    written_by_unseen: dict[str, set[str]] = {}
    known: dict[str, list[str]] = {}  # per episode: commands and outputs a simulator can know
    for call in calls:
        tainted = written_by_unseen.setdefault(call.episode, set())
        tokens = command_words(call.command)
        programs = {stage_program(stage) for stage in command_stages(tokens)}
        unseen = bool(programs & HELDOUT_FAMILIES)
        if unseen:
            tainted |= redirect_targets(tokens)
        earlier = " ".join(known.setdefault(call.episode, [])) + " " + call.command
        known[call.episode].append(call.command)
        if not call.body:
            continue
        if unseen:
            call.kind = "unseen command" if call.exit_code == 0 else "unseen command's error"
        elif tainted & set(tokens):
            call.kind = "reads its output"
        elif any(h not in earlier for h in HEX_ID.findall(call.body)):
            call.kind = "unseen identifiers"
        if call.kind in REACHABLE:
            known[call.episode].append(call.body)


def predicted_exact(predictions: Path, calls: list[Call]) -> Counter[str]:
    """Exact predictions per kind (exact as ``eval score`` counts it: trailing spaces and
    blank end lines aside)."""
    kind_of = {call.key: call.kind for call in calls}
    exact: Counter[str] = Counter()
    for line in predictions.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["id"] in kind_of and exact_match(row["gen"], row["reference"]):
            exact[kind_of[row["id"]]] += 1
    return exact


def probe(model: Path, calls: list[Call], threads: int) -> tuple[int, int, list[str]]:
    """Exact answers of ``model`` continuing each call's real history as a transcript."""
    import llama_cpp
    from llama_cpp.llama_types import CreateCompletionResponse

    llm = llama_cpp.Llama(model_path=str(model), n_ctx=2048, n_threads=threads, verbose=False)
    exact, examples = 0, list[str]()
    for call in calls:
        transcript = "".join(
            f"$ {c}\n" + (f"{b.strip()}\n" if b.strip() else "") for c, b in call.history
        )
        prompt = f"{transcript}$ {call.command}\n"
        out = llm.create_completion(
            prompt, max_tokens=96, temperature=0.0, stop=["\n$ ", "$ "], stream=False
        )
        text = cast(CreateCompletionResponse, out)["choices"][0]["text"].strip()
        exact += text == call.body.strip()
        if len(examples) < 4:
            examples.append(
                f"  $ {call.command}\n    real: {call.body.strip()!r}\n    base: {text[:100]!r}"
            )
    return exact, len(calls), examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=Path, default=REPO / "data/terminal/heldout")
    parser.add_argument(
        "--predictions", type=Path, help="predictions.jsonl of eval closed-loop on these records"
    )
    parser.add_argument("--probe", action="store_true", help="also ask the base models")
    parser.add_argument(
        "--model",
        type=Path,
        action="append",
        default=[],
        help="a GGUF to probe besides the embedded one (repeatable)",
    )
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    calls = load(args.records)
    classify(calls)
    kinds = Counter(call.kind for call in calls)
    total = len(calls)
    exact = predicted_exact(args.predictions, calls) if args.predictions else None
    print(f"{args.records}: {total} calls; held-out families {sorted(HELDOUT_FAMILIES)}")
    print("| calls | n | share |" + (" exact (predictions) |" if exact else ""))
    print("|---|---|---|" + ("---|" if exact else ""))
    for kind in KINDS:
        row = f"| {kind} | {kinds[kind]} | {kinds[kind] / total:.1%} |"
        if exact:
            row += f" {exact[kind]} ({exact[kind] / max(kinds[kind], 1):.1%}) |"
        print(row)
    reachable = sum(kinds[kind] for kind in REACHABLE)
    print(f"ceiling on exact (every reachable call right): {reachable / total:.1%}")

    if args.probe:
        from aw_mcp.testing import small_model_path

        asked = [call for call in calls if call.kind == "unseen command"]
        for model in [small_model_path(), *args.model]:
            right, n, examples = probe(model, asked, args.threads)
            print(f"\n{model.name}: {right}/{n} exact on 'unseen command' calls")
            print("\n".join(examples))


if __name__ == "__main__":
    main()
