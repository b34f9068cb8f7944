"""A tool with no outputSchema answers in the JSON shape its earlier answers share
(``simulation/answer_shapes.py``): inferred from the episode and from recorded real episodes,
held by a grammar that still lets a one-line error through; in Python's literal syntax where
the earlier answers were written so (``str()`` of rows, as mcp-server-sqlite answers)."""

from __future__ import annotations

import ast
import json

import llguidance
import pytest
from mcp import Client

from aw_mcp.domain.models import ToolCall, ToolSpec
from aw_mcp.engines.base import ChatMessage, GenerationRequest
from aw_mcp.engines.text_grammars import compile_lark
from aw_mcp.records.calls import Turn
from aw_mcp.records.reader import load_record_dir
from aw_mcp.server.app import build_server
from aw_mcp.simulation.answer_shapes import (
    AnswerShapes,
    answers_of,
    inferred,
    inferred_shape,
    python_literal_grammar,
    shape_grammar,
)
from aw_mcp.simulation.grounding import GroundingIndex
from aw_mcp.testing import FakeEngine
from aw_mcp.wiring.assemble import build_simulator
from aw_mcp.wiring.settings import ServeSettings
from tests.conftest import REPO_ROOT, small_engine
from tests.engine_support import write_tiny_domain

BYTES = llguidance.LLTokenizer("byte")
MEMORY = REPO_ROOT / "data" / "mcp" / "memory"
SQLITE = REPO_ROOT / "data" / "mcp" / "sqlite" / "heldout"


def grammar_accepts(lark: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(BYTES, compile_lark(lark))
    return bool(matcher.consume_tokens(BYTES.tokenize_str(text)) and matcher.is_accepting())


def accepts(shape: dict, text: str) -> bool:
    return grammar_accepts(shape_grammar(shape, 512).lark, text)


def accepts_literal(shape: dict, text: str) -> bool:
    return grammar_accepts(python_literal_grammar(shape).lark, text)


def turn(tool: str, arguments: dict, observation: str, **extra) -> Turn:
    return Turn(
        index=1, action=ToolCall(tool=tool, arguments=arguments), observation=observation, **extra
    )


ENTITIES = [
    turn("create", {"n": 1}, json.dumps([{"name": "a", "tags": ["x"], "size": 1}], indent=2)),
    turn("create", {"n": 2}, json.dumps([{"name": "b", "tags": [], "size": 2.5, "note": None}])),
]


def test_the_shape_two_answers_share_is_their_keys_types_and_order():
    shape = inferred_shape(answers_of(ENTITIES, "create"))
    assert shape is not None
    item = shape["items"]
    assert list(item["properties"]) == ["name", "tags", "size", "note"]  # as the server wrote
    assert item["required"] == ["name", "tags", "size"]
    assert item["properties"]["size"] == {"type": "number"}
    assert item["additionalProperties"] is False
    # the grammar: JSON of the shape, compact or indented, or one line of text
    assert accepts(shape, json.dumps([{"name": "c", "tags": ["y", "z"], "size": 3}], indent=2))
    assert accepts(shape, '[{"name": "c", "tags": [], "size": 0, "note": null}]')
    assert accepts(shape, "Entity with name c already exists")
    assert not accepts(shape, '[{"name": "c", "tags": [], "size": 0, "owner": "bob"}]')
    assert not accepts(shape, '{"n": 3}')  # the call echoed back
    assert not accepts(shape, "Here is the result:\n```json\n[]\n```")  # prose, fenced code


ROWS = [
    turn("query", {"q": 1}, "[{'id': 101, 'total': 39.99, 'note': None}]"),
    turn(
        "query",
        {"q": 2},
        "[{'id': 102, 'total': 79.49, 'note': None}, {'id': 103, 'total': 12.5, 'note': None}]",
    ),
]


def test_answers_written_as_python_literals_are_asked_for_as_python_literals():
    found = inferred(answers_of(ROWS, "query"))
    assert found is not None and found.syntax == "python"
    item = found.shape["items"]
    assert list(item["properties"]) == ["id", "total", "note"]
    # what such a server prints: repr() of rows, quotes as Python chooses them
    assert accepts_literal(found.shape, "[{'id': 104, 'total': 45.0, 'note': \"it's\"}]")
    assert accepts_literal(found.shape, "[{'id': 5, 'total': 1e-05, 'note': [1, 'a']}]")
    assert accepts_literal(found.shape, "[]")
    assert accepts_literal(found.shape, "Database error: no such table: products")
    # not the JSON a model trained on JSON servers writes, nor other keys, nor prose
    assert not accepts_literal(found.shape, '[{"id": 104, "total": 45.0, "note": null}]')
    assert not accepts_literal(found.shape, "[\n  {\n    'id': 104\n  }\n]")
    assert not accepts_literal(found.shape, "[{'id': 104, 'total': 45.0}]")
    assert not accepts_literal(found.shape, "[{'total': 45.0, 'id': 104, 'note': None}]")
    assert not accepts_literal(found.shape, "Here are the rows:\n[]")
    # JSON answers keep the JSON grammar
    assert inferred(answers_of(ENTITIES, "create")).syntax == "json"  # type: ignore[union-attr]


def test_rows_whose_keys_vary_take_any_keys_in_python_syntax():
    """A query's columns are the query's: rows of other keys set no keys, only the syntax."""
    answers = ["[{'name': 'Ann', 'email': 'a@x'}]", "[{'n': 4, 'revenue': 278.23}]", "[]"]
    found = inferred(answers)
    assert found is not None and found.syntax == "python"
    assert accepts_literal(found.shape, "[{'city': 'Lisbon'}, {'city': 'Paris'}]")
    assert accepts_literal(found.shape, "[{'COUNT(*)': 4}]")
    assert not accepts_literal(found.shape, '[{"city": "Lisbon"}]')
    assert not accepts_literal(found.shape, "{'city': 'Lisbon'}")  # rows come in a list


def test_an_error_line_sets_no_shape_and_vetoes_none():
    errors = [turn("query", {"q": 3}, "Database error: no such table: products")]
    assert inferred(answers_of([*ROWS, *errors], "query")) is not None
    assert inferred_shape(answers_of([*ENTITIES, turn("create", {}, "Error: bad name")], "create"))
    # one line without "error" is a text answer: the tool's answers depend on what it reads
    assert inferred(answers_of([*ROWS, turn("query", {"q": 3}, "Done")], "query")) is None
    # JSON and Python literals mixed set none
    mixed = [ROWS[0], turn("query", {"q": 4}, '[{"id": 1, "total": 2.0, "note": null}]')]
    assert inferred(answers_of(mixed, "query")) is None


@pytest.mark.data
def test_every_held_out_sqlite_answer_keeps_to_the_syntax_the_other_episodes_set():
    """The real sqlite server's held-out answers (never trained on), each checked against the
    grammar that the other episodes' answers of its tool give: no real answer is ruled out,
    and the tools that answer rows are held to Python's syntax."""
    episodes = load_record_dir(SQLITE)
    shaped, checked = set(), 0
    for k, episode in enumerate(episodes):
        others = [t for e in episodes[:k] + episodes[k + 1 :] for t in e.turns()]
        for current in episode.turns():
            found = inferred(answers_of(others, current.action.tool))
            if found is None:
                continue
            shaped.add(current.action.tool)
            checked += 1
            assert found.syntax == "python"
            lark = python_literal_grammar(found.shape).lark
            assert grammar_accepts(lark, current.observation), current.observation[:200]
            if current.observation.startswith("["):
                ast.literal_eval(current.observation)  # what was accepted is a literal
    assert checked >= 60 and {"read_query", "write_query", "list_tables"} <= shaped


@pytest.mark.parametrize(
    ("turns", "why"),
    [
        (ENTITIES[:1], "one answer"),
        ([ENTITIES[0], turn("create", {"n": 2}, ENTITIES[0].observation)], "the same answer"),
        ([*ENTITIES, turn("create", {"n": 3}, "Created 1 entity")], "a text answer"),
        (
            [turn("read", {"p": "a.json"}, '{"a": 1}'), turn("read", {"p": "b.json"}, '{"b": 1}')],
            "objects with other keys: what it answers depends on what it reads",
        ),
        ([ENTITIES[0], turn("create", {"n": 2}, '{"name": "b"}')], "a list, then an object"),
        ([turn("t", {"n": 1}, "3"), turn("t", {"n": 2}, "4")], "scalars"),
    ],
)
def test_answers_that_set_no_shape(turns, why):
    assert inferred_shape(answers_of(turns, turns[0].action.tool)) is None, why


def test_errors_faults_and_other_tools_are_not_answers_of_the_tool():
    others = [
        turn("create", {"n": 3}, "boom", is_error=True),
        turn("create", {"n": 4}, "<html>502</html>", reached_world=False),
        turn("create", {"n": 5}, "garbled", damaged=True),
        turn("delete", {"n": 1}, "Deleted"),
    ]
    assert inferred_shape(answers_of([*ENTITIES, *others], "create")) is not None


@pytest.mark.data
def test_every_held_out_real_answer_keeps_to_the_shape_its_recorded_answers_set():
    """The real memory server's held-out answers, each checked against the shape the training
    records (and the episode's earlier answers) give its tool: a grammar no real answer
    breaks, and one that holds most of the tools."""
    index = GroundingIndex.from_record_dir(MEMORY / "train")
    shaped, checked = set(), 0
    for episode in load_record_dir(MEMORY / "heldout"):
        turns = episode.turns()
        for k, current in enumerate(turns):
            tool = current.action.tool
            shape = inferred_shape([*index.answers_of(tool), *answers_of(turns[:k], tool)])
            if shape is None or current.is_error:
                continue
            shaped.add(tool)
            checked += 1
            assert accepts(shape, current.observation), (tool, current.observation[:200])
    assert checked >= 30 and {"create_entities", "read_graph", "search_nodes"} <= shaped


def test_recorded_answers_and_the_episode_s_set_one_shape_and_a_text_answer_sets_none():
    recorded = [ENTITIES[0].observation]
    shapes = AnswerShapes(lambda tool: recorded if tool == "create" else [])
    spec = ToolSpec(name="create", inputSchema={"type": "object"})
    assert shapes.grammar(spec, [], 256) is None  # one answer is not a contract
    grammar = shapes.grammar(spec, ENTITIES[1:], 256)  # one recorded, one in the episode
    assert grammar is not None and '"tags"' in grammar.lark
    assert shapes.grammar(spec, [*ENTITIES, turn("create", {"n": 3}, "Created")], 256) is None


def _json_answer(request: GenerationRequest) -> str:
    command = request.messages[-1].content.rsplit('"command": "', 1)[1].split('"', 1)[0]
    return json.dumps({"ran": command, "lines": [command]})


@pytest.mark.anyio
@pytest.mark.parametrize("shapes", [True, False])
async def test_the_third_answer_of_a_json_tool_is_asked_for_in_its_shape(tmp_path, shapes):
    engine = FakeEngine(_json_answer)
    settings = ServeSettings(simulator=[str(write_tiny_domain(tmp_path))], answer_shapes=shapes)
    simulator = build_simulator(settings, engine=engine)
    async with Client(build_server(simulator), mode="legacy") as client:
        for command in ("ls", "pwd", "whoami"):
            await client.call_tool("run_command", {"command": command})
    grammars = [r.grammar for r in engine.requests]
    assert grammars[:2] == [None, None]
    if shapes:
        assert grammars[2] is not None and '"ran"' in grammars[2].lark
    else:
        assert grammars[2] is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("calls", "syntax"),
    [
        ([("ls", '{"ran": "ls", "lines": ["a"]}'), ("pwd", '{"ran": "pwd", "lines": []}')], "json"),
        (
            [("ls", "{'ran': 'ls', 'lines': ['a']}"), ("pwd", "{'ran': 'pwd', 'lines': []}")],
            "python",
        ),
    ],
)
async def test_recorded_answers_give_the_shape_from_the_first_call(tmp_path, calls, syntax):
    records = tmp_path / "records"
    records.mkdir()
    lines = [
        {
            "index": i,
            "episode": "r1",
            "domain": "tinyterm",
            "tool": "run_command",
            "arguments": {"command": c},
            "observation": o,
            "is_error": False,
            "source": "real",
            "started_at": 1796129401.0,
            "seconds": 0.01,
        }
        for i, (c, o) in enumerate(calls, start=1)
    ]
    (records / "r1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    engine = FakeEngine(_json_answer)
    settings = ServeSettings(simulator=[str(write_tiny_domain(tmp_path))], grounding=records)
    simulator = build_simulator(settings, engine=engine)
    async with Client(build_server(simulator), mode="legacy") as client:
        await client.call_tool("run_command", {"command": "date"})
    [request] = engine.requests
    assert request.grammar is not None
    if syntax == "json":
        assert '"lines"' in request.grammar.lark and "%json" in request.grammar.lark
    else:
        assert "'lines': " in request.grammar.lark and "%json" not in request.grammar.lark


# Above TEXT_CLOSING_RESERVE: a smaller budget is all closing, and the answer is a closer.
EMBEDDED_BUDGET = 400


async def embedded_answer(turns: list[Turn], call: str, grammar) -> str:
    """The real small model's answer to ``call`` under ``grammar``, after ``turns`` as the
    episode's earlier calls and answers (as a served episode shows them)."""
    messages = [ChatMessage(role="system", content="You are an API. Answer as before.")]
    for earlier in turns:
        messages.append(ChatMessage(role="user", content=str(earlier.action.arguments)))
        messages.append(ChatMessage(role="assistant", content=earlier.observation))
    messages.append(ChatMessage(role="user", content=call))
    request = GenerationRequest(
        messages=messages, max_tokens=EMBEDDED_BUDGET, temperature=0.0, grammar=grammar
    )
    engine = small_engine()
    try:
        return (await engine.generate(request)).text
    finally:
        await engine.aclose()


@pytest.mark.anyio
async def test_the_embedded_model_answers_in_the_shape():
    """With the real small model: an answer under the shape's grammar is JSON of the
    shape (keys of the earlier answers only)."""
    shape = inferred_shape(answers_of(ENTITIES, "create"))
    assert shape is not None
    text = await embedded_answer(ENTITIES, "{'n': 3}", shape_grammar(shape, EMBEDDED_BUDGET))
    value = json.loads(text)
    assert value and all(set(item) <= {"name", "tags", "size", "note"} for item in value), text


@pytest.mark.anyio
async def test_the_embedded_model_answers_rows_as_python_literals():
    """With the real small model: an answer under the Python-literal grammar is a literal of
    the rows' shape, each row's keys in the server's order."""
    found = inferred(answers_of(ROWS, "query"))
    assert found is not None
    text = await embedded_answer(ROWS, "{'q': 3}", python_literal_grammar(found.shape))
    rows = ast.literal_eval(text)
    assert rows and all(list(row) == ["id", "total", "note"] for row in rows), text
