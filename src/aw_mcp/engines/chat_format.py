"""Render chat messages into one prompt string for engines that tokenize text themselves.

A model's own chat template (from GGUF metadata) is used when it has one. Base models have
none; they get a plain transcript whose next action header is a natural stop, which base
models follow better than role tags (see shared notes on Gemma-3-270M base).
"""

from __future__ import annotations

from dataclasses import dataclass

from jinja2.sandbox import ImmutableSandboxedEnvironment

from aw_mcp.engines.base import ChatMessage

TRANSCRIPT_ACTION = "### Action\n"
TRANSCRIPT_OBSERVATION = "### Observation\n"


@dataclass
class ChatRenderer:
    template: str | None
    bos_token: str = ""
    eos_token: str = ""

    def __post_init__(self) -> None:
        self._compiled = None
        if self.template:
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            self._compiled = env.from_string(self.template)

    @property
    def stop_strings(self) -> list[str]:
        if self._compiled is None:
            return [TRANSCRIPT_ACTION.strip()]
        return [s for s in (self.eos_token,) if s]

    def render(self, messages: list[ChatMessage]) -> str:
        if self._compiled is None:
            return render_transcript(messages)

        def raise_exception(message: str) -> None:
            raise ValueError(message)

        return self._compiled.render(
            messages=[m.model_dump() for m in messages],
            add_generation_prompt=True,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            raise_exception=raise_exception,
        )


def render_transcript(messages: list[ChatMessage]) -> str:
    parts = []
    for message in messages:
        if message.role == "system":
            parts.append(message.content.strip() + "\n\n")
        elif message.role == "user":
            parts.append(TRANSCRIPT_ACTION + message.content.strip() + "\n")
        else:
            parts.append(TRANSCRIPT_OBSERVATION + message.content + "\n")
    parts.append(TRANSCRIPT_OBSERVATION)
    return "".join(parts)
