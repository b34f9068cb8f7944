"""Load YAML data files into pydantic models, with errors that name file, line and field.

Domain files (``simulators/``) and fault scenarios (``faults/``) are both data validated by
pydantic models; a person editing one wants ``terminal.yaml:14: tools[2].inputSchema: ...``,
not a stack trace. PyYAML's node tree keeps the line of every value, so a pydantic error's
``loc`` path can be walked back to the line it came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)


class DataFileError(ValueError):
    """A data file that cannot be read or does not validate. ``str()`` is the user message."""

    def __init__(self, path: Path | str, problems: list[tuple[int | None, str]]):
        self.path = str(path)
        self.problems = problems
        lines = [
            f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}"
            for line, message in problems
        ]
        super().__init__("\n".join(lines))


def _node_at(root: yaml.Node | None, loc: tuple[int | str, ...]) -> yaml.Node | None:
    """The deepest node along a pydantic ``loc`` path (best effort: stops where the path ends)."""
    node = root
    for position, key in enumerate(loc):
        if isinstance(node, yaml.MappingNode):
            child = next((v for k, v in node.value if k.value == str(key)), None)
            if child is None:
                if position + 1 < len(loc):
                    # Not a key of the file: the tag of a union member (pydantic puts the
                    # discriminator's value in the path, e.g. effects[0].error.preset).
                    continue
                # An unknown or missing key: point at the mapping that should hold it.
                return node
            node = child
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int):
            if key >= len(node.value):
                return node
            node = node.value[key]
        else:
            return node
    return node


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            out += f".{key}" if out else str(key)
    return out or "(top level)"


def parse_yaml_text(text: str, model: type[ModelT], source: Path | str) -> ModelT:
    """Validate YAML text against ``model``; raise DataFileError naming source, line and field."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise DataFileError(source, [(line, f"invalid YAML: {problem}")]) from None
    if data is None:
        raise DataFileError(source, [(None, "the file is empty")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems: list[tuple[int | None, str]] = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            node = _node_at(root, loc)
            line = node.start_mark.line + 1 if node is not None else None
            message = err["msg"].removeprefix("Value error, ")
            problems.append((line, f"{_format_loc(loc)}: {message}"))
        raise DataFileError(source, problems) from None


def read_data_file(path: Path | str) -> str:
    """A data file's text; DataFileError (naming the file) if it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataFileError(
            path, [(None, f"cannot read the file: {exc.strerror or exc}")]
        ) from None


def load_yaml_file(path: Path | str, model: type[ModelT]) -> ModelT:
    return parse_yaml_text(read_data_file(path), model, path)
