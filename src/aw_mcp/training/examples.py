"""Recorded episodes -> token sequences, rendered exactly as the server renders a call.

A call at serving time is the prompt ``build_messages`` makes for that step, rendered with the
model's chat template and tokenized by llama.cpp (``LlamaCppEngine``). Because the layout is
append-only, step k+1's prompt starts with step k's prompt followed by step k's observation,
so a whole episode is ONE sequence: the prompt of a step after the last one, cut after the last
observation. The loss covers what the model writes at serving time: each observation and the
end-of-turn marker that stops generation (``<|im_end|>`` for a chat template); system prompt,
demonstrations and actions are context only.

Tokens come from llama.cpp's own tokenizer of the GGUF being trained, segment by segment at
the boundaries where serving starts generating, so the targets are the tokens the served model
must produce after the tokens it is actually given.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aw_mcp.domain.catalogue import Catalogue
from aw_mcp.domain.models import DomainSpec, ToolCall, WorldSpec
from aw_mcp.engines.chat_format import ChatRenderer
from aw_mcp.episode.prompt import PromptProfile, build_messages
from aw_mcp.episode.views import with_views
from aw_mcp.errors import UserInputError
from aw_mcp.records.calls import Turn
from aw_mcp.records.reader import RecordedEpisode

log = logging.getLogger(__name__)

# Keeping state: a long episode is also trained from every WINDOW_STEPS-th step on, its
# earlier steps told as the state they left.
WINDOW_STEPS = 10


class RenderError(UserInputError):
    """An episode cannot be rendered into a training sequence (template or data problem)."""


@dataclass
class ServingFormat:
    """How the llama.cpp engine turns messages into tokens for one GGUF model."""

    renderer: ChatRenderer
    tokenize_text: Callable[[str, bool], list[int]]  # (text, at the start of the prompt)
    model_path: Path

    @classmethod
    def from_gguf(cls, path: Path) -> ServingFormat:
        """The template and tokenizer of a GGUF file (vocabulary only: nothing else loaded)."""
        import llama_cpp

        from aw_mcp.engines.llama_cpp import chat_renderer

        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        renderer = chat_renderer(llm)

        def tokenize(text: str, at_start: bool) -> list[int]:
            add_bos = (
                at_start
                and llm._model.add_bos_token()
                and not (renderer.bos_token and text.startswith(renderer.bos_token))
            )
            return llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

        return cls(renderer=renderer, tokenize_text=tokenize, model_path=path)


@dataclass
class TrainingExample:
    """One episode as one sequence; ``targets[i]`` says whether token i is trained on."""

    episode: str
    input_ids: list[int]
    targets: list[bool]
    steps: int  # observations included (an episode too long is cut after a whole step)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def target_count(self) -> int:
        return sum(self.targets)


@dataclass
class DomainContext:
    """What the server would know about the episode's domain: its spec and merged world."""

    domain: DomainSpec
    world: WorldSpec

    @classmethod
    def of(cls, domain: DomainSpec, extra_world: WorldSpec | None) -> DomainContext:
        served = next(iter(Catalogue([domain], extra_world=extra_world)))
        return cls(domain=domain, world=served.world)


@dataclass
class RenderedEpisode:
    """An episode's text, cut into context / target segments."""

    segments: list[tuple[str, bool]] = field(default_factory=list)  # (text, trained)

    @property
    def text(self) -> str:
        return "".join(text for text, _ in self.segments)


def render_episode(
    turns: list[Turn],
    context: DomainContext,
    profile: PromptProfile,
    renderer: ChatRenderer,
    omitted: int = 0,
    state_summary: str | None = None,
) -> RenderedEpisode:
    """Segments of one episode: the prompt of each step, then its answer as a target (the
    observation; keeping state, the step's blocks before it). ``omitted``: the oldest turns
    are cut from the prompt, told as ``state_summary`` (a window of a long episode)."""
    if len(turns) <= omitted:
        raise RenderError("the episode has no call that reached the world")

    def prompt(k: int, current: ToolCall) -> str:
        messages = build_messages(
            profile,
            context.domain,
            context.domain.tools,
            context.world,
            turns[:k],
            omitted,
            current,
            turns[k].index if k < len(turns) else turns[-1].index + 1,
            turns[k].conditions if k < len(turns) else [],
            current_view=turns[k].view if k < len(turns) else None,
            state_summary=state_summary,
        )
        return renderer.render(messages)

    # The prompt of one more step holds every observation, each followed by the template's
    # glue; the per-step prompts say where each observation starts.
    full = prompt(len(turns), turns[-1].action)
    rendered = RenderedEpisode()
    position = 0
    for k, turn in enumerate(turns):
        if k < omitted:
            continue
        start = len(prompt(k, turn.action))
        observation = profile.turn_answer(turn.observation, turn.state)
        if full[start : start + len(observation)] != observation or start < position:
            raise RenderError(
                f"step {turn.index}: the rendered prompt does not continue the previous one "
                "(the chat template is not append-only)"
            )
        end = _end_of_turn(full, start + len(observation), renderer.stop_strings)
        rendered.segments.append((full[position:start], False))
        rendered.segments.append((full[start:end], True))
        position = end
    return rendered


def _end_of_turn(text: str, after: int, stops: list[str]) -> int:
    """Where the stop string that ends an observation ends (generation stops on it)."""
    for stop in stops:
        found = text.find(stop, after, after + len(stop) + 2)
        if found >= 0:
            return found + len(stop)
    raise RenderError(f"no end-of-turn marker ({stops}) after an observation")


def tokenize_episode(
    episode: str, rendered: RenderedEpisode, fmt: ServingFormat, max_tokens: int
) -> TrainingExample | None:
    """Token ids and target mask; cut after the last whole step that fits ``max_tokens``."""
    ids: list[int] = []
    targets: list[bool] = []
    kept, steps = 0, 0
    for i, (text, trained) in enumerate(rendered.segments):
        piece = fmt.tokenize_text(text, i == 0)
        if len(ids) + len(piece) > max_tokens:
            break
        ids += piece
        targets += [trained] * len(piece)
        if trained:
            kept, steps = len(ids), steps + 1
    if steps == 0:
        return None
    return TrainingExample(episode, ids[:kept], targets[:kept], steps)


def build_examples(
    episodes: list[RecordedEpisode],
    contexts: dict[str, DomainContext],
    profile: PromptProfile,
    fmt: ServingFormat,
    max_tokens: int,
    worlds: dict[str, WorldSpec] | None = None,
    window: int = WINDOW_STEPS,
) -> list[TrainingExample]:
    """Every episode whose domain is known, rendered and tokenized; the rest are reported.
    ``worlds``: the world an episode ran in, by episode id, layered on its domain's (as a
    client's ``_meta`` world is when it is served). Keeping state, an episode longer than
    ``window`` steps is also trained from every ``window``-th step on, its earlier steps
    told as the state they left (as the server cuts history that no longer fits)."""
    examples: list[TrainingExample] = []
    skipped: Counter[str] = Counter()
    worlds = worlds or {}
    for episode in episodes:
        context = contexts.get(episode.domain)
        if context is None:
            skipped[f"domain {episode.domain!r} not given"] += 1
            continue
        if (own := worlds.get(episode.episode)) is not None:
            context = DomainContext(domain=context.domain, world=context.world.merged(own))
        turns = episode.turns()
        starts: list[tuple[int, str | None]] = [(0, None)]
        if profile.keeps_state:
            turns, summaries = with_views(turns, context.world)
            if summaries:
                starts += [(k, summaries[k - 1]) for k in range(window, len(turns), window)]
        for omitted, summary in starts:
            rendered = render_episode(turns, context, profile, fmt.renderer, omitted, summary)
            name = episode.episode if not omitted else f"{episode.episode}@{omitted}"
            example = tokenize_episode(name, rendered, fmt, max_tokens)
            if example is None:
                skipped["first step longer than the longest sequence allowed"] += 1
                continue
            examples.append(example)
    for why, count in skipped.items():
        log.warning("skipped %d episode(s): %s", count, why)
    return examples


def split_validation(
    examples: list[TrainingExample], fraction: float, seed: int
) -> tuple[list[TrainingExample], list[TrainingExample]]:
    """(train, validation): whole episodes held back at random, at least one when asked for."""
    if fraction <= 0 or len(examples) < 2:
        return examples, []
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n_val = max(1, round(len(examples) * fraction))
    held = set(order[:n_val])
    train = [e for i, e in enumerate(examples) if i not in held]
    return train, [e for i, e in enumerate(examples) if i in held]


def shared_prefix_length(examples: list[TrainingExample]) -> int:
    """Tokens every example starts with and none is trained on (system + demonstrations)."""
    if not examples:
        return 0
    first = examples[0]
    n = len(first)
    for example in examples[1:]:
        n = min(n, len(example))
        for i in range(n):
            if example.input_ids[i] != first.input_ids[i]:
                n = i
                break
    for example in examples:
        if True in example.targets[: n + 1]:
            # The token before a target must be in the suffix: it predicts the target.
            n = min(n, example.targets.index(True) - 1)
    return max(n, 0)
