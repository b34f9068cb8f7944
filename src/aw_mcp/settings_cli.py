"""Command-line flags generated from a pydantic settings class, so each setting is defined once.

A field ``n_ctx: int`` becomes ``--n-ctx N``; ``Literal`` fields get choices; ``list`` fields
are repeatable flags; ``bool`` fields get ``--x``/``--no-x`` (a field named ``no_x`` only
``--no-x``). Help text is the field's ``description`` plus its default. Unset flags are left
out of the parsed namespace (``argparse.SUPPRESS``), so environment variables and defaults stay
in charge of them.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

OTHER_GROUP = "other settings"


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def add_settings_flags(
    parser: argparse.ArgumentParser,
    settings: type[BaseSettings],
    only_groups: Collection[str] | None = None,
    also_fields: Collection[str] = (),
) -> None:
    """One flag per field of ``settings``, in ``--help`` sections by the field's ``group``
    (only the fields of ``only_groups``, and single ``also_fields``, when given: other
    commands reuse some sections and settings)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, field in settings.model_fields.items():
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        group_name = str(extra.get("group", OTHER_GROUP))
        if only_groups is not None and group_name not in only_groups and name not in also_fields:
            continue
        if group_name not in groups:
            groups[group_name] = parser.add_argument_group(group_name)
        groups[group_name].add_argument(
            flag_name(name), dest=name, **_argument_options(name, field, extra)
        )


def _argument_options(name: str, field: FieldInfo, extra: dict[str, Any]) -> dict[str, Any]:
    if not field.description:
        raise TypeError(f"setting {name!r} has no description: it would have no --help text")
    annotation = _without_none(field.annotation)
    options: dict[str, Any] = {"default": argparse.SUPPRESS}
    help_text = field.description
    if annotation is bool and name.startswith("no_"):
        options["action"] = "store_true"  # already a negation: --no-lora, never --no-no-lora
        return {**options, "help": help_text}
    if annotation is bool:
        options["action"] = argparse.BooleanOptionalAction
        return {**options, "help": help_text + _default_suffix(field)}
    if get_origin(annotation) is list:
        options["action"] = "append"
        (annotation,) = get_args(annotation)
    if get_origin(annotation) is Literal:
        options["choices"] = list(get_args(annotation))
    elif annotation in (int, float, Path):
        options["type"] = annotation
        options["metavar"] = "N" if annotation is int else "X" if annotation is float else "PATH"
    if "metavar" in extra:
        options["metavar"] = extra["metavar"]
    return {**options, "help": help_text + _default_suffix(field)}


def _without_none(annotation: Any) -> Any:
    """``X | None`` -> ``X`` (an optional setting's flag takes an X)."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _default_suffix(field: FieldInfo) -> str:
    factory = field.default_factory
    default = factory() if factory is not None else field.default  # type: ignore[call-arg]
    if default is None or default == []:
        return ""
    if isinstance(default, bool):
        return " (default: on)" if default else " (default: off)"
    if isinstance(default, list):
        default = ", ".join(str(v) for v in default)
    return f" (default: {default})".replace("%", "%%")


def settings_from_namespace(settings: type[BaseSettings], args: argparse.Namespace) -> Any:
    """The settings with the flags given on the command line over env/defaults."""
    given = {k: v for k, v in vars(args).items() if k in settings.model_fields}
    return settings(**given)


def settings_table(settings: type[BaseSettings], env_prefix: str = "AW_MCP_") -> str:
    """README's table of every setting: flag, environment variable, default, meaning."""
    rows = ["| flag | environment variable | meaning |", "|---|---|---|"]
    for name, field in settings.model_fields.items():
        meaning = (field.description or "") + _default_suffix(field).replace("%%", "%")
        meaning = meaning.replace("|", "\\|")
        rows.append(f"| `{flag_name(name)}` | `{env_prefix}{name.upper()}` | {meaning} |")
    return "\n".join(rows)
