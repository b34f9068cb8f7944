"""AgentWorldBench-format samples: one per turn of an episode, the unit every mode scores.

A sample (one line of ``<domain>_test.jsonl``) carries the whole episode: ``prompt`` (every
turn's action message), ``response`` (every turn's real observation message), ``system_str``,
and ``turn_idx`` (1-based), the turn to predict. The history for turn k is the first k-1
prompt/response pairs; ``current_prompt`` (or ``prompt[k-1]``) is the action to answer.

Predictions add ``gen`` (the raw model output, as the reference harness writes it) and may
add ``reference`` (the real observation, already clean), ``domain`` and ``family``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aw_mcp.engines.base import ChatMessage
from aw_mcp.engines.reasoning import answer_text
from aw_mcp.episode.prompt import AgentWorldProfile
from aw_mcp.evaluation.metrics import command_family
from aw_mcp.files.jsonl import read_jsonl
from aw_mcp.files.yaml import DataFileError

BENCH_FILE_GLOB = "*_test.jsonl"
UNKNOWN_FAMILY = "(unknown)"

# The two action-message shapes our prompt profiles write (PromptProfile.action_message and
# AgentWorldProfile.action_message; tests round-trip both), and AgentWorldBench's own.
_DEFAULT_ACTION = re.compile(r"Action: (?P<tool>\S+)\nArguments: (?P<arguments>.*)")
_FENCED_JSON = re.compile(r"```(?:json)?\n(?P<body>.*?)\n```", flags=re.S)


def sample_key(task: str, sample_id: str | int) -> str:
    """A sample's identity for resuming: ids are unique within a domain's file."""
    return f"{task}/{sample_id}"


class BenchSample(BaseModel):
    """One turn to predict; unknown keys (``gen``, ``reference``, judge fields) are kept."""

    model_config = ConfigDict(extra="allow")

    task: str
    id: str | int
    prompt: list[str]
    response: list[str]
    current_prompt: str = ""
    system_str: str = ""
    turn_idx: int = Field(ge=1)
    total_turns: int | None = None

    @field_validator("prompt", "response", mode="before")
    @classmethod
    def _one_message_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value  # the reference harness allows it

    @property
    def key(self) -> str:
        return sample_key(self.task, self.id)

    @property
    def episode_key(self) -> str:
        """The same for every turn of one episode (they share the action list): local engines
        keep one KV state per key, so an episode's turns reuse its prompt prefix."""
        digest = hashlib.sha1(json.dumps(self.prompt).encode(), usedforsecurity=False)
        return f"{self.task}/{digest.hexdigest()[:16]}"

    @property
    def domain(self) -> str:
        return self.task.split("/")[-1]

    @property
    def extra(self) -> dict[str, Any]:
        return self.model_extra or {}

    def action_message(self) -> str:
        if self.current_prompt:
            return self.current_prompt
        k = self.turn_idx - 1
        return self.prompt[k] if k < len(self.prompt) else ""

    def messages(self) -> list[ChatMessage]:
        """What the world model reads: system, the real history, then the current action."""
        messages = []
        if self.system_str:
            messages.append(ChatMessage(role="system", content=self.system_str))
        for action, observation in list(zip(self.prompt, self.response, strict=False))[
            : self.turn_idx - 1
        ]:
            messages.append(ChatMessage(role="user", content=action))
            messages.append(ChatMessage(role="assistant", content=observation))
        messages.append(ChatMessage(role="user", content=self.action_message()))
        return messages

    def reference(self) -> str:
        """The real observation of this turn, marker removed."""
        if isinstance(given := self.extra.get("reference"), str):
            return given
        return self._response(self.turn_idx)

    def previous_reference(self) -> str:
        """The real observation of the turn before (same episode); empty at turn 1."""
        return self._response(self.turn_idx - 1) if self.turn_idx > 1 else ""

    def _response(self, turn: int) -> str:
        return clean_reference(self.response[turn - 1]) if turn <= len(self.response) else ""

    def prediction(self) -> str:
        """The observation inside ``gen`` (thinking and tags dropped); empty when absent."""
        gen = self.extra.get("gen")
        return extract_observation(gen) if isinstance(gen, str) else ""

    def family(self) -> str:
        if isinstance(given := self.extra.get("family"), str):
            return given
        return family_of(*parse_action(self.action_message()))


def family_of(tool: str | None, arguments: dict[str, Any]) -> str:
    """The program a command runs for tools that take a ``command`` line (the terminal's
    run_command, start_process, AgentWorldBench keystrokes); otherwise the tool name."""
    command = arguments.get("command")
    if isinstance(command, str):
        return command_family(command)
    return tool or UNKNOWN_FAMILY


def extract_observation(output: str) -> str:
    """Raw model output -> observation: thinking dropped, the last ``<predicted_observation>``
    block taken when there is one, the ``**Environment Observation:**`` marker removed."""
    return clean_reference(answer_text(output))


def clean_reference(text: str) -> str:
    marker = AgentWorldProfile.OBSERVATION_MARKER.strip()
    text = text.strip("\n")
    if text.startswith(marker):
        text = text[len(marker) :].lstrip("\n")
    return text


def parse_action(message: str) -> tuple[str | None, dict[str, Any]]:
    """(tool, arguments) of an action message; (None, {}) when it has no readable call.

    AgentWorldBench terminal actions are keystroke lists: their text becomes ``command``."""
    if match := _DEFAULT_ACTION.search(message):
        value = _loads(match["arguments"])
        return match["tool"], value if isinstance(value, dict) else {}
    fenced = _FENCED_JSON.search(message)
    value = _loads(fenced["body"] if fenced else message)
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        arguments = value.get("arguments")
        return value["name"], arguments if isinstance(arguments, dict) else {}
    if (
        isinstance(value, list)
        and value
        and all(isinstance(k, dict) and "keystrokes" in k for k in value)
    ):
        keys = "".join(str(k["keystrokes"]) for k in value)
        return "keystrokes", {"command": keys.strip()}
    return None, {}


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None


def load_bench_dir(directory: Path, limit: int | None = None) -> list[BenchSample]:
    """Samples of every ``*_test.jsonl`` in ``directory`` (sorted by file name, file order)."""
    if not directory.is_dir():
        raise FileNotFoundError(f"no data directory at {directory}")
    files = sorted(directory.glob(BENCH_FILE_GLOB))
    if not files:
        raise DataFileError(directory, [(None, f"no {BENCH_FILE_GLOB} files in this folder")])
    samples = [s for path in files for s in read_jsonl(path, BenchSample)]
    return samples[:limit] if limit is not None else samples
