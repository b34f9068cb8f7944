"""Grounding: show the world model real observations of calls like the one it must answer.

``aw-mcp serve --grounding DIR`` indexes every transition (a call and its recorded real
observation) of the record directory DIR with BM25 (``bm25s``). For each call to simulate, the
few most similar transitions of the same tool are retrieved: similar arguments first, the
episode's previous action as context (``wc -l notes.txt`` after ``echo ... > notes.txt``). The
profile writes them into the CURRENT user turn, above the action; earlier turns are rendered
without them, so the prompt prefix (system, demonstrations, history) and its KV cache stay the
same from step to step.

This is retrieval of recorded real observations, not an emulator: the model still writes
every answer; the examples only show what such commands really print.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aw_mcp.domain.models import Demonstration
from aw_mcp.episode.prompt import compact_json
from aw_mcp.errors import UserInputError
from aw_mcp.records.calls import Turn
from aw_mcp.records.reader import load_record_dir

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[A-Za-z0-9_.\-/]+|[|&;<>$=*'\"]")
_PARTS = re.compile(r"[_.\-/]+")


def text_tokens(text: str) -> list[str]:
    """Words, paths and flags (whole, and their parts: ``notes.txt`` is also ``notes`` and
    ``txt``), plus the shell punctuation that changes a command's output."""
    tokens = []
    for word in _TOKEN.findall(text.lower()):
        tokens.append(word)
        parts = [p for p in _PARTS.split(word) if p]
        if len(parts) > 1:
            tokens += parts
    return tokens


def arguments_text(arguments: dict[str, Any]) -> str:
    """Argument values only (keys are the same for every call of a tool)."""
    parts = []
    for value in arguments.values():
        parts.append(value if isinstance(value, str) else compact_json(value))
    return " ".join(parts)


@dataclass(frozen=True)
class Transition:
    """One recorded real call: what was called, after what, and what it returned."""

    tool: str
    arguments: dict[str, Any]
    observation: str
    previous: str  # the previous action's arguments text ("" at an episode's first call)
    episode: str
    is_error: bool = False


class _ToolIndex:
    def __init__(self, transitions: list[Transition]):
        import bm25s

        self.transitions = transitions
        corpus = [self.document(t.arguments, t.previous) for t in transitions]
        # A tool only ever called without arguments, and only first in an episode or after
        # another such call (the everything server's get-env), leaves nothing to rank by, and
        # bm25s cannot index that.
        self.retriever: Any = None
        self.vocabulary: set[str] = set()
        if any(corpus):
            self.retriever = bm25s.BM25()
            self.retriever.index(corpus, show_progress=False)
            self.vocabulary = set(self.retriever.vocab_dict)

    @staticmethod
    def document(arguments: dict[str, Any], previous: str) -> list[str]:
        # The call's own arguments count twice: they matter more than what came before.
        own = text_tokens(arguments_text(arguments))
        return own + own + text_tokens(previous)

    def search(self, arguments: dict[str, Any], previous: str, k: int) -> list[Transition]:
        if self.retriever is None:  # every recorded call is as similar as any other
            return self.transitions[:k]
        query = [t for t in self.document(arguments, previous) if t in self.vocabulary]
        if not query:
            return []
        k = min(k, len(self.transitions))
        ids, scores = self.retriever.retrieve([query], k=k, show_progress=False)
        return [self.transitions[int(i)] for i, s in zip(ids[0], scores[0], strict=True) if s > 0]


class GroundingIndex:
    """BM25 indexes of recorded real transitions, one per tool name."""

    def __init__(self, transitions: list[Transition], k: int = 3):
        self.k = k
        by_tool: dict[str, list[Transition]] = {}
        for transition in transitions:
            by_tool.setdefault(transition.tool, []).append(transition)
        self._indexes = {tool: _ToolIndex(items) for tool, items in by_tool.items()}
        self.size = len(transitions)

    @classmethod
    def from_record_dir(cls, directory: Path, k: int = 3) -> GroundingIndex:
        transitions = []
        for episode in load_record_dir(directory):
            previous = ""
            for turn in episode.turns():
                transitions.append(
                    Transition(
                        turn.action.tool,
                        turn.action.arguments,
                        turn.observation,
                        previous,
                        episode.episode,
                        turn.is_error,
                    )
                )
                previous = arguments_text(turn.action.arguments)
        if not transitions:
            raise UserInputError(f"--grounding: no recorded calls in {directory}")
        log.info("grounding: %d real transitions from %s", len(transitions), directory)
        return cls(transitions, k)

    def answers_of(self, tool: str) -> list[str]:
        """The text of every recorded answer of ``tool`` that was not an error."""
        index = self._indexes.get(tool)
        if index is None:
            return []
        return [t.observation for t in index.transitions if not t.is_error]

    def examples(
        self, tool: str, arguments: dict[str, Any], history: list[Turn]
    ) -> list[Demonstration]:
        """The retrieved transitions as worked examples for the prompt."""
        return [
            Demonstration(tool=t.tool, arguments=t.arguments, observation=t.observation)
            for t in self.retrieve(tool, arguments, history)
        ]

    def retrieve(
        self, tool: str, arguments: dict[str, Any], history: list[Turn]
    ) -> list[Transition]:
        """The most similar real transitions of ``tool``, best first (at most k)."""
        index = self._indexes.get(tool)
        if index is None:
            return []
        previous = arguments_text(history[-1].action.arguments) if history else ""
        found = index.search(arguments, previous, self.k)
        # Several identical examples teach nothing more than one.
        unique: dict[tuple[str, str], Transition] = {}
        for t in found:
            unique.setdefault((compact_json(t.arguments), t.observation), t)
        return list(unique.values())
