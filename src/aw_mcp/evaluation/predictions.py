"""predictions.jsonl: written as samples finish, read back to resume and to score.

Rows are appended as soon as each sample (or closed-loop episode) is done, so an interrupted
run loses only what was in flight. A row with an ``error`` (the engine failed) is kept for the
record but not counted as done: the next run retries it. ``compact`` rewrites the file with
the last row of each sample, in the input's order, so readers that take every line (the
reference harness's judge) see each sample once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aw_mcp.evaluation.samples import BenchSample
from aw_mcp.files.jsonl import read_jsonl

PREDICTIONS_FILE = "predictions.jsonl"


class PredictionsFile:
    def __init__(self, path: Path):
        self.path = path
        self.rows: dict[str, BenchSample] = {}  # last row per sample key
        if path.exists():
            for row in read_jsonl(path, BenchSample):
                self.rows[row.key] = row

    def done(self, key: str) -> bool:
        row = self.rows.get(key)
        return row is not None and not row.extra.get("error")

    def append(self, rows: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        for row in rows:
            sample = BenchSample.model_validate(row)
            self.rows[sample.key] = sample

    def compact(self, order: list[str]) -> None:
        """Rewrite with one row per sample: ``order`` first, any others after."""
        keys = [k for k in order if k in self.rows]
        listed = set(order)
        keys += [k for k in self.rows if k not in listed]
        tmp = self.path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for key in keys:
                fh.write(json.dumps(self.rows[key].model_dump(), ensure_ascii=False) + "\n")
        os.replace(tmp, self.path)


def load_predictions(path: Path) -> list[BenchSample]:
    """The rows of a predictions file, the last row of each sample kept."""
    if not path.is_file():
        raise FileNotFoundError(f"no predictions file at {path}")
    return list(PredictionsFile(path).rows.values())
