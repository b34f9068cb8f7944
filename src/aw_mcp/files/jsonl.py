"""Read JSONL data files into pydantic models, with errors that name file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from aw_mcp.files.yaml import DataFileError, validation_problems

ModelT = TypeVar("ModelT", bound=BaseModel)


def read_jsonl(path: Path, model: type[ModelT]) -> list[ModelT]:
    """Every non-blank line of ``path`` as a ``model``; DataFileError naming file and line."""
    items: list[ModelT] = []
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise DataFileError(
            path, [(None, f"cannot read the file: {exc.strerror or exc}")]
        ) from None
    with fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                items.append(model.model_validate(json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DataFileError(path, [(line_no, f"not JSON: {exc.msg}")]) from None
            except ValidationError as exc:
                problems: list[tuple[int | None, str]] = [
                    (line_no, message) for _, message in validation_problems(exc)
                ]
                raise DataFileError(path, problems) from None
    return items
