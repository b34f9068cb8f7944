"""Grammars of text answers (aw_mcp/engines/text_grammars.py): the web snapshot's grammar takes
every real snapshot, everything it takes parses as YAML, and both local engines keep to it, closing
the page state near max_tokens; the digit-masked loop guard of the web world."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import llguidance
import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from aw_mcp.domain.loader import bundled_domain_names, load_domain
from aw_mcp.domain.models import DomainSpec
from aw_mcp.engines.base import ChatMessage, GenerationRequest
from aw_mcp.engines.constraints import ConstrainedChooser, closing_tokens
from aw_mcp.engines.loop_guard import LoopGuard, loops_by
from aw_mcp.engines.sampling import SamplingParams, TokenSampler
from aw_mcp.engines.text_grammars import TextGrammar, compile_lark, expand
from aw_mcp.testing import FakeEngine
from tests.faults_support import client_for, in_episode, make_simulator
from tests.test_structured_output import engine, looping  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[1]
WEB = load_domain(ROOT / "simulators" / "web.yaml")
SNAPSHOT_GRAMMAR = next(
    t.simulation.answer_grammar for t in WEB.tools if t.name == "browser_snapshot"
)
assert SNAPSHOT_GRAMMAR is not None
_TREE = re.compile(r"```yaml\n(.*)\n```$", re.DOTALL)
BYTES = llguidance.LLTokenizer("byte")


def _web_observations(tool: str | None = None) -> list[str]:
    found = []
    for path in sorted((ROOT / "data" / "web").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if tool is None or record["tool"] == tool:
                found.append(record["observation"])
    return found


def _accepts(lark: str, text: str) -> bool:
    matcher = llguidance.LLMatcher(BYTES, compile_lark(lark), log_level=0)
    return bool(matcher.consume_tokens(BYTES.tokenize_str(text)) and matcher.is_accepting())


def _tree(text: str):
    match = _TREE.search(text)
    assert match, text
    return yaml.safe_load(match.group(1))


@pytest.mark.data
def test_every_real_snapshot_keeps_to_the_web_grammar():
    snapshots = _web_observations("browser_snapshot")
    assert len(snapshots) > 300
    rejected = [s[:200] for s in snapshots if not _accepts(SNAPSHOT_GRAMMAR.lark, s)]
    assert not rejected
    # A stale target's error is an answer too; a snapshot with an unclosed quote is not.
    assert _accepts(SNAPSHOT_GRAMMAR.lark, "### Error\nRef e57 not found in the current page.")
    broken = snapshots[0].replace('"', "", 1)
    assert broken != snapshots[0] and not _accepts(SNAPSHOT_GRAMMAR.lark, broken)


def test_a_node_takes_at_most_the_nine_attributes_playwright_writes():
    """A model once looped on one line: ``- link "Index" [ref=e45] [default] [default] ...``
    (1,081 characters); the grammar ends such a line after nine attributes."""
    lark = 'start: "```yaml\\n" yaml_block_sequence "```"'
    every_kind = "[checked] [disabled] [expanded] [active] [level=2] [pressed] [selected]"
    line = f'- link "Index" {every_kind} [ref=e45] [cursor=pointer]'
    assert _accepts(lark, f"```yaml\n{line}\n```")
    assert not _accepts(lark, f"```yaml\n{line} [default]\n```")


def _random_document(lark: str, rng: random.Random) -> str:
    """A random text the grammar takes, byte by byte (YAML's troublesome characters often)."""
    matcher = llguidance.LLMatcher(BYTES, compile_lark(lark), log_level=0)
    bits = np.zeros((BYTES.vocab_size + 31) // 32, dtype=np.int32)
    tricky = list(b" :#\"'-\\[]\n")  # the byte tokenizer's ids are the bytes
    closing = list(b"\n`")
    out: list[int] = []
    while not matcher.is_stopped() and len(out) < 1500:
        matcher.unsafe_compute_mask_ptr(bits.ctypes.data, bits.nbytes)
        bitmap = np.unpackbits(bits.view(np.uint8), bitorder="little")[: BYTES.vocab_size]
        allowed = [int(t) for t in np.flatnonzero(bitmap)]
        if BYTES.eos_token in allowed and (len(out) > 400 or rng.random() < 0.02):
            break
        allowed = [t for t in allowed if t != BYTES.eos_token]
        preferred = [t for t in allowed if t in (closing if len(out) > 400 else tricky)]
        token = rng.choice(preferred if preferred and rng.random() < 0.5 else allowed)
        assert matcher.consume_token(token)
        out.append(token)
    return BYTES.decode_str(out)


def test_every_text_the_yaml_block_grammar_takes_parses_as_a_yaml_list():
    rng = random.Random(3)
    lark = 'start: "```yaml\\n" yaml_block_sequence "```"'
    for _ in range(60):
        text = _random_document(lark, rng)
        assert isinstance(_tree(text), list), text


def test_every_bundled_demonstration_keeps_to_its_tool_s_answer_grammar():
    """A demonstration shows the model an answer: one its grammar would refuse to decode
    teaches a form the tool can never give (the search world's Brave results are minified,
    as the real server writes them)."""
    checked = set()
    for name in bundled_domain_names():
        domain = load_domain(name)
        grammars = {t.name: t.simulation.answer_grammar for t in domain.tools if t.simulation}
        for demo in domain.demonstrations:
            if (grammar := grammars.get(demo.tool)) is not None:
                assert _accepts(grammar.lark, demo.observation), f"{name}: {demo.tool}"
                checked.add(f"{name}.{demo.tool}")
    assert {"search.brave_web_search", "web.browser_snapshot"} <= checked


def test_building_blocks_are_added_only_where_used_and_not_defined():
    assert "yaml_item_0" in expand('start: "x" yaml_block_sequence')
    assert "yaml_item_0" not in expand('start: "x"')
    own = 'start: yaml_block_sequence\nyaml_block_sequence: "- a\\n"'
    assert expand(own).count("yaml_block_sequence:") == 1


def test_a_grammar_that_does_not_compile_is_refused_with_llguidance_s_message():
    with pytest.raises(ValidationError, match=r"(?s)does not compile.*unclosed character class"):
        TextGrammar(lark='start: "a" B\nB: /[/')
    tool = {"name": "t", "description": "", "simulation": {"answer_grammar": {"lark": "start: x"}}}
    with pytest.raises(ValidationError, match='unknown name: "x"'):
        DomainSpec.model_validate({"name": "d", "instructions": "i", "tools": [tool]})


def test_a_tool_answered_in_json_takes_no_answer_grammar():
    tool = {
        "name": "t",
        "outputSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
        "simulation": {"answer_grammar": {"lark": 'start: "a"'}},
    }
    with pytest.raises(ValidationError, match="answered in text"):
        DomainSpec.model_validate({"name": "d", "instructions": "i", "tools": [tool]})
    with pytest.raises(ValidationError, match="not both"):
        GenerationRequest(
            messages=[ChatMessage(role="user", content="x")],
            json_schema={"type": "object"},
            grammar=TextGrammar(lark='start: "a"'),
        )


def test_closing_tokens_of_a_line_grammar_are_newlines_and_fences():
    texts = ["\u010a", "```", "\u010a```", "\u0120", "a", '"]', "<0x0A>", "\u010a\u0120"]
    assert closing_tokens(texts, "\n`", ranked=True) == [[0, 2, 6], [1]]  # newlines first
    assert closing_tokens(texts) == [[5]]  # JSON's closers, spaces allowed: '"]'


class _StubConstraint:
    """A constraint that allows ``only`` one token, or every token, and keeps
    ``closing_reserve`` tokens to close; it records the tokens accepted."""

    closing_chars, closing_ranked = "\n", False

    def __init__(self, only: int | None = None, closing_reserve: int = 0):
        self.only, self.closing_reserve = only, closing_reserve
        self.accepted: list[int] = []

    def is_allowed(self, token: int) -> bool:
        return self.only is None or token == self.only

    def allowed_mask(self, n_vocab: int) -> np.ndarray:
        return np.array([self.is_allowed(t) for t in range(n_vocab)])

    def accept_token(self, token: int) -> None:
        self.accepted.append(token)


def test_where_the_grammar_allows_only_a_banned_token_it_is_taken():
    chooser = ConstrainedChooser(_StubConstraint(only=2))  # type: ignore[arg-type]
    sampler = TokenSampler(SamplingParams(temperature=0.0), 0)
    logits = np.array([3.0, 2.0, 1.0], dtype=np.float32)
    banned = logits.copy()
    banned[2] = -np.inf  # the loop guard's ban
    assert chooser.choose(banned, sampler, unbanned=logits) == 2


def test_the_budget_counts_tokens_taken_not_choices_the_loop_guard_asks_for():
    """The loop guard may ask for several choices of one token; the document is closed from
    ``max_tokens - closing_reserve`` tokens on, however many choices came before."""
    constraint = _StubConstraint(closing_reserve=2)
    chooser = ConstrainedChooser(constraint, closing_tokens=[[1]], max_tokens=4)  # type: ignore[arg-type]
    sampler = TokenSampler(SamplingParams(temperature=0.0), 0)
    logits = np.array([3.0, 2.0, 1.0], dtype=np.float32)
    for _ in range(2):  # two tokens, each after three choices (two of them banned)
        assert [chooser.choose(logits, sampler) for _ in range(3)] == [0, 0, 0]
        chooser.accept(0)
    assert chooser.steps == 2 and constraint.accepted == [0, 0]
    assert chooser.choose(logits, sampler) == 1  # closing: the closer, not the likeliest


# -- both local engines keep to the grammar ---------------------------------------------------


def _snapshot_request(
    max_tokens: int, grammar: TextGrammar = SNAPSHOT_GRAMMAR
) -> GenerationRequest:
    return GenerationRequest(
        messages=[
            ChatMessage(role="system", content="You are Playwright MCP's browser_snapshot."),
            ChatMessage(role="user", content="browser_snapshot {} of http://127.0.0.1:8431/"),
        ],
        max_tokens=max_tokens,
        grammar=grammar,
    )


@pytest.mark.anyio
async def test_the_embedded_model_writes_a_page_state_that_parses(engine):  # noqa: F811
    result = await engine.generate(_snapshot_request(400))
    assert _accepts(SNAPSHOT_GRAMMAR.lark, result.text), result.text
    if result.text.startswith("### Page"):
        assert isinstance(_tree(result.text), list)


@pytest.mark.anyio
async def test_a_free_text_answer_ends_near_max_tokens(looping):  # noqa: F811
    lark = r'start: "### Error\n" TEXT' + "\n" + r"TEXT: /(?:[^\n]|\n)+/"
    result = await looping.generate(_snapshot_request(200, TextGrammar(lark=lark)))
    assert result.finish_reason == "stop" and result.stats.completion_tokens < 200


@pytest.mark.anyio
async def test_a_looping_model_s_page_state_is_closed_near_max_tokens(looping):  # noqa: F811
    # The page state alone (a looping model may take the free-text error answer instead).
    lark = SNAPSHOT_GRAMMAR.lark.replace("start: page_state | other_answer", "start: page_state")
    page_state = SNAPSHOT_GRAMMAR.model_copy(update={"lark": lark})
    closing_steps = looping.counters.extra.get("grammar_closing_steps", 0)
    result = await looping.generate(_snapshot_request(300, page_state))
    assert result.stats.completion_tokens <= 300
    assert _accepts(lark, result.text), result.text
    assert isinstance(_tree(result.text), list)
    assert looping.counters.extra["grammar_closing_steps"] > closing_steps


@pytest.mark.anyio
async def test_transformers_keeps_to_the_grammar_too(transformers_engine):
    result = await transformers_engine.generate(_snapshot_request(200))
    assert _accepts(SNAPSHOT_GRAMMAR.lark, result.text), result.text


# -- the web world's loop guard -----------------------------------------------------------------


@pytest.mark.data
def test_the_web_guard_catches_a_block_with_counting_refs_and_never_a_real_observation():
    settings = WEB.generation.loop_guard
    assert settings is not None and settings.mask_digits
    guard = LoopGuard(lambda tokens: "", settings)
    block = '  - paragraph [ref=e{n}]:\n    - text: "The C Programming Language is a language."\n'
    looped = "".join(block.format(n=n) for n in range(10, 60))
    assert guard.loops(looped)
    assert not LoopGuard(lambda tokens: "").loops(looped)  # not an exact repeat
    assert guard.loops("It is a language. " * 8)  # the default rule holds beside it
    observations = _web_observations()
    assert len(observations) > 1000
    assert settings.unique_names is not None
    unique = re.compile(settings.unique_names)
    for text in observations:
        # Every prefix a decoder would have checked (every 7th character: loops are longer).
        ends = range(settings.min_span, len(text), 7)
        assert not any(loops_by(settings, text[:end]) for end in ends)
        refs = unique.findall(text)
        assert len(refs) == len(set(refs)), text[:200]  # no real answer names a ref twice
    assert unique.findall('- link "Index" [ref=f1e9] [cursor=pointer]') == ["f1e9"]


# -- what the simulator asks of the engine -----------------------------------------------------

SITE_DOWN = "The site is down: every page answers 503"


@pytest.mark.anyio
async def test_the_grammar_is_asked_for_until_a_world_condition_changes_the_answers():
    """Plumbing (FakeEngine): the snapshot's grammar and the web loop rule reach the engine;
    under a world condition the grammar is left out, since the answer may be an error."""
    scenario = f"""
name: outage
rules:
  - id: down
    match: {{tool: browser_snapshot}}
    when: {{nth: 2}}
    effects: [{{kind: world, condition: "{SITE_DOWN}"}}]
"""
    fake = FakeEngine("### Page", context_window=16384)  # the web prompt and a snapshot
    simulator = make_simulator(scenario, engine=fake, domain=WEB)
    async with client_for(simulator) as client:
        for arguments in ({}, {"depth": 3}):
            await client.call_tool("browser_snapshot", arguments, meta=in_episode("ep"))
    before, during = fake.requests
    assert SITE_DOWN in during.messages[-1].content  # the condition is active on the 2nd
    assert before.grammar == SNAPSHOT_GRAMMAR and during.grammar is None
    assert before.loop_guard == during.loop_guard == WEB.generation.loop_guard
