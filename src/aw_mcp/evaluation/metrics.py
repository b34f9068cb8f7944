"""Per-sample metrics of a predicted observation against the real one.

All are deterministic and need no model:
- exact match: identical once trailing spaces of each line and blank lines at both ends are
  dropped (layout still counts);
- similarity: ``difflib.SequenceMatcher(None, prediction, reference).ratio()`` (difflib's
  defaults) on whitespace-normalized text (runs of whitespace become one space); two empty
  texts are 1.0;
- exit code (terminal tools): the code in a last line ``[exit code: N]``; agreement is counted
  only where the reference has one;
- JSON (references that are a JSON object or array): the prediction parses as JSON, and has
  the reference's shape at the top level (same type; for objects the same set of keys);
- page state (references with a page snapshot, as Playwright MCP's ``### Snapshot`` YAML
  tree): the prediction has a page URL line and a snapshot that parses as a YAML list with
  unique ``[ref=...]`` element refs; refs usable: every ref of the reference's snapshot that
  the episode's next action names is an element of the prediction's snapshot too (where the
  next action names one); targets shown: every element those refs name in the reference, by
  its role and name (``link "Home"``), is an element of the prediction's snapshot under any
  ref: what an agent reading the simulated page could act on, where refs usable only says
  that the real ref's number is there (it may name a paragraph);
- exact and similarity with volatile values masked (where the reference has one): the same
  two on both texts after ``mask_volatile`` (``evaluation/volatile.py``: the time in
  Playwright's output file names, clock readings), which no simulator can know. The raw
  scores stay the headline; these say how much of a miss is only such a value.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from aw_mcp.evaluation.volatile import mask_volatile

_EXIT_CODE = re.compile(r"\[exit code: (-?\d+)\]\s*\Z")
_WHITESPACE = re.compile(r"\s+")
_PAGE_SNAPSHOT = re.compile(r"^### Snapshot\n```yaml\n(.*?)\n```", re.S | re.M)
_PAGE_URL = re.compile(r"^- Page URL: \S+", re.M)
_ELEMENT_REF = re.compile(r"\[ref=([^\]\s]+)\]")
# A snapshot line's element: its role and quoted name (``link "Home"``, ``row``), and its ref;
# YAML single-quotes a line whose name holds a quote or starts with a sign (``- 'link "<< a"``).
_ELEMENT = re.compile(
    r'^\s*- \'?(?P<element>[a-z]+(?: "(?:[^"\\]|\\.)*")?)[^\n]*?\[ref=(?P<ref>[^\]\s]+)\]', re.M
)
_WORD = re.compile(r"[A-Za-z0-9_]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# Words that run the next word as the command: the family is the command they run.
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "nice"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", "{", "}"})
# Leading steps that only prepare the shell (`cd x && make`): the family is what runs after.
_SETUP_STEPS = frozenset({"cd", "export", "source", ".", "set"})


def normalize_whitespace(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def strip_layout(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")


def exact_match(prediction: str, reference: str) -> bool:
    return strip_layout(prediction) == strip_layout(reference)


def similarity(prediction: str, reference: str) -> float:
    a, b = normalize_whitespace(prediction), normalize_whitespace(reference)
    return difflib.SequenceMatcher(None, a, b).ratio()


def exit_code(text: str) -> int | None:
    """The N of a last line ``[exit code: N]``, or None."""
    match = _EXIT_CODE.search(text.rstrip())
    return int(match.group(1)) if match else None


def parse_json_value(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return False, None


def reference_is_json(reference: str) -> bool:
    ok, value = parse_json_value(reference)
    return ok and isinstance(value, dict | list)


def same_json_shape(prediction: Any, reference: Any) -> bool:
    if isinstance(reference, dict):
        return isinstance(prediction, dict) and set(prediction) == set(reference)
    return type(prediction) is type(reference)


def snapshot_refs(text: str) -> list[str] | None:
    """The element refs of a page snapshot in ``text``, in order; None without a snapshot."""
    match = _PAGE_SNAPSHOT.search(text)
    return _ELEMENT_REF.findall(match.group(1)) if match else None


def page_state_well_formed(text: str) -> bool:
    """A page URL line and a snapshot that parses as a YAML list with unique element refs."""
    match = _PAGE_SNAPSHOT.search(text)
    if match is None or _PAGE_URL.search(text) is None:
        return False
    try:
        tree = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return False
    refs = _ELEMENT_REF.findall(match.group(1))
    return isinstance(tree, list) and bool(refs) and len(refs) == len(set(refs))


def refs_usable(prediction: str, real: list[str] | None, next_action: str | None) -> bool | None:
    """Whether the refs the next action takes from the real snapshot (its refs: ``real``)
    exist in the predicted one; None where there is no snapshot or the next action names none
    of its refs."""
    if not (named := _refs_named(next_action, real)):
        return None
    return named <= set(snapshot_refs(prediction) or [])


def _refs_named(next_action: str | None, refs: Iterable[str] | None) -> set[str]:
    """The refs of ``refs`` (a real snapshot's) that the next action's text names."""
    return set(_WORD.findall(next_action or "")) & set(refs or ())


def snapshot_element_lines(text: str) -> list[tuple[str, str]] | None:
    """(ref, role and name) of each element line of a page snapshot in ``text``, in order
    (``("e52", 'link "Home"')``); None without a snapshot."""
    match = _PAGE_SNAPSHOT.search(text)
    if match is None:
        return None
    return [(m.group("ref"), m.group("element")) for m in _ELEMENT.finditer(match.group(1))]


def snapshot_elements(text: str) -> dict[str, str] | None:
    """Each element ref of a page snapshot in ``text`` -> its role and name; None without a
    snapshot (a ref written twice keeps its last element)."""
    lines = snapshot_element_lines(text)
    return None if lines is None else dict(lines)


def targets_shown(
    prediction: str, real: dict[str, str] | None, next_action: str | None
) -> bool | None:
    """Whether the elements the next action takes from the real snapshot (its elements:
    ``real``, by ref) are elements of the predicted one, by role and name under any ref (an
    element with no name: by its role); None where ``refs_usable`` is None."""
    if not real or not (named := _refs_named(next_action, real)):
        return None
    shown = {element for _, element in snapshot_element_lines(prediction) or []}
    return all(real[ref] in shown for ref in named)


@dataclass(frozen=True)
class SampleMetrics:
    """One prediction's metrics; None where a metric does not apply to the sample."""

    exact: bool
    similarity: float
    exit_code_agrees: bool | None = None
    json_valid: bool | None = None
    json_shape: bool | None = None
    page_state: bool | None = None
    refs_usable: bool | None = None
    targets_shown: bool | None = None
    exact_masked: bool | None = None  # where the reference has a volatile value
    similarity_masked: float | None = None


def measure(prediction: str, reference: str, next_action: str | None = None) -> SampleMetrics:
    """``next_action``: the episode's next action message, for the refs a snapshot must keep."""
    real_refs = snapshot_refs(reference)
    exit_agrees = None
    if (reference_code := exit_code(reference)) is not None:
        exit_agrees = exit_code(prediction) == reference_code
    json_valid = json_shape = None
    if reference_is_json(reference):
        json_valid, value = parse_json_value(prediction)
        json_shape = json_valid and same_json_shape(value, json.loads(reference))
    exact_masked = similarity_masked = None
    if (masked_reference := mask_volatile(reference)) != reference:
        masked_prediction = mask_volatile(prediction)
        exact_masked = exact_match(masked_prediction, masked_reference)
        similarity_masked = similarity(masked_prediction, masked_reference)
    return SampleMetrics(
        exact=exact_match(prediction, reference),
        similarity=similarity(prediction, reference),
        exact_masked=exact_masked,
        similarity_masked=similarity_masked,
        exit_code_agrees=exit_agrees,
        json_valid=json_valid,
        json_shape=json_shape,
        page_state=page_state_well_formed(prediction) if real_refs is not None else None,
        refs_usable=refs_usable(prediction, real_refs, next_action),
        targets_shown=targets_shown(prediction, snapshot_elements(reference), next_action),
    )


def command_words(command: str) -> list[str]:
    """A command line's words and operators (``|``, ``&&``, ``>``, ...), as the shell splits
    them; plain words where the quotes do not balance."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # unbalanced quotes: words are still good enough here
        return command.split()


def command_stages(words: list[str]) -> list[list[str]]:
    """The simple commands of a command line's words: split at ``|``, ``&&``, ``;`` ...."""
    stages: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            if stages[-1]:
                stages.append([])
        else:
            stages[-1].append(word)
    return [s for s in stages if s]


def stage_program(words: list[str]) -> str:
    """The program one simple command runs: past ``VAR=value`` assignments and wrappers such
    as ``sudo``/``env``; a path gives its last part (``/usr/bin/ls`` -> ``ls``)."""
    i = 0
    while i < len(words) - 1 and (_ASSIGNMENT.match(words[i]) or words[i] in _WRAPPERS):
        i += 1
    word = words[i]
    if _ASSIGNMENT.match(word):
        return "(assignment)"
    return word.rsplit("/", 1)[-1] or word


def command_family(command: str) -> str:
    """The program a command line runs: its first stage's program (:func:`stage_program`),
    after leading steps that only prepare the shell (``cd DIR &&``, ``export X=1;``,
    ``source venv/bin/activate &&``). ``cd`` alone is ``cd``; an empty line is ``(empty)``."""
    stages = command_stages(command_words(command))
    if not stages:
        return "(empty)"
    while len(stages) > 1 and stages[0][0] in _SETUP_STEPS:
        stages.pop(0)
    return stage_program(stages[0])
