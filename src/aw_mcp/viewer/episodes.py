"""What the HTML report shows of an episode: its steps, charts and real counterpart.

Built from ``CallRecord`` lists (a record directory read by ``load_record_dir``, or a live
server's episodes), so the same templates serve ``aw-mcp view`` and ``serve --ui``. A step that
keeps state (``CallRecord.state``, ``view``) also shows the view the model was given, its recall
and change blocks (``aw_mcp.state.text``) and their problems; beside its real counterpart, the
state verdict of each step (``aw_mcp.state.compare``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from aw_mcp.records.calls import CallRecord
from aw_mcp.records.reader import RecordedEpisode
from aw_mcp.state.compare import StateMatch, compare
from aw_mcp.state.steps import StepState
from aw_mcp.state.text import render_change, render_recall

# Episode ids of ``aw-mcp eval --closed-loop`` runs: "closed-loop/<id of the real episode>".
COUNTERPART_PREFIXES = ("closed-loop/",)

CHART_WIDTH = 600
BAR_AREA_HEIGHT = 60
MAX_BAR_WIDTH = 40  # a two-step episode gets two bars, not two walls


@dataclass
class StateView:
    """A step's state as the page shows it: the view the model was given next to the call, the
    recall and change blocks in their text form ('' for none), and what of the model's blocks
    could not be read or applied."""

    step: StepState | None
    view: str | None
    recall: str
    change: str
    problems: list[str]

    @property
    def cwd(self) -> str | None:
        return self.step.cwd if self.step is not None else None


def state_view(record: CallRecord) -> StateView | None:
    """None for a record that keeps no state (older records, profiles that keep none)."""
    step = record.state
    if step is None and record.view is None:
        return None
    return StateView(
        step=step,
        view=record.view,
        recall=render_recall(step.recall, step.cwd) if step is not None else "",
        change=render_change(step.change, step.cwd) if step is not None else "",
        problems=list(step.problems) if step is not None else [],
    )


@dataclass
class StepView:
    index: int
    tool: str
    arguments: str  # pretty JSON
    observation: str
    source: str
    is_error: bool
    faults: list[str]
    conditions: list[str]
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    offset: float  # seconds since the episode's first call started
    state: StateView | None = None


@dataclass
class Bar:
    x: float
    width: float
    height: float
    label: str


@dataclass
class Chart:
    """One row of bars, one per step, scaled to the largest value (inline SVG in the page)."""

    title: str
    bars: list[Bar]
    peak: str


@dataclass
class StepPair:
    index: int
    simulated: StepView | None
    real: StepView | None

    @property
    def same_action(self) -> bool:
        return (
            self.simulated is not None
            and self.real is not None
            and (self.simulated.tool, self.simulated.arguments)
            == (self.real.tool, self.real.arguments)
        )

    @property
    def same_observation(self) -> bool:
        return (
            self.simulated is not None
            and self.real is not None
            and self.simulated.observation == self.real.observation
        )

    @property
    def state_match(self) -> StateMatch | None:
        """The simulated step's recall and change against the real step's, where both calls
        were made and the real one has a state; a simulated step that keeps none said nothing."""
        if self.simulated is None or self.real is None or self.real.state is None:
            return None
        if self.real.state.step is None:
            return None
        said = self.simulated.state.step if self.simulated.state is not None else None
        return compare(self.real.state.step, said)


@dataclass
class EpisodeView:
    anchor: str  # unique id in the page
    episode: str
    domain: str
    path: str
    steps: list[StepView]
    charts: list[Chart] = field(default_factory=list)
    fault_steps: list[Bar] = field(default_factory=list)  # a mark on each step a fault fired
    counterpart: list[StepPair] | None = None
    counterpart_path: str | None = None

    @property
    def is_real(self) -> bool:
        return bool(self.steps) and all(s.source == "real" for s in self.steps)

    @property
    def errors(self) -> int:
        return sum(s.is_error for s in self.steps)

    @property
    def faults(self) -> int:
        return sum(bool(s.faults) for s in self.steps)

    @property
    def state_verdicts(self) -> list[StateMatch]:
        """The state verdict of each step paired with a real step that has a state."""
        pairs = self.counterpart or []
        return [m for m in (p.state_match for p in pairs) if m is not None]


def step_view(record: CallRecord, first_started: float) -> StepView:
    stats = record.stats
    return StepView(
        index=record.index,
        tool=record.tool,
        arguments=json.dumps(record.arguments, indent=2, ensure_ascii=False, sort_keys=True),
        observation=record.observation,
        source=record.source,
        is_error=record.is_error,
        faults=[fault_label(f) for f in record.faults],
        conditions=list(record.conditions),
        prompt_tokens=stats.prompt_tokens if stats else None,
        completion_tokens=stats.completion_tokens if stats else None,
        seconds=record.seconds,
        offset=round(record.started_at - first_started, 3),
        state=state_view(record),
    )


def fault_label(fault: dict) -> str:
    """``scenario/rule: effect``, from a record's ``faults`` entry."""
    where = "/".join(str(fault[k]) for k in ("scenario", "rule") if fault.get(k))
    effect = fault.get("effect")
    return f"{where}: {effect}" if effect else where or json.dumps(fault, sort_keys=True)


def bar_chart(title: str, values: list[float], unit: str) -> Chart:
    peak = max(values, default=0.0)
    slot = CHART_WIDTH / max(len(values), 1)
    width = min(slot * 0.8, MAX_BAR_WIDTH)
    bars = [
        Bar(
            x=round(i * slot + (slot - width) / 2, 2),
            width=round(width, 2),
            height=round(BAR_AREA_HEIGHT * v / peak, 2) if peak > 0 else 0.0,
            label=f"step {i + 1}: {v:g} {unit}",
        )
        for i, v in enumerate(values)
    ]
    return Chart(title=title, bars=bars, peak=f"{peak:g} {unit}")


def fault_marks(steps: list[StepView]) -> list[Bar]:
    slot = CHART_WIDTH / max(len(steps), 1)
    return [
        Bar(
            x=round(i * slot + slot / 2, 2),
            width=0,
            height=0,
            label=f"step {s.index}: {'; '.join(s.faults)}",
        )
        for i, s in enumerate(steps)
        if s.faults
    ]


def anchor_for(episode: str, domain: str, taken: set[str]) -> str:
    base = "ep-" + (re.sub(r"[^A-Za-z0-9_-]", "-", f"{episode}-{domain}")[:80] or "episode")
    anchor, n = base, 1
    while anchor in taken:
        n += 1
        anchor = f"{base}-{n}"
    taken.add(anchor)
    return anchor


def episode_view(
    episode: str, domain: str, records: list[CallRecord], path: str, taken: set[str]
) -> EpisodeView:
    first = min((r.started_at for r in records), default=0.0)
    steps = [step_view(r, first) for r in records]
    view = EpisodeView(anchor_for(episode, domain, taken), episode, domain, path, steps)
    view.charts = [
        bar_chart("latency", [s.seconds for s in steps], "s"),
        bar_chart(
            "tokens (prompt + completion)",
            [float((s.prompt_tokens or 0) + (s.completion_tokens or 0)) for s in steps],
            "tokens",
        ),
    ]
    view.fault_steps = fault_marks(steps)
    return view


def counterpart_key(episode: str, domain: str) -> tuple[str, str]:
    for prefix in COUNTERPART_PREFIXES:
        if episode.startswith(prefix):
            return episode[len(prefix) :], domain
    return episode, domain


def pair_steps(simulated: list[StepView], real: list[StepView]) -> list[StepPair]:
    """Steps side by side by call index."""
    sim = {s.index: s for s in simulated}
    rec = {s.index: s for s in real}
    return [StepPair(i, sim.get(i), rec.get(i)) for i in sorted(sim.keys() | rec.keys())]


def episode_views(
    episodes: Iterable[RecordedEpisode], real: Iterable[RecordedEpisode] = ()
) -> list[EpisodeView]:
    """Views of ``episodes``; each simulated one gets a side-by-side view with the real episode
    of the same id (after dropping a closed-loop prefix) and domain, from ``episodes`` or
    ``real``."""
    taken: set[str] = set()
    views = [
        episode_view(e.episode, e.domain, e.records, str(e.path or ""), taken) for e in episodes
    ]
    real_views = [
        episode_view(e.episode, e.domain, e.records, str(e.path or ""), set()) for e in real
    ]
    reality = {(v.episode, v.domain): v for v in [*views, *real_views] if v.is_real}
    for view in views:
        if view.is_real:
            continue
        match = reality.get(counterpart_key(view.episode, view.domain))
        if match is not None:
            view.counterpart = pair_steps(view.steps, match.steps)
            view.counterpart_path = match.path
    return views
