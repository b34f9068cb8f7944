"""Grammars of text answers: a tool may declare the form of its answer, and decoding keeps to it.

A tool answered in JSON is constrained by its outputSchema (engines/constraints.py). A tool
answered in text can declare a grammar instead (``simulation.answer_grammar`` in its domain
file): a Lark grammar in llguidance's dialect (rules in lower case, regex terminals in upper
case, ``/.../`` for a regex). The world model still writes every answer; the grammar only
rules out text no real server would print, such as a YAML snapshot with an unclosed quote.

Grammars may use the building blocks below by name without defining them; ``expand`` adds
the definition of each one used:

- ``yaml_block_sequence``: one or more lines of a YAML block sequence as Playwright MCP
  writes accessibility trees (``- role "name" [attr=value]``, ``- role: value``,
  ``- /prop: value``, ``- 'quoted key'``; a key ending in ``:`` opens children indented two
  spaces more), nested to at most ``YAML_MAX_DEPTH`` levels. Every text it accepts parses as
  a YAML list (tests/test_text_grammars.py checks random documents), and each line ends with
  a newline, so a document can be closed after any line.
"""

from __future__ import annotations

import functools
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

YAML_MAX_DEPTH = 12
# Characters (about) in one name or value: every scalar is bounded, so a model looping inside
# a quoted string must close it (real snapshot lines in data/web: at most 632, but for
# web/docbook's, up to about 790; two PAM pages whose one-line program listings run to 1,243
# are left out of it, web.PAM_WIDE).
MAX_SCALAR = 800
_AT_MOST = f"{{0,{MAX_SCALAR}}}"

# Characters never allowed inside a YAML line: controls, C1 controls, the Unicode line and
# paragraph separators (YAML line breaks) and non-characters.
_NON_PRINTABLE = r"\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff"
# A double-quoted name inside a plain key: no ": " (a mapping indicator) and no "#" (a
# comment after a space); backslashes are literal in a plain scalar.
_NAME = rf'"(?:[^:#"\\{_NON_PRINTABLE}]|\\[^{_NON_PRINTABLE}]|:[^ :#{_NON_PRINTABLE}]){_AT_MOST}"'
# Playwright's aria snapshot writes each of its nine attribute kinds at most once on a node
# (checked, disabled, expanded, active, level, pressed, selected, ref, cursor; data/web
# has at most two on one), so a model looping on attributes ("[default] [default] ...") must
# end the line.
MAX_ATTRIBUTES = 9
_NODE = rf"[a-z]+(?: {_NAME})?(?: \[[a-z]+(?:=[A-Za-z0-9_.,\-]+)?\]){{0,{MAX_ATTRIBUTES}}}"
_SINGLE_QUOTED = rf"'(?:[^'{_NON_PRINTABLE}]|''){_AT_MOST}'"
_DOUBLE_QUOTED = rf'"(?:[^"\\{_NON_PRINTABLE}]|\\["\\\/bfnrt ]|\\u[0-9a-fA-F]{{4}}){_AT_MOST}"'
# A plain scalar value: no indicator first, no ": " or " #" inside, no ":" at the end.
_PLAIN = (
    rf"[^ \"'!&*?|>%@`#,\[\]{{}}:\-{_NON_PRINTABLE}]"
    rf"(?:[^:# {_NON_PRINTABLE}]#*| +[^:# {_NON_PRINTABLE}]#*|:[^ :#{_NON_PRINTABLE}]#*)" + _AT_MOST
)
_VALUE = rf"(?:{_DOUBLE_QUOTED}|{_PLAIN})"
_LEAF = rf"{_NODE}(?:: {_VALUE})?|\/[a-z]+: {_VALUE}|{_SINGLE_QUOTED}(?:: {_VALUE})?"
_KEY = rf"{_NODE}|{_SINGLE_QUOTED}"


def yaml_block_sequence(max_depth: int = YAML_MAX_DEPTH) -> str:
    """Lark rules of ``yaml_block_sequence``: one rule pair per depth, since indentation is
    not context free; a key at the deepest level has no children (YAML reads it as null)."""
    rules = ["yaml_block_sequence: yaml_item_0+"]
    for depth in range(max_depth + 1):
        indent = "  " * depth
        rules.append(f"YAML_LEAF_{depth}: /{indent}- (?:{_LEAF})\\n/")
        rules.append(f"YAML_KEY_{depth}: /{indent}- (?:{_KEY}):\\n/")
        children = f" yaml_item_{depth + 1}*" if depth < max_depth else ""
        rules.append(f"yaml_item_{depth}: YAML_LEAF_{depth} | YAML_KEY_{depth}{children}")
    return "\n".join(rules)


BUILDING_BLOCKS = {"yaml_block_sequence": yaml_block_sequence}


def expand(lark: str) -> str:
    """``lark`` with the definition of every building block it uses and does not define."""
    parts = [lark.rstrip("\n")]
    for name, definition in BUILDING_BLOCKS.items():
        used = re.search(rf"\b{name}\b", lark)
        defined = re.search(rf"^\s*{name}\s*:", lark, re.MULTILINE)
        if used and not defined:
            parts.append(definition())
    return "\n".join(parts) + "\n"


@functools.lru_cache(maxsize=64)
def compile_lark(lark: str) -> str:
    """The expanded grammar in llguidance's serialized form; ValueError with llguidance's
    message if it does not compile. Cached: a domain's grammar is compiled when its file is
    loaded, and every call of the tool reuses that (errors are not cached, and raise again)."""
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_lark(expand(lark))
    error = llguidance.LLMatcher.validate_grammar(grammar)  # "" when it compiles
    if error:
        raise ValueError(f"the grammar does not compile: {error.strip()}")
    return grammar


class TextGrammar(BaseModel):
    """The form of a text answer, kept to while decoding."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lark: str = Field(
        min_length=1,
        description="A Lark grammar (llguidance's dialect) of the whole answer; it may use "
        "the building blocks of aw_mcp.engines.text_grammars (yaml_block_sequence) undefined.",
    )
    closing_chars: str = Field(
        default="\n",
        min_length=1,
        description="Characters that bring the answer nearer its end, in order of "
        "preference; near max_tokens a token made only of them is taken wherever the "
        "grammar allows one (one with the most preferred character first), so the answer "
        "is complete when the budget runs out. For a line grammar: the newline, then the "
        "closing fence's character, then closing quotes.",
    )

    @field_validator("lark")
    @classmethod
    def _compiles(cls, lark: str) -> str:
        compile_lark(lark)
        return lark
