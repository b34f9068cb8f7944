"""Load YAML data files into pydantic models, with errors that name file, line and field.

Domain files (``simulators/``) and fault scenarios (``faults/``) are both data validated by
pydantic models; a person editing one wants ``terminal.yaml:14: tools[2].inputSchema: ...``,
not a stack trace. PyYAML's node tree keeps the line of every value, so a pydantic error's
``loc`` path can be walked back to the line it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from aw_mcp.errors import UserInputError

ModelT = TypeVar("ModelT", bound=BaseModel)


class DataFileError(UserInputError):
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


def format_loc(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a field path: ``tools[2].inputSchema``."""
    out = ""
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            out += f".{key}" if out else str(key)
    return out or "(top level)"


def validation_problems(
    exc: ValidationError,
    line_of: Callable[[tuple[int | str, ...]], int | None] = lambda loc: None,
    describe: Callable[[tuple[int | str, ...]], str] = lambda loc: "",
) -> list[tuple[int | None, str]]:
    """(line, "field: message") for each error; ``describe`` may name the item (a tool)."""
    problems: list[tuple[int | None, str]] = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        problems.append((line_of(loc), f"{format_loc(loc)}{describe(loc)}: {message}"))
    return problems


def parse_yaml_text(text: str, model: type[ModelT], source: Path | str) -> ModelT:
    """Validate YAML text against ``model``; raise DataFileError naming source, line and field."""
    try:  # the reader checks the characters as the loader is made: inside the try
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:
        where = text.count("\n", 0, exc.position) + 1
        problem = f"invalid YAML: character {exc.character:#x} is not allowed in YAML"
        raise DataFileError(source, [(where, problem)]) from None
    try:  # one parse: the node tree (with lines) and the data built from it
        root = loader.get_single_node()
        data: Any = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise DataFileError(source, [(line, f"invalid YAML: {problem}")]) from None
    finally:
        loader.dispose()
    if data is None:
        raise DataFileError(source, [(None, "the file is empty")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise DataFileError(source, validation_problems(exc, _lines_in(root))) from None


def line_finder(text: str) -> Callable[[tuple[int | str, ...]], int | None]:
    """For a JSON (or YAML) text, the line of the value at a pydantic ``loc``: JSON is YAML
    to PyYAML's node tree, which keeps lines. Best effort: no lines if the tree cannot be made."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lambda loc: None
    return _lines_in(root)


def _lines_in(root: yaml.Node | None) -> Callable[[tuple[int | str, ...]], int | None]:
    def line_of(loc: tuple[int | str, ...]) -> int | None:
        node = _node_at(root, loc)
        return node.start_mark.line + 1 if node is not None else None

    return line_of


def read_data_file(path: Path | str) -> str:
    """A data file's text; DataFileError (naming the file) if it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataFileError(
            path, [(None, f"cannot read the file: {exc.strerror or exc}")]
        ) from None
    except UnicodeDecodeError as exc:
        line = exc.object.count(b"\n", 0, exc.start) + 1
        problem = f"not UTF-8 text: byte {exc.object[exc.start]:#x} at offset {exc.start}"
        raise DataFileError(path, [(line, problem)]) from None


def load_yaml_file(path: Path | str, model: type[ModelT]) -> ModelT:
    return parse_yaml_text(read_data_file(path), model, path)


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (file contents in world facts and notes) as readable ``|`` blocks."""


def _string_style(text: str) -> str | None:
    # PyYAML writes U+0085 (NEL) raw in block and single-quoted strings, where reading it back
    # takes it for a line break: only a double-quoted string (which escapes it) keeps it.
    if "\x85" in text:
        return '"'
    return "|" if "\n" in text else None


_BlockDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style=_string_style(text)
    ),
)


def dump_yaml(data: Any) -> str:
    """``data`` as YAML a person can read: keys in their order, multi-line strings as ``|``
    blocks (PyYAML falls back to a quoted string where a block cannot hold the text)."""
    return yaml.dump(data, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=100)
