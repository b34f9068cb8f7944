"""Check tool arguments against the tool's inputSchema before anything is simulated.

The low-level MCP server passes arguments through unchecked; an agent that sends a bad call
must get an ``isError`` result that says exactly what is wrong, as a real server would.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jsonschema


@lru_cache(maxsize=1024)
def _validator_for(schema_json: str) -> jsonschema.protocols.Validator:
    import json

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def argument_errors(schema: dict[str, Any], arguments: Any) -> list[str]:
    """Human-readable problems with ``arguments``; empty when they are valid."""
    import json

    if not isinstance(arguments, dict):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    validator = _validator_for(json.dumps(schema, sort_keys=True))
    problems = []
    for error in sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{where}: {error.message}" if where else error.message)
    return problems
