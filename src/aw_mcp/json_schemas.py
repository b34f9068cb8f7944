"""Validation against the JSON Schemas tools declare (inputSchema, outputSchema).

One compiled validator per schema object: the schemas belong to tool specs that live as long
as the server, and some are large (Brave's outputSchema is 82 kB), so neither re-checking the
schema nor re-serializing it belongs on the path of every call.
"""

from __future__ import annotations

from typing import Any

import jsonschema

# id(schema) -> (schema, validator); the schema is kept so its id cannot be reused.
_validators: dict[int, tuple[dict[str, Any], Any]] = {}


def validator_class(schema: dict[str, Any]) -> Any:
    """The validator for the schema's ``$schema`` draft; the latest draft when it names none
    jsonschema knows (as jsonschema does today with a warning, and will refuse to later:
    captured tool schemas carry all sorts of ``$schema`` URLs)."""
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


def validator_for(schema: dict[str, Any]) -> Any:
    cached = _validators.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    cls = validator_class(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    _validators[id(schema)] = (schema, validator)
    return validator


def schema_errors(schema: dict[str, Any], value: Any) -> list[str]:
    """Each way ``value`` breaks ``schema``, as ``path: message``; empty when it is valid."""
    errors = sorted(validator_for(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    problems = []
    for error in errors:
        where = "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems
