"""Command-line flags generated from a pydantic settings class, so each setting is defined once.

The serve settings are made of sections (``aw_mcp.sections``); their flags are listed by
``--help`` group in ``sections.GROUPS`` order, each group's fields in the class's own order.

A field ``n_ctx: int`` becomes ``--n-ctx N``; ``Literal`` fields get choices; ``list`` fields
are repeatable flags; ``bool`` fields get ``--x``/``--no-x`` (a field named ``no_x`` only
``--no-x``); a field without a default is a required flag, and one marked ``positional`` (in
its ``json_schema_extra``) a positional argument. Help text is the field's ``description`` plus
its default. Unset flags are left out of the parsed namespace (``argparse.SUPPRESS``), so
environment variables and defaults stay in charge of them.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from aw_mcp.errors import UserInputError
from aw_mcp.sections import GROUPS

OTHER_GROUP = "other settings"
SettingsT = TypeVar("SettingsT", bound=BaseModel)


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def add_settings_flags(
    parser: argparse.ArgumentParser,
    settings: type[BaseModel],
    only_groups: Collection[str] | None = None,
    also_fields: Collection[str] = (),
    default_group: str = OTHER_GROUP,
) -> None:
    """One flag per field of ``settings``, in ``--help`` sections by the field's ``group``
    (``default_group`` for a field without one; only the fields of ``only_groups``, and
    single ``also_fields``, when given: other commands reuse some sections and settings)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, field in ordered_fields(settings):
        extra = _extra(field)
        if extra.get("positional"):
            parser.add_argument(name, **_positional_options(field, extra))
            continue
        group_name = str(extra.get("group", default_group))
        if only_groups is not None and group_name not in only_groups and name not in also_fields:
            continue
        if group_name not in groups:
            groups[group_name] = parser.add_argument_group(group_name)
        groups[group_name].add_argument(
            flag_name(name), dest=name, **_argument_options(name, field, extra)
        )


def ordered_fields(settings: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    """The fields of ``settings`` by --help group (``sections.GROUPS`` order, other groups
    last), each group's in the class's own order."""
    fields = list(settings.model_fields.items())

    def rank(item: tuple[int, tuple[str, FieldInfo]]) -> tuple[int, int]:
        position, (_, field) = item
        group = _extra(field).get("group", OTHER_GROUP)
        return (GROUPS.index(group) if group in GROUPS else len(GROUPS), position)

    return [field for _, field in sorted(enumerate(fields), key=rank)]


def _extra(field: FieldInfo) -> dict[str, Any]:
    return field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}


def _positional_options(field: FieldInfo, extra: dict[str, Any]) -> dict[str, Any]:
    """A positional argument: one value, or one or more for a list field."""
    annotation = _without_none(field.annotation)
    options: dict[str, Any] = {"help": field.description, "metavar": extra.get("metavar")}
    if get_origin(annotation) is list:
        options["nargs"] = "+"
        (annotation,) = get_args(annotation)
    if annotation in (int, float, Path):
        options["type"] = annotation
    return options


def _argument_options(name: str, field: FieldInfo, extra: dict[str, Any]) -> dict[str, Any]:
    if not field.description:
        raise TypeError(f"setting {name!r} has no description: it would have no --help text")
    annotation = _without_none(field.annotation)
    options: dict[str, Any] = {"default": argparse.SUPPRESS}
    if field.is_required():
        options["required"] = True
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
    if field.is_required():
        return ""
    factory = field.default_factory
    default = factory() if factory is not None else field.default  # type: ignore[call-arg]
    if default is None or default == []:
        return ""
    if isinstance(default, bool):
        return " (default: on)" if default else " (default: off)"
    if isinstance(default, list):
        default = ", ".join(str(v) for v in default)
    return f" (default: {default})".replace("%", "%%")


class SettingsError(UserInputError):
    """A flag or ``AW_MCP_*`` value that is out of range, or settings that contradict."""


def settings_from_namespace(settings: type[SettingsT], args: argparse.Namespace) -> SettingsT:
    """The settings with the flags given on the command line over env/defaults; a value out
    of range, or settings that contradict, raise SettingsError naming each flag."""
    given = {k: v for k, v in vars(args).items() if k in settings.model_fields}
    try:
        return settings(**given)
    except ValidationError as exc:
        raise SettingsError(f"invalid settings\n{settings_problems(exc)}") from None


def settings_problems(exc: ValidationError) -> str:
    """A settings ValidationError as one line per flag: ``--port: Input should be ...``; a
    rule between settings (no field of its own) as its message alone."""
    lines = []
    for error in exc.errors(include_url=False):
        message = error["msg"].removeprefix("Value error, ")
        lines.append(f"{flag_name(str(error['loc'][0]))}: {message}" if error["loc"] else message)
    return "\n".join(lines)


def settings_table(settings: type[BaseModel], env_prefix: str = "AW_MCP_") -> str:
    """README's table of every setting: flag, environment variable, default, meaning."""
    rows = ["| flag | environment variable | meaning |", "|---|---|---|"]
    for name, field in ordered_fields(settings):
        meaning = (field.description or "") + _default_suffix(field).replace("%%", "%")
        meaning = meaning.replace("|", "\\|")
        rows.append(f"| `{flag_name(name)}` | `{env_prefix}{name.upper()}` | {meaning} |")
    return "\n".join(rows)
