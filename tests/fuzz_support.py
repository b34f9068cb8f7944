"""Strategies and raw clients for the fuzz tests (tests/test_fuzz.py).

- ``arguments_for(schema)``: tool arguments built from a tool's inputSchema (its types,
  enums, bounds, required keys), mostly valid; ``wrong_arguments_for`` breaks them on purpose.
  (hypothesis-jsonschema would do the first, but 0.23 does not run with current hypothesis.)
- ``wire_lines``: JSON-RPC messages as a client might garble them: random JSON values,
  valid requests with one thing changed, deep nesting, odd unicode.
- ``RawStdioServer``: ``aw-mcp serve`` on stdio, driven line by line, every reply kept.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.helpers import TINY_DOMAIN
from tests.http_support import SERVE, initialize_body

ANSWER_EVERY_CALL = Path(__file__).parent / "data" / "answer-every-call.faults.yaml"
# Characters that break careless code: a lone surrogate, separators JavaScript and Unicode
# treat as line ends, NUL, a byte-order mark, right-to-left override, astral emoji.
ODD_CHARACTERS = ["\ud800", "\udfff", "\u2028", "\u2029", "\x85", "\x00", "\ufeff", "\u202e"]
ODD_CHARACTERS += ["\U0001f600", "é", "\r", "\\", '"']

odd_text = st.one_of(
    st.text(max_size=20),
    st.lists(st.sampled_from(ODD_CHARACTERS) | st.characters(), max_size=12).map("".join),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    odd_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(odd_text, inner, max_size=4),
    max_leaves=12,
)


# --- tool arguments from a schema ---------------------------------------------------------


def value_for(schema: Any) -> st.SearchStrategy[Any]:
    """Values for a JSON Schema fragment: its type, enum/const and bounds; anything if untyped."""
    if not isinstance(schema, dict):
        return json_values
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return st.one_of([value_for(option) for option in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([value_for({**schema, "type": k}) for k in kind])
    if kind == "string":
        return st.text(
            min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 30), 30)
        )
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(
            schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(
            value_for(schema.get("items", {})),
            min_size=schema.get("minItems", 0),
            max_size=max(schema.get("minItems", 0), 3),
        )
    if kind == "object" or "properties" in schema:
        return arguments_for(schema)
    return json_values


def arguments_for(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Objects for an object schema: every required property, some optional ones."""
    properties = schema.get("properties", {})
    required = {k: value_for(v) for k, v in properties.items() if k in schema.get("required", [])}
    optional = {k: value_for(v) for k, v in properties.items() if k not in required}
    return st.fixed_dictionaries(required, optional=optional)


@st.composite
def wrong_arguments_for(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    """Arguments broken on purpose: a value of another type, a required key missing, an
    unknown key, or not an object at all."""
    arguments = dict(draw(arguments_for(schema)))
    how = draw(st.sampled_from(["retype", "drop", "extra", "not-an-object"]))
    if how == "retype" and arguments:
        key = draw(st.sampled_from(sorted(arguments)))
        arguments[key] = draw(json_values.filter(lambda v: type(v) is not type(arguments[key])))
    elif how == "drop" and arguments:
        del arguments[draw(st.sampled_from(sorted(arguments)))]
    elif how == "extra":
        arguments[draw(odd_text)] = draw(json_values)
    elif how == "not-an-object":
        return draw(st.one_of(st.lists(json_values, max_size=3), json_scalars))
    return arguments


# --- JSON-RPC lines -----------------------------------------------------------------------


@dataclass
class WireLine:
    """A line to send and the request ids it carries (each owed exactly one answer)."""

    text: str
    ids: list[str | int] = field(default_factory=list)


_ids = itertools.count(1)


def owed_ids(message: Any) -> list[str | int]:
    """JSON-RPC: a request (a method and a string or integer id) is owed an answer, and so is
    a message with such an id that is no response either (no result, no error)."""
    items = message if isinstance(message, list) else [message]
    return [
        item["id"]
        for item in items
        if isinstance(item, dict)
        and ("method" in item or not {"result", "error"} & item.keys())
        and (isinstance(item.get("id"), (str, int)) and not isinstance(item.get("id"), bool))
    ]


def encode(message: Any, ascii_only: bool) -> str:
    text = json.dumps(message, ensure_ascii=ascii_only)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates travel as \\u escapes only
        text = json.dumps(message, ensure_ascii=True)
    return text


def valid_requests(request_id: int | str) -> st.SearchStrategy[dict[str, Any]]:
    call = st.fixed_dictionaries(
        {
            "name": st.sampled_from(["run_command", "read_file", "no_such_tool"]),
            "arguments": st.dictionaries(st.sampled_from(["command", "path"]), json_values),
        }
    )
    method_params = st.one_of(
        st.tuples(st.just("ping"), st.just({})),
        st.tuples(st.just("tools/list"), st.just({})),
        st.tuples(st.just("tools/call"), call),
    )
    return method_params.map(
        lambda mp: {"jsonrpc": "2.0", "id": request_id, "method": mp[0], "params": mp[1]}
    )


@st.composite
def mutated_request(draw: st.DrawFn) -> Any:
    request_id = draw(st.sampled_from([next(_ids), f"req-{next(_ids)}"]))
    request = draw(valid_requests(request_id))
    how = draw(
        st.sampled_from(["none", "drop", "retype", "extra", "params", "batch", "method", "odd"])
    )
    if how == "drop":
        del request[draw(st.sampled_from(sorted(request)))]
    elif how == "retype":
        request[draw(st.sampled_from(["jsonrpc", "method", "params"]))] = draw(json_values)
    elif how == "extra":
        request[draw(odd_text)] = draw(json_values)
    elif how == "params":
        request["params"] = {**request["params"], **draw(st.dictionaries(odd_text, json_values))}
    elif how == "batch":
        request = [request, {**request, "id": next(_ids)}]
    elif how == "method":
        request["method"] = draw(odd_text)
    elif how == "odd":  # odd characters where the server reads: tool name and arguments
        request["method"] = "tools/call"
        request["params"] = {"name": draw(odd_text), "arguments": {draw(odd_text): draw(odd_text)}}
    return request


@st.composite
def deeply_nested(draw: st.DrawFn) -> WireLine:
    """A tools/call whose arguments nest arrays or objects up to 3000 levels (id first, as
    clients write it: past Python's parser limit only a leading id can be read)."""
    depth = draw(st.integers(1, 3000))
    opening, closing = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    request_id = next(_ids)
    inner = opening * depth + "1" + closing * depth
    text = (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call",'
        f'"params":{{"name":"run_command","arguments":{{"command":{inner}}}}}}}'
    )
    return WireLine(text, [request_id])


@st.composite
def wire_lines(draw: st.DrawFn) -> WireLine:
    kind = draw(st.sampled_from(["random", "mutated", "mutated", "nested"]))
    if kind == "nested":
        return draw(deeply_nested())
    message = draw(json_values if kind == "random" else mutated_request())
    return WireLine(encode(message, draw(st.booleans())), owed_ids(message))


# --- a raw stdio server -------------------------------------------------------------------


class RawStdioServer:
    """``aw-mcp serve`` (tiny domain, every call answered by a fault rule) on stdio; each
    stdout line it writes is kept, parsed, in ``replies``."""

    def __init__(self, log_path: Path):
        self.log = log_path.open("w")
        self.proc = subprocess.Popen(
            [*SERVE, "--simulator", str(TINY_DOMAIN), "--faults", str(ANSWER_EVERY_CALL)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self.replies: list[Any] = []
        self.unparsable: list[bytes] = []
        self.arrived = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self.arrived:
                try:
                    self.replies.append(json.loads(raw))
                except ValueError:
                    self.unparsable.append(raw)
                self.arrived.notify_all()

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def answer_counts(self) -> Counter:
        with self.arrived:
            return Counter(json.dumps(r.get("id")) for r in self.replies if isinstance(r, dict))

    def wait_for(self, request_id: str | int, timeout: float = 20.0) -> None:
        key = json.dumps(request_id)
        deadline = time.monotonic() + timeout
        with self.arrived:
            while not any(
                isinstance(r, dict) and json.dumps(r.get("id")) == key for r in self.replies
            ):
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise AssertionError(f"no answer to request {key} (server: {self.proc.poll()})")
                self.arrived.wait(min(left, 0.5))

    def initialize(self) -> None:
        self.send(json.dumps(initialize_body("init")))
        self.wait_for("init")
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        self.log.close()
