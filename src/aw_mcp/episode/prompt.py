"""Turn a domain, its world and an episode's history into the chat messages a world model reads.

The layout is chosen for the KV cache: everything that never changes (instructions, tools,
world facts, demonstrations) comes first, then one user/assistant pair per past step, then the
current action. Step n+1's prompt therefore starts with step n's prompt and observation, and
the engine only evaluates what was added. Mid-episode world conditions are written into the
user turn they apply to, never into the system message, for the same reason.

Three profiles render the same content: ``default`` (plain), ``small`` (the same facts in a
fraction of the tokens, for ~100M-parameter models and the adapters trained on it) and
``agentworld`` (the turn shape Qwen-AgentWorld was trained on).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

from aw_mcp.domain.models import (
    CLIENT_REQUEST_METHODS,
    Demonstration,
    DomainSpec,
    ToolCall,
    ToolSpec,
    WorldSpec,
)
from aw_mcp.engines.base import ChatMessage
from aw_mcp.engines.reasoning import (
    OBSERVATION_CLOSE,
    OBSERVATION_OPEN,
    answer_text,
)
from aw_mcp.engines.reasoning import strip_reasoning as strip_reasoning  # re-export
from aw_mcp.episode.schema_outline import schema_outline
from aw_mcp.records.calls import Turn
from aw_mcp.state.steps import StepState
from aw_mcp.state.text import render_step

MAX_SUMMARIZED_ACTIONS = 12  # the summary of dropped turns must stay small itself
MAX_SUMMARIZED_ARGUMENTS = 120
MAX_EXAMPLE_CHARS = 400  # a retrieved example's observation is cut here (bounded prompt)


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), sort_keys=False)


def describe_client_exchanges(action: ToolCall) -> str:
    """What the tool asked the MCP client during the call, and the client's answers (empty
    when it asked nothing): the world model answers in their light."""
    if not action.client:
        return ""
    lines = ["The tool asked the MCP client, which answered:"]
    for exchange in action.client:
        asked = f"{CLIENT_REQUEST_METHODS[exchange.kind]} {compact_json(exchange.request)}"
        if exchange.response is not None:
            lines.append(f"- {asked} -> {compact_json(exchange.response)}")
        else:
            lines.append(f"- {asked} -> no answer: {exchange.error}")
    return "\n" + "\n".join(lines)


class PromptProfile:
    """How actions and observations are written. Subclasses change the wording, not the layout.

    A profile that ``keeps_state`` also shows the episode's state next to each action (its
    view, ``aw_mcp.state.world``) and has the model write what the action read and changed
    before the observation (``aw_mcp.state.text``, the compact form); history cut to fit the
    context is then told as the state it left, not as a list of old actions."""

    name: ClassVar[str] = "default"
    keeps_state: ClassVar[bool] = False

    def system_message(
        self,
        domain: DomainSpec,
        tools: list[ToolSpec],
        world: WorldSpec,
        omitted: list[Turn],
        state_summary: str | None = None,
    ) -> str:
        parts = [self.role_section(domain)]
        parts.append(
            "# Tools the agent can call\n" + "\n".join(self.describe_tool(t) for t in tools)
        )
        facts = self.describe_world(world)
        if facts:
            parts.append(
                "# World facts\nThese are true at the start and stay true unless the "
                "history changes them:\n" + facts
            )
        parts.append(self.answer_section())
        parts += self.omitted_sections(omitted, state_summary)
        return "\n\n".join(parts)

    def omitted_sections(self, omitted: list[Turn], state_summary: str | None) -> list[str]:
        """What stands for the turns cut from the prompt: the state they left (a profile
        keeping state, when given), else their actions."""
        if not omitted:
            return []
        if self.keeps_state and state_summary is not None:
            return [
                f"{len(omitted)} earlier steps are not shown; the state they left:\n"
                + state_summary
            ]
        return [self.describe_omitted(omitted)]

    def turn_action(
        self, step: int, action: ToolCall, conditions: list[str], view: str | None
    ) -> str:
        """The user message of one step: the action, and its state view (keeping state)."""
        text = self.action_message(step, action, conditions)
        return f"{text}\n{view}" if self.keeps_state and view else text

    def turn_answer(self, observation: str, state: StepState | None) -> str:
        """The assistant message of one step: the observation, after the step's blocks
        (keeping state)."""
        text = self.observation_message(observation)
        if not self.keeps_state or state is None:
            return text
        blocks = render_step(state, compact=True)
        return f"{blocks}\n{text}" if blocks else text

    def role_section(self, domain: DomainSpec) -> str:
        return domain.instructions.strip()

    def answer_section(self) -> str:
        return (
            "# How to answer\nEach user message is one action the agent took. Reply with "
            "exactly what the environment returns for it: the raw observation, no commentary, "
            "no explanation, no markdown fences. Stay consistent with every earlier observation."
        )

    def describe_tool(self, tool: ToolSpec) -> str:
        summary = (tool.description or tool.title or "").strip().splitlines()
        first = summary[0] if summary else ""
        params = ", ".join(sorted((tool.input_schema.get("properties") or {}).keys()))
        line = f"- {tool.name}({params}): {first[:300]}"
        if tool.simulation.guidance:
            line += f"\n  Observation format: {tool.simulation.guidance.strip()}"
        if tool.model_output_schema:
            line += "\n  Returns JSON shaped like: " + schema_outline(tool.model_output_schema)
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
        text += describe_client_exchanges(action)
        if conditions:
            text += "\nWorld conditions in effect now: " + "; ".join(conditions)
        return text

    def observation_message(self, observation: str) -> str:
        return observation

    def examples_section(self, examples: list[Demonstration]) -> str:
        """Retrieved real transitions (``--grounding``), shown above the current action."""
        blocks = [
            f"{e.tool} {compact_json(e.arguments)}\n{e.observation[:MAX_EXAMPLE_CHARS]}"
            for e in examples
        ]
        return "Real observations of similar actions (for reference):\n" + "\n---\n".join(blocks)

    def extract_observation(self, output: str) -> str:
        """The observation inside raw model output: thinking dropped, and the last
        ``<predicted_observation>`` block taken when the model wrote one."""
        return answer_text(output).strip("\n")


class AgentWorldProfile(PromptProfile):
    """The conversation shape Qwen-AgentWorld was trained and evaluated on (AgentWorldBench).

    - system: the domain's world-model prompt, headed ``# Role and Objective``, ending with
      output requirements that ask for reasoning first and the observation inside
      ``<predicted_observation>`` tags (the contract of the model's own domain prompts);
    - each past step: a user message ``### Turn k`` / ``**Action:**`` / a fenced JSON tool
      call, and an assistant message ``**Environment Observation:**`` + the observation;
    - the current step: a final user message of the same shape.

    Actions are always written as MCP tool calls (``{"name": ..., "arguments": ...}``), the
    shape of the model's MCP domain. Its Terminal domain writes actions as keystroke lists
    (``[{"keystrokes": "ls\\n", "duration": 0.1}]``) and expects a terminal screen back; our
    terminal tools are MCP tools whose observations are command output, so we keep the tool
    call shape there too rather than translate calls into keystrokes.
    """

    name: ClassVar[str] = "agentworld"
    OBSERVATION_MARKER = "**Environment Observation:**\n"

    def role_section(self, domain: DomainSpec) -> str:
        return "# Role and Objective\n\n" + domain.instructions.strip()

    def answer_section(self) -> str:
        return (
            "# Output Requirements\n\n"
            "Each user message gives one turn: the action the agent just took in this "
            "environment. Predict the observation the real environment returns for it, "
            "consistent with the world facts and every earlier turn. Think it through first; "
            f"then write the complete observation inside {OBSERVATION_OPEN}"
            f"{OBSERVATION_CLOSE} tags, exactly as the environment would show it, with no "
            "commentary inside the tags."
        )

    def action_message(self, step: int, action: ToolCall, conditions: list[str]) -> str:
        call = compact_json({"name": action.tool, "arguments": action.arguments})
        text = f"### Turn {step}\n**Action:**\n```json\n{call}\n```"
        text += describe_client_exchanges(action)
        if conditions:
            text += "\n**World conditions in effect:** " + "; ".join(conditions)
        return text

    def observation_message(self, observation: str) -> str:
        return self.OBSERVATION_MARKER + observation

    def extract_observation(self, output: str) -> str:
        text = super().extract_observation(output)
        marker = self.OBSERVATION_MARKER.strip()
        if text.startswith(marker):
            text = text[len(marker) :].lstrip("\n")
        return text


class SmallModelProfile(PromptProfile):
    """What a ~100M-parameter model can use, in a fraction of the tokens.

    The default terminal system prompt is ~1,600 tokens, mostly tool descriptions written for
    agents; a 135M model copies from them instead of using them. This profile keeps the first
    sentence of the domain's instructions, each tool's signature, the world facts and the
    demonstrations (which show the observation format), and writes actions as
    ``tool {json}``.
    The system message holds nothing per-call, so the KV-cache prefix stays fixed. Adapters
    trained on this profile record its name (``aw-mcp train``) and are served with it.
    """

    name: ClassVar[str] = "small"

    def system_message(
        self,
        domain: DomainSpec,
        tools: list[ToolSpec],
        world: WorldSpec,
        omitted: list[Turn],
        state_summary: str | None = None,
    ) -> str:
        parts = [self.role_section(domain)]
        parts.append("Tools: " + ", ".join(self.describe_tool(t) for t in tools))
        facts = self.describe_world(world)
        if facts:
            parts.append("World:\n" + facts)
        parts.append(self.answer_section())
        parts += self.omitted_sections(omitted, state_summary)
        return "\n\n".join(parts)

    def role_section(self, domain: DomainSpec) -> str:
        text = " ".join(domain.instructions.split())
        return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]

    def answer_section(self) -> str:
        return "Reply to each action with the raw observation only, like the examples."

    def describe_tool(self, tool: ToolSpec) -> str:
        """A signature: the name and the required parameters (the demonstrations show the
        observation format; a 135M model copies long descriptions instead of using them)."""
        schema = tool.input_schema
        params = [p for p in (schema.get("properties") or {}) if p in schema.get("required", [])]
        return f"{tool.name}({', '.join(params)})"

    def action_message(self, step: int, action: ToolCall, conditions: list[str]) -> str:
        text = f"{action.tool} {compact_json(action.arguments)}"
        text += describe_client_exchanges(action)
        if conditions:
            text += "\n(now: " + "; ".join(conditions) + ")"
        return text


class SmallStateProfile(SmallModelProfile):
    """``small``, keeping state: the state of what the action names stands under it, and the
    model writes what the action read and changed before the observation::

        cat notes.txt {...}            <- the action
        <state>                        <- its view: the episode's state, looked up
        cwd /home/dev/project
        file notes.txt
        1|buy tea
        </state>
        ---
        <recall>                       <- the model's answer: what it read,
        file notes.txt
        </recall>
        buy tea                        <- then the observation
        [exit code: 0]
    """

    name: ClassVar[str] = "small-state"
    keeps_state: ClassVar[bool] = True

    def answer_section(self) -> str:
        return (
            "Reply to each action with what it read (<recall>) and changed (<change>), "
            "then the raw observation, like the examples."
        )


ProfileName = Literal["default", "small", "small-state", "agentworld"]
PROFILES: dict[str, type[PromptProfile]] = {
    p.name: p for p in (PromptProfile, SmallModelProfile, SmallStateProfile, AgentWorldProfile)
}


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
    examples: list[Demonstration] | None = None,
    current_view: str | None = None,
    state_summary: str | None = None,
) -> list[ChatMessage]:
    """The full prompt for one call; ``omitted`` oldest turns are summarized, not shown.

    ``examples`` (retrieved real transitions) go into the current user turn only, so every
    message before it is the same as at the previous step (the KV cache stays valid).
    ``current_view``: the state shown next to the current call, and ``state_summary``: the
    state the omitted turns left (both for a profile that keeps state)."""
    # A call a protocol fault answered (a 502, a 429) never reached the environment and
    # changed nothing, so the world model does not see it at all: neither the fault's text
    # nor a placeholder in its place, either of which it would copy as an observation.
    summarized = [t for t in turns[:omitted] if t.reached_world] if summarize_omitted else []
    system = profile.system_message(domain, tools, world, summarized, state_summary)
    messages = [ChatMessage(role="system", content=system)]
    for step, demo in enumerate(domain.demonstrations, start=1):
        messages.append(ChatMessage(role="user", content=profile.action_message(step, demo, [])))
        messages.append(
            ChatMessage(role="assistant", content=profile.observation_message(demo.observation))
        )
    for turn in (t for t in turns[omitted:] if t.reached_world):
        messages.append(
            ChatMessage(
                role="user",
                content=profile.turn_action(turn.index, turn.action, turn.conditions, turn.view),
            )
        )
        messages.append(
            ChatMessage(role="assistant", content=profile.turn_answer(turn.observation, turn.state))
        )
    action = profile.turn_action(current_step, current, current_conditions, current_view)
    if examples:
        action = profile.examples_section(examples) + "\n\n" + action
    messages.append(ChatMessage(role="user", content=action))
    return messages
