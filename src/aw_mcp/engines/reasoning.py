"""Reasoning models' output: thinking to drop, and the observation block to keep.

Qwen-AgentWorld (and other Qwen3-style models) think inside ``<think>...</think>`` before
answering, and may be cut off before closing the tag; AgentWorld then writes the observation
inside ``<predicted_observation>...</predicted_observation>``. Servers started with a reasoning
parser (vLLM/SGLang ``--reasoning-parser qwen3``) move the thinking out of the answer
themselves; these helpers handle the raw text either way. Used by the prompt profiles (to
extract an observation) and by engines (to tell "ran out of budget while thinking" apart
from a short answer).
"""

from __future__ import annotations

import re

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
OBSERVATION_OPEN = "<predicted_observation>"
OBSERVATION_CLOSE = "</predicted_observation>"

_THINK_BLOCK = re.compile(r"<think>.*?</think>", flags=re.S)
_UNCLOSED_THINK = re.compile(r"<think>.*\Z", flags=re.S)
_OBSERVATION_BLOCK = re.compile(
    r"<predicted_observation>(.*?)(?:</predicted_observation>|\Z)", flags=re.S
)


def strip_reasoning(text: str) -> str:
    """Drop ``<think>...</think>`` blocks; an unclosed one drops everything after it.

    A lone ``</think>`` with no opening tag means the chat template opened the block in the
    prompt (Qwen3 templates do), so everything before it is thinking too.
    """
    text = _THINK_BLOCK.sub("", text)
    if THINK_CLOSE in text:
        text = text.split(THINK_CLOSE, 1)[1]
    return _UNCLOSED_THINK.sub("", text)


def predicted_observation(text: str) -> str | None:
    """The last ``<predicted_observation>`` block of ``text`` (unclosed tolerated), or None."""
    blocks = _OBSERVATION_BLOCK.findall(text)
    return blocks[-1] if blocks else None


def answer_text(output: str) -> str:
    """What a reasoning model answered: thinking stripped, then its observation block if any."""
    text = strip_reasoning(output)
    block = predicted_observation(text)
    return block if block is not None else text


def only_thinking(output: str) -> bool:
    """True when the output holds thinking but no answer (the budget ran out mid-thought)."""
    thought = THINK_OPEN in output or THINK_CLOSE in output
    return thought and not answer_text(output).strip()
