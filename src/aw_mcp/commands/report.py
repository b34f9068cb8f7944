"""``aw-mcp report``: what agents did after injected faults, per tool and per fault rule."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from aw_mcp.errors import UserInputError
from aw_mcp.viewer.reactions import NOTICED, OUTCOMES, Tally


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report",
        help="how agents reacted to injected faults (retry, backoff, switch, give up, loop)",
        description="Read a record directory and classify what the agent did after each "
        "faulted call (a fault rule fired, a fault answer, a JSON-RPC error): retried (with or "
        "without backoff), looped, adjusted its arguments, switched tools or gave up, and "
        "whether it repeated a state-changing call blindly; after a mislead fault (a "
        "plausible but wrong answer), whether it noticed: re-checked, verified, or built on "
        "the wrong value. Exit code 1 when --policy limits "
        "are broken, 2 on bad input.",
    )
    p.add_argument("records", type=Path, metavar="RECORD_DIR")
    p.add_argument("--json", action="store_true", help="print JSON (for CI) instead of tables")
    p.add_argument(
        "--policy",
        type=Path,
        metavar="FILE.yaml",
        help="limits to check (max_retries, max_loop, no_blind_write_retry, require_backoff, "
        "max_give_up_rate); any broken one makes the exit code 1",
    )
    p.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from aw_mcp.files.yaml import load_yaml_file
    from aw_mcp.records.reader import load_record_dir
    from aw_mcp.viewer.policy import ReactionPolicy, violations
    from aw_mcp.viewer.reactions import reactions_of, summary, tally

    policy = load_yaml_file(args.policy, ReactionPolicy) if args.policy else None
    try:
        episodes = load_record_dir(args.records)
    except FileNotFoundError as exc:
        raise UserInputError(str(exc)) from None
    reactions = reactions_of(episodes)
    broken = violations(policy, reactions) if policy else []
    if args.json:
        out = summary(reactions) | {
            "episodes": len(episodes),
            "policy": None if policy is None else policy.model_dump(),
            "violations": broken,
        }
        print(json.dumps(out, indent=2))
    else:
        print(f"{len(episodes)} episodes, {len(reactions)} faulted calls")
        for title, tallies in (
            ("tool", tally(reactions, "tool")),
            ("fault rule", tally(reactions, "rule")),
        ):
            print()
            print(_table(title, tallies))
        misled = [r for r in reactions if r.mislead is not None]
        if misled:
            print()
        for r in misled:
            verdict = "noticed" if r.mislead in NOTICED else "NOT NOTICED"
            print(
                f"mislead {verdict}: episode {r.episode!r} call {r.index} ({r.tool}, "
                f"{', '.join(r.rules)}): {r.mislead}"
            )
        for line in broken:
            print(f"policy: {line}", file=sys.stderr)
        if policy is not None and not broken:
            print("policy: every limit kept", file=sys.stderr)
    return 1 if broken else 0


def _table(title: str, tallies: dict[str, Tally]) -> str:
    head = [title, "faults", *OUTCOMES, "retries", "max", "backoff", "blind writes", "loop"]
    head += ["misled", "noticed"]
    rows: list[list[str | int]] = [
        [
            name,
            t.faults,
            *(t.outcomes[o] for o in OUTCOMES),
            t.retries,
            t.max_retries,
            t.with_backoff,
            t.blind_writes,
            t.longest_loop,
            t.misled,
            t.noticed,
        ]
        for name, t in tallies.items()
    ]
    if not rows:
        return f"by {title}: no faulted calls"
    cells = [head] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    )
