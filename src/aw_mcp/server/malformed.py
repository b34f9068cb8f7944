"""Answers for messages the SDK cannot read, so a client never waits for a reply that won't come.

The SDK's stdio reader drops a line it cannot validate as a JSON-RPC message (a DEBUG log
line only): a request with ``"jsonrpc": "1.0"``, a batch array, ``params`` as a list, a value
nested deeper than its JSON parser's recursion limit, or a lone ``\\ud800`` escape then never
gets an answer. ``screen_line`` finds such lines and says which JSON-RPC error each request in
them is owed (-32700 parse error, -32600 invalid request, -32602 invalid params), with a
``data`` that says what is wrong. ``ExplainInvalidParams`` does the same for params that are
valid JSON-RPC but the wrong shape for their method (the SDK answers -32602 with empty data).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

log = logging.getLogger(__name__)

# pydantic-core's JSON parser (jiter) refuses values nested deeper than this.
MAX_NESTING = 200
BATCH_UNSUPPORTED = (
    "a JSON array (a JSON-RPC batch) is not accepted: MCP removed batching in 2025-06-18; "
    "send one message at a time"
)


def screen_line(line: str, answer_all: bool = False) -> list[types.JSONRPCError] | None:
    """None when the SDK can read ``line``; otherwise the error responses it is owed.

    A line whose requests have no readable id (notifications, garbage inside an object) is
    owed nothing: JSON-RPC forbids answering a notification. It is logged instead (over
    HTTP, where every POST gets a reply, ``answer_all`` answers it under the null id). A
    message with an id but neither a method nor a result or error is no request and no
    response: it is answered as an invalid request under its id. A request
    whose id is not a string or an integer (``1.5``, ``true``, ``null``) is answered with a
    null id, as JSON-RPC answers an id it cannot read. Bytes that are not UTF-8 reach here as
    lone surrogates (``errors="surrogateescape"``) and get -32700.
    """
    if undecodable := _UNDECODABLE.search(line):
        byte = ord(undecodable.group()) - 0xDC00
        problem = f"not valid UTF-8: byte {byte:#04x} at character {undecodable.start()}"
        return _owed(line, types.PARSE_ERROR, "Parse error", problem, answer_all)
    try:
        valid = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        validation = exc
    else:
        # The SDK reads a request whose id is not a string or an integer as a notification
        # (the id is dropped), and so never answers it.
        if isinstance(valid, types.JSONRPCNotification) and '"id"' in line:
            message = json.loads(line)
            if "id" in message:
                return [_bad_id(message["id"])]
        return None
    try:
        message = json.loads(line)
    except RecursionError:
        problem = f"nested deeper than Python's JSON parser goes; at most {MAX_NESTING} levels"
        return [_error(leading_id(line), types.INVALID_REQUEST, "Invalid Request", problem)]
    except ValueError as exc:  # not JSON at all: the id cannot be read, so it is null
        return [_error(None, types.PARSE_ERROR, "Parse error", f"not valid JSON: {exc}")]
    if isinstance(message, list):
        if not message:
            problem = f"an empty array is not a JSON-RPC message; {BATCH_UNSUPPORTED}"
            return [_error(None, types.INVALID_REQUEST, "Invalid Request", problem)]
        # Each request in the batch is owed an error; notifications and responses are not.
        errors = [
            _error(
                request_id(m) if isinstance(m, dict) else None,
                types.INVALID_REQUEST,
                "Invalid Request",
                BATCH_UNSUPPORTED,
            )
            for m in message
            if not isinstance(m, dict) or _owes_answer(m)
        ]
        return errors or _unanswerable(line, BATCH_UNSUPPORTED, answer_all)
    if not isinstance(message, dict):
        problem = f"a JSON-RPC message is a JSON object, got {_json_type(message)}"
        return [_error(None, types.INVALID_REQUEST, "Invalid Request", problem)]
    if _neither_request_nor_response(message):
        rid = message["id"] if _usable_id(message["id"]) else None
        return [_error(rid, types.INVALID_REQUEST, "Invalid Request", NO_METHOD)]
    problem, code = _problem(message, validation)
    rid = request_id(message)
    if rid is None and "method" in message and "id" in message:
        return [_bad_id(message["id"])]
    if rid is None:
        return _unanswerable(line, problem, answer_all)
    message_text = {
        types.PARSE_ERROR: "Parse error",
        types.INVALID_REQUEST: "Invalid Request",
        types.INVALID_PARAMS: "Invalid params",
    }[code]
    return [_error(rid, code, message_text, problem)]


NO_METHOD = (
    'a request needs a "method" (a message with an "id" and no "method" is a response, '
    'which needs a "result" or an "error")'
)


def _neither_request_nor_response(message: Any) -> bool:
    """An object with an id that is neither a request (no method) nor a response (no result
    or error): whoever sent it waits for an answer under that id."""
    return (
        isinstance(message, dict)
        and "id" in message
        and not {"method", "result", "error"} & message.keys()
    )


def _owes_answer(message: dict[str, Any]) -> bool:
    """Whoever sent ``message`` waits for an answer: a request (a method and an id), or an
    object with an id that is no response either."""
    return "id" in message and ("method" in message or _neither_request_nor_response(message))


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _bad_id(value: Any) -> types.JSONRPCError:
    """A request whose id is unusable is answered under the null id (it cannot be echoed)."""
    problem = f'"id" must be a string or an integer, got {json.dumps(value)}'
    return _error(None, types.INVALID_REQUEST, "Invalid Request", problem)


# What ``errors="surrogateescape"`` makes of a byte that is not UTF-8.
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _owed(
    line: str, code: int, text: str, problem: str, answer_all: bool = False
) -> list[types.JSONRPCError]:
    """The error a line with ``problem`` is owed: under its request's id, if it has one."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return [_error(leading_id(line), code, text, problem)]
    if isinstance(message, dict) and not _owes_answer(message):
        return _unanswerable(line, problem, answer_all)  # a notification or a response
    rid = message.get("id") if isinstance(message, dict) else None
    return [_error(rid if _usable_id(rid) else None, code, text, problem)]


# An "id" member before the first nested value: readable even when the line cannot be parsed.
_LEADING_ID = re.compile(r'^\s*\{[^{}\[\]]*?"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*[,}]')


def leading_id(line: str) -> str | int | None:
    if match := _LEADING_ID.match(line):
        return json.loads(match.group(1))
    return None


def request_id(message: dict[str, Any]) -> str | int | None:
    """The id of a request (a message with a method); None for notifications and responses.

    A malformed response of the client's (to a server request) is never answered: an error
    under its id would read as the answer to one of the client's own requests.
    """
    if "method" not in message:
        return None
    value = message.get("id")
    return value if _usable_id(value) else None


def _problem(message: dict[str, Any], validation: ValidationError) -> tuple[str, int]:
    """What is wrong with a JSON object the SDK refused, and the JSON-RPC code for it."""
    if message.get("jsonrpc") != "2.0":
        got = json.dumps(message.get("jsonrpc"))
        return f'"jsonrpc" must be "2.0", got {got}', types.INVALID_REQUEST
    if "method" in message and not isinstance(message["method"], str):
        return f'"method" must be a string, got {_json_type(message["method"])}', (
            types.INVALID_REQUEST
        )
    if "params" in message and not isinstance(message["params"], dict):
        return f'"params" must be an object, got {_json_type(message["params"])}', (
            types.INVALID_PARAMS
        )
    if surrogate := _lone_surrogate(message):
        return surrogate, types.PARSE_ERROR
    depth, path = _deepest(message)
    if depth > MAX_NESTING:
        where = ".".join(path[:4]) + (".…" if len(path) > 4 else "")
        problem = f"{where} is nested {depth} levels deep; at most {MAX_NESTING} are accepted"
        return problem, types.INVALID_PARAMS if path[:1] == ["params"] else types.INVALID_REQUEST
    return describe(validation, prefer="JSONRPCRequest"), types.INVALID_REQUEST


def describe(error: ValidationError, prefer: str | None = None) -> str:
    """A pydantic ValidationError as one line: ``where: what; where: what``.

    For a union (the JSON-RPC message types) only the ``prefer`` branch's problems are given.
    """
    details = error.errors(include_url=False, include_input=False)
    if prefer and any(d["loc"][:1] == (prefer,) for d in details):
        details = [{**d, "loc": d["loc"][1:]} for d in details if d["loc"][:1] == (prefer,)]
    parts = []
    for detail in details:
        where = ".".join(str(part) for part in detail["loc"])
        parts.append(f"{where}: {detail['msg']}" if where else detail["msg"])
    return "; ".join(parts)


def _walk(value: Any) -> Iterator[tuple[list[str], Any]]:
    """Every (path, value) in a parsed JSON value, keys included as values; no recursion."""
    stack: list[tuple[list[str], Any]] = [([], value)]
    while stack:
        path, item = stack.pop()
        yield path, item
        if isinstance(item, dict):
            for key, child in item.items():
                yield path, key
                stack.append(([*path, key], child))
        elif isinstance(item, list):
            stack.extend(([*path, str(i)], child) for i, child in enumerate(item))


def _lone_surrogate(message: dict[str, Any]) -> str | None:
    for path, item in _walk(message):
        if isinstance(item, str):
            for char in item:
                if "\ud800" <= char <= "\udfff":
                    where = ".".join(path) or "a key"
                    return (
                        f"{where}: contains a lone UTF-16 surrogate (\\u{ord(char):04x}), "
                        "which is not valid Unicode"
                    )
    return None


def _deepest(message: dict[str, Any]) -> tuple[int, list[str]]:
    """Nesting depth of ``message`` (its own object counts 1) and the keys to the deepest point."""
    depth, deepest = 0, []
    for path, item in _walk(message):
        if isinstance(item, (dict, list)) and len(path) + 1 > depth:
            depth, deepest = len(path) + 1, path
    return depth, deepest


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _error(rid: str | int | None, code: int, message: str, data: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message, data=data)
    )


def _unanswerable(line: str, problem: str, answer_all: bool) -> list[types.JSONRPCError]:
    """A notification or a response that cannot be read: JSON-RPC answers it with nothing, and
    the log says so; over HTTP (``answer_all``) the POST is answered under the null id."""
    if answer_all:
        return [_error(None, types.INVALID_REQUEST, "Invalid Request", problem)]
    log.warning("dropped an unreadable notification or response (%s): %.200s", problem, line)
    return []


class ExplainInvalidParams:
    """Server middleware: a -32602 for malformed params says which params and why."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"Invalid params for {ctx.method}",
                data=describe(exc),
            ) from None
