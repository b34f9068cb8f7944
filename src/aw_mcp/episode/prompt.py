"""Turn a domain, its world and an episode's history into the chat messages a world model reads.

The layout is chosen for the KV cache: everything that never changes (instructions, tools,
world facts, demonstrations) comes first, then one user/assistant pair per past step, then the
current action. Step n+1's prompt therefore starts with step n's prompt and observation, and
the engine only evaluates what was added. Mid-episode world conditions are written into the
user turn they apply to, never into the system message, for the same reason.

Two profiles render the same content: ``default`` (plain, for small local models) and
``agentworld`` (the turn shape Qwen-AgentWorld was trained on).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from aw_mcp.domain.models import DomainSpec, ToolCall, ToolSpec, WorldSpec
from aw_mcp.engines.base import ChatMessage
from aw_mcp.episode.episode import Turn
from aw_mcp.episode.schema_outline import schema_outline

MAX_SUMMARIZED_ACTIONS = 12  # the summary of dropped turns must stay small itself
MAX_SUMMARIZED_ARGUMENTS = 120


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), sort_keys=False)


class PromptProfile:
    """How actions and observations are written. Subclasses change the wording, not the layout."""

    name: ClassVar[str] = "default"

    def system_message(
        self, domain: DomainSpec, tools: list[ToolSpec], world: WorldSpec, omitted: list[Turn]
    ) -> str:
        parts = [domain.instructions.strip()]
        parts.append(
            "# Tools the agent can call\n" + "\n".join(self.describe_tool(t) for t in tools)
        )
        facts = self.describe_world(world)
        if facts:
            parts.append(
                "# World facts\nThese are true at the start and stay true unless the "
                "history changes them:\n" + facts
            )
        parts.append(
            "# How to answer\nEach user message is one action the agent took. Reply with "
            "exactly what the environment returns for it: the raw observation, no commentary, "
            "no explanation, no markdown fences. Stay consistent with every earlier observation."
        )
        if omitted:
            parts.append(self.describe_omitted(omitted))
        return "\n\n".join(parts)

    def describe_tool(self, tool: ToolSpec) -> str:
        summary = (tool.description or tool.title or "").strip().splitlines()
        first = summary[0] if summary else ""
        params = ", ".join(sorted((tool.input_schema.get("properties") or {}).keys()))
        line = f"- {tool.name}({params}): {first[:300]}"
        if tool.simulation.guidance:
            line += f"\n  Observation format: {tool.simulation.guidance.strip()}"
        if tool.output_schema:
            line += "\n  Returns JSON shaped like: " + schema_outline(tool.output_schema)
        return line

    def describe_world(self, world: WorldSpec) -> str:
        lines = [
            f"- {key}: {compact_json(value) if not isinstance(value, str) else value}"
            for key, value in world.facts.items()
        ]
        lines += [f"- {note}" for note in world.notes]
        return "\n".join(lines)

    def describe_omitted(self, omitted: list[Turn]) -> str:
        shown = omitted[-MAX_SUMMARIZED_ACTIONS:]
        lines = [
            f"- step {t.index}: {t.action.tool} "
            f"{compact_json(t.action.arguments)[:MAX_SUMMARIZED_ARGUMENTS]}"
            for t in shown
        ]
        more = len(omitted) - len(shown)
        head = (
            f"# Earlier steps\n{len(omitted)} earlier steps are not shown in full. "
            "Their actions were (observations left out):"
        )
        if more:
            head += f"\n- ... {more} steps before these"
        return head + "\n" + "\n".join(lines)

    def action_message(self, step: int, action: ToolCall, conditions: list[str]) -> str:
        text = f"Step {step}. Action: {action.tool}\nArguments: {compact_json(action.arguments)}"
        if conditions:
            text += "\nWorld conditions in effect now: " + "; ".join(conditions)
        return text

    def observation_message(self, observation: str) -> str:
        return observation

    def extract_observation(self, output: str) -> str:
        """The observation inside raw model output (profiles for reasoning models override)."""
        return strip_reasoning(output).strip("\n")


class AgentWorldProfile(PromptProfile):
    """Qwen-AgentWorld's conversation shape: ``### Turn k`` actions, marked observations."""

    name: ClassVar[str] = "agentworld"
    OBSERVATION_MARKER = "**Environment Observation:**\n"

    def action_message(self, step: int, action: ToolCall, conditions: list[str]) -> str:
        call = compact_json({"name": action.tool, "arguments": action.arguments})
        text = f"### Turn {step}\n**Action:**\n```json\n{call}\n```"
        if conditions:
            text += "\n**World conditions in effect:** " + "; ".join(conditions)
        return text

    def observation_message(self, observation: str) -> str:
        return self.OBSERVATION_MARKER + observation

    def extract_observation(self, output: str) -> str:
        text = strip_reasoning(output)
        blocks = re.findall(
            r"<predicted_observation>(.*?)(?:</predicted_observation>|$)", text, flags=re.S
        )
        if blocks:
            text = blocks[-1]
        text = text.strip("\n")
        if text.startswith(self.OBSERVATION_MARKER.strip()):
            text = text[len(self.OBSERVATION_MARKER.strip()) :].lstrip("\n")
        return text


PROFILES: dict[str, type[PromptProfile]] = {p.name: p for p in (PromptProfile, AgentWorldProfile)}


def strip_reasoning(text: str) -> str:
    """Drop ``<think>...</think>`` blocks; an unclosed one drops everything after it."""
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.S)
    if "</think>" in text:  # a template that opened the block in the prompt
        text = text.split("</think>", 1)[1]
    return re.sub(r"<think>.*\Z", "", text, flags=re.S)


def build_messages(
    profile: PromptProfile,
    domain: DomainSpec,
    tools: list[ToolSpec],
    world: WorldSpec,
    turns: list[Turn],
    omitted: int,
    current: ToolCall,
    current_step: int,
    current_conditions: list[str],
    summarize_omitted: bool = True,
) -> list[ChatMessage]:
    """The full prompt for one call; ``omitted`` oldest turns are summarized, not shown."""
    summarized = turns[:omitted] if summarize_omitted else []
    messages = [
        ChatMessage(role="system", content=profile.system_message(domain, tools, world, summarized))
    ]
    for step, demo in enumerate(domain.demonstrations, start=1):
        messages.append(ChatMessage(role="user", content=profile.action_message(step, demo, [])))
        messages.append(
            ChatMessage(role="assistant", content=profile.observation_message(demo.observation))
        )
    for turn in turns[omitted:]:
        messages.append(
            ChatMessage(
                role="user",
                content=profile.action_message(turn.index, turn.action, turn.conditions),
            )
        )
        messages.append(
            ChatMessage(role="assistant", content=profile.observation_message(turn.observation))
        )
    messages.append(
        ChatMessage(
            role="user", content=profile.action_message(current_step, current, current_conditions)
        )
    )
    return messages
