"""Realistic error texts for ``error`` effects, in the shapes MCP servers relay upstream failures.

Servers that wrap an HTTP API usually pass the status line and the body on to the agent: an
nginx status page for gateway errors, a JSON error object for API errors, a Node-style socket
error for network failures. The texts below follow those shapes; a scenario's ``text`` replaces
them. Placeholders: ``{tool}``, ``{retry_after}``, ``{field}`` (the first argument's name) and
``{args.NAME}`` (the value of argument NAME).
"""

from __future__ import annotations

import json
import re
from typing import Any

from aw_mcp.faults.scenario import ErrorEffect, ErrorPreset


def _nginx_page(status: str) -> str:
    return (
        f"Error: HTTP {status}\n<html>\n<head><title>{status}</title></head>\n<body>\n"
        f"<center><h1>{status}</h1></center>\n<hr><center>nginx/1.24.0</center>\n"
        "</body>\n</html>"
    )


PRESET_TEXTS: dict[ErrorPreset, str] = {
    "http_400": 'Error: HTTP 400 Bad Request\n{"error": {"code": 400, "message": "Invalid '
    'request: malformed parameter \'{field}\'.", "status": "INVALID_ARGUMENT"}}',
    "http_401": 'Error: HTTP 401 Unauthorized\n{"error": "invalid_token", "error_description": '
    '"The access token expired or was revoked."}',
    "http_403": 'Error: HTTP 403 Forbidden\n{"error": {"code": 403, "message": "Permission denied:'
    ' the credentials used by {tool} do not have access to this resource.", "status": '
    '"PERMISSION_DENIED"}}',
    "http_404": 'Error: HTTP 404 Not Found\n{"error": {"code": 404, "message": "The requested '
    'resource was not found.", "status": "NOT_FOUND"}}',
    "http_409": 'Error: HTTP 409 Conflict\n{"error": {"code": 409, "message": "The resource was '
    'modified by another request. Fetch the latest version and retry.", "status": "ABORTED"}}',
    "http_422": 'Error: HTTP 422 Unprocessable Entity\n{"message": "Validation Failed", "errors":'
    ' [{"field": "{field}", "code": "invalid"}]}',
    "http_429": 'Error: HTTP 429 Too Many Requests (Retry-After: {retry_after})\n{"error": '
    '{"code": 429, "message": "Rate limit exceeded. Retry after {retry_after} seconds.", '
    '"status": "RESOURCE_EXHAUSTED"}}',
    "http_500": 'Error: HTTP 500 Internal Server Error\n{"error": {"code": 500, "message": '
    '"Internal error encountered.", "status": "INTERNAL"}}',
    "http_502": _nginx_page("502 Bad Gateway"),
    "http_503": "Error: HTTP 503 Service Unavailable (Retry-After: {retry_after})\nThe server is"
    " temporarily unable to service your request due to maintenance downtime or capacity "
    "problems. Please try again later.",
    "http_504": _nginx_page("504 Gateway Time-out"),
    "validation_error": "Error: validation failed for {tool}: '{field}' is not valid for this "
    "operation",
    "timeout": "Error: request to upstream timed out after 30000 ms (ETIMEDOUT)",
    "connection_reset": "Error: read ECONNRESET (the connection was reset by the remote host)",
}

# {args.NAME}: the value of the call's argument NAME (empty when absent).
ARGUMENT_PLACEHOLDER = re.compile(r"\{args\.([A-Za-z0-9_\-]+)\}")

DEFAULT_RETRY_AFTER: dict[str, int] = {"http_429": 30, "http_503": 120}


def error_text(effect: ErrorEffect, tool: str, arguments: dict[str, Any]) -> str:
    template = effect.text if effect.text is not None else PRESET_TEXTS[effect.preset]  # type: ignore[index]
    retry_after = effect.retry_after
    if retry_after is None:
        retry_after = DEFAULT_RETRY_AFTER.get(effect.preset or "", 30)
    field = next(iter(arguments), "request")
    # Plain replacement, not str.format: error bodies are full of JSON braces.
    for key, value in (("{tool}", tool), ("{retry_after}", str(retry_after)), ("{field}", field)):
        template = template.replace(key, value)
    return ARGUMENT_PLACEHOLDER.sub(lambda m: _argument_text(arguments.get(m.group(1))), template)


def _argument_text(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    return json.dumps(value, ensure_ascii=False)


def gateway_timeout_text() -> str:
    return PRESET_TEXTS["http_504"]
