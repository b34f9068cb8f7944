"""What knowing a mirrored server's answer contract exactly, but not each call's data, scores.

    python lab/format_oracle.py sqlite duckdb excel fetch calculator text-editor [--episodes 12]

Issue 48's bar with no recorded calls (mean similarity >= 0.60 on held-out whole servers) asks
what a server that was never called answers. A model that learned every server's contract from
many others (the issue's "generalize across servers") would at best write each answer in the
server's exact syntax and shape, with data it cannot know. This scores that oracle: each
answer of the first EPISODES held-out episodes of ``data/mcp/SERVER`` against the server's
real answers of the same tool to other calls (other arguments; its held-out and training
episodes but the call's own episode), with the scorer's similarity (``evaluation/metrics.py``).

- ``typical``: the mean over those answers: a right-syntax, right-shape answer whose data are
  the server's, drawn as the server's answers run;
- ``best pick``: the closest one: an oracle that also picks the data nearest the call's
  (not attainable without them).

No model runs.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from aw_mcp.evaluation.metrics import similarity
from aw_mcp.records.reader import load_record_dir

DATA = Path(__file__).resolve().parent.parent / "data" / "mcp"
MAX_OTHERS = 400  # answers compared per call (the first ones); enough for a stable mean


def measure(server: str, episodes: int) -> str:
    root = DATA / server
    heldout = list(load_record_dir(root / "heldout"))
    held = heldout[:episodes]
    train = list(load_record_dir(root / "train")) if (root / "train").exists() else []
    pool = heldout + train
    typical: list[float] = []
    best: list[float] = []
    for episode in held:
        for record in episode.records:
            others = [
                other.observation
                for candidate in pool
                if candidate.episode != episode.episode
                for other in candidate.records
                if other.tool == record.tool and other.arguments != record.arguments
            ][:MAX_OTHERS]
            if not others:
                continue  # a tool called only so: no other answer of it to draw
            scores = [similarity(other, record.observation) for other in others]
            typical.append(statistics.mean(scores))
            best.append(max(scores))
    calls = sum(len(episode.records) for episode in held)
    return (
        f"{server}: {len(typical)} of {calls} calls have other answers of their tool; "
        f"typical {statistics.mean(typical):.3f}, best pick {statistics.mean(best):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("servers", nargs="+", help="folders of data/mcp")
    parser.add_argument("--episodes", type=int, default=12, help="held-out episodes (first N)")
    args = parser.parse_args()
    for server in args.servers:
        print(measure(server, args.episodes))


if __name__ == "__main__":
    main()
