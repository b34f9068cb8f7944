"""Score predictions: per domain and per command family, the model beside two baselines.

Baselines, computed on the same samples:
- ``empty``: answer every call with nothing; where the real observation ends with an exit-code
  line (terminal commands), with ``[exit code: 0]``: a command that printed nothing and
  succeeded, so the baseline is not beaten by the exit-code line alone;
- ``previous``: repeat the previous real observation of the same episode (empty at turn 1).
A world model worth running beats both. Metrics are those of ``metrics.py``; the optional
judge adds its five dimensions (``judge.py``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aw_mcp.evaluation.judge import DIMENSIONS, Verdict, normalized
from aw_mcp.evaluation.metrics import SampleMetrics, exit_code, measure
from aw_mcp.evaluation.samples import BenchSample
from aw_mcp.evaluation.state_accuracy import StateTally, steps_of

SYSTEMS = ("model", "empty", "previous")
ALL = "(all)"
READ_BACK = ("reads back what the session changed", "every other step")
_READ_BACK = {True: READ_BACK[0], False: READ_BACK[1]}
METRICS_NOTE = (
    "exact: identical but for trailing spaces and blank end lines; similarity: difflib "
    "SequenceMatcher ratio (defaults) on whitespace-normalized text; exit code: agreement of "
    "the last line '[exit code: N]' where the reference has one; JSON: the prediction parses "
    "(valid) and has the reference's top-level shape (shape), where the reference is JSON; "
    "page state: a page URL and a snapshot parsing as a YAML list with unique [ref=...] refs, "
    "where the reference has a snapshot; refs usable: the refs the next action takes from the "
    "real snapshot are in this one; targets shown: the elements those refs name there (role and "
    'name, e.g. link "Home") are in this one, under any ref; masked: exact and similarity '
    "with the values no simulator can know (Playwright's output file times, clock readings) "
    "masked in both texts, where the reference has one. "
    "Baselines: empty = answer nothing ('[exit code: 0]' where the reference has an exit-code "
    "line); previous = the previous real observation of the same episode (empty at turn 1)."
)


EMPTY_COMMAND_OUTPUT = "[exit code: 0]"


def system_outputs(sample: BenchSample) -> dict[str, str]:
    """What the model and each baseline answered for this sample."""
    empty = EMPTY_COMMAND_OUTPUT if exit_code(sample.reference()) is not None else ""
    return {"model": sample.prediction(), "empty": empty, "previous": sample.previous_reference()}


# Metrics that apply to some samples only: summary key -> (SampleMetrics attribute, key of the
# count of samples it applies to); the summary is their mean there (a yes/no metric's share).
# JSON shape applies wherever JSON validity does.
RATES: dict[str, tuple[str, str]] = {
    "exit_code": ("exit_code_agrees", "exit_code_n"),
    "json_valid": ("json_valid", "json_n"),
    "json_shape": ("json_shape", "json_n"),
    "page_state": ("page_state", "page_state_n"),
    "refs_usable": ("refs_usable", "refs_usable_n"),
    "targets_shown": ("targets_shown", "targets_shown_n"),
    "exact_masked": ("exact_masked", "volatile_n"),
    "similarity_masked": ("similarity_masked", "volatile_n"),
}


@dataclass
class Rate:
    """How many samples a metric applied to, and its sum over them (for a yes/no metric: on
    how many it held)."""

    n: int = 0
    total: float = 0.0


@dataclass
class Tally:
    """Running totals of one system's metrics over a group of samples."""

    n: int = 0
    exact: int = 0
    similarity: float = 0.0
    rates: dict[str, Rate] = field(default_factory=lambda: {key: Rate() for key in RATES})
    judged: list[Verdict] = field(default_factory=list)
    judge_failed: int = 0

    def add(self, m: SampleMetrics) -> None:
        self.n += 1
        self.exact += m.exact
        self.similarity += m.similarity
        for key, (attribute, _) in RATES.items():
            if (value := getattr(m, attribute)) is not None:
                self.rates[key].n += 1
                self.rates[key].total += value

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "exact": _ratio(self.exact, self.n),
            "similarity": _ratio(self.similarity, self.n),
        }
        for key, (_, n_key) in RATES.items():
            out[key] = _ratio(self.rates[key].total, self.rates[key].n)
            out[n_key] = self.rates[key].n
        if self.judged or self.judge_failed:
            out["judge"] = {
                "n": len(self.judged),
                "failed": self.judge_failed,
                "total": _judged_mean([v.total for v in self.judged]),
                **{d: _judged_mean([v.scores[d] for v in self.judged]) for d in DIMENSIONS},
            }
        return out


def _ratio(part: float, whole: int) -> float | None:
    return part / whole if whole else None


def _judged_mean(values: list[float]) -> float | None:
    rated = [v for v in values if v]  # 0 = not applicable, left out as the reference does
    return normalized(sum(rated) / len(rated)) if rated else None


@dataclass
class Group:
    n: int = 0
    errors: int = 0  # samples whose generation failed (scored as an empty answer)
    systems: dict[str, Tally] = field(default_factory=lambda: {s: Tally() for s in SYSTEMS})

    def summary(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "errors": self.errors,
            **{s: t.summary() for s, t in self.systems.items()},
        }


Verdicts = dict[str, dict[str, Verdict | None]]  # system -> sample key -> verdict


# -- world faults: does an observation made under a condition show it? ----------------------

QUOTED = re.compile(r'"([^"]+)"')


def condition_messages(conditions: list[str]) -> list[str]:
    """The messages a world condition says calls will show: its double-quoted phrases
    ('Every write fails with "No space left on device"')."""
    return [m for text in conditions for m in QUOTED.findall(text)]


@dataclass
class ConditionTally:
    """Calls made under a world condition that quotes the message it causes."""

    real_shows: int = 0  # the real observation shows a quoted message
    caught: int = 0  # ... and this system's does too
    real_silent: int = 0  # the real observation does not (a read, say)
    false_alarms: int = 0  # ... but this system's does

    def add(self, output: str, reference: str, messages: list[str]) -> None:
        shows = any(m in output for m in messages)
        if any(m in reference for m in messages):
            self.real_shows += 1
            self.caught += shows
        else:
            self.real_silent += 1
            self.false_alarms += shows

    def summary(self) -> dict[str, Any]:
        return {
            "real_shows": self.real_shows,
            "shown": _ratio(self.caught, self.real_shows),
            "real_silent": self.real_silent,
            "false_alarm": _ratio(self.false_alarms, self.real_silent),
        }


def score(samples: Iterable[BenchSample], verdicts: Verdicts | None = None) -> dict[str, Any]:
    """The report: ``{"note", "overall", "domains": {domain: {"all", "families"}}}``."""
    verdicts = verdicts or {}
    overall = Group()
    domains: dict[str, dict[str, Group]] = defaultdict(lambda: defaultdict(Group))
    under_condition = {s: ConditionTally() for s in SYSTEMS}
    state: dict[str, StateTally] = defaultdict(StateTally)  # domain -> tally (the model's)
    # domain -> READS_BACK / OTHER_STEPS -> group: answers that depend on what the session
    # changed, apart from the rest (closed-loop rows over records with a real state)
    read_back: dict[str, dict[str, Group]] = defaultdict(lambda: defaultdict(Group))
    for sample in samples:
        if (steps := steps_of(sample.extra)) is not None:
            for key in (sample.domain, ALL):
                state[key].add(*steps)
        reference = sample.reference()
        conditions = sample.extra.get("conditions")
        messages = condition_messages(conditions) if isinstance(conditions, list) else []
        later = sample.prompt[sample.turn_idx :]
        next_action = later[0] if later else None
        groups = [overall, domains[sample.domain][ALL], domains[sample.domain][sample.family()]]
        if isinstance(flag := sample.extra.get("reads_back"), bool):
            groups += [read_back[sample.domain][ALL], read_back[sample.domain][_READ_BACK[flag]]]
        for group in groups:
            group.n += 1
            group.errors += bool(sample.extra.get("error"))
        for system, output in system_outputs(sample).items():
            if messages:
                under_condition[system].add(output, reference, messages)
            metrics = measure(output, reference, next_action)
            judged = verdicts.get(system, {})
            for group in groups:
                tally = group.systems[system]
                tally.add(metrics)
                if sample.key in judged:
                    if (verdict := judged[sample.key]) is None:
                        tally.judge_failed += 1
                    else:
                        tally.judged.append(verdict)
    report: dict[str, Any] = {
        "note": METRICS_NOTE,
        "overall": overall.summary(),
        "domains": {
            domain: {
                "all": families.pop(ALL).summary(),
                "families": {
                    name: g.summary()
                    for name, g in sorted(families.items(), key=lambda kv: (-kv[1].n, kv[0]))
                },
            }
            for domain, families in sorted(domains.items())
        },
    }
    if any(t.real_shows or t.real_silent for t in under_condition.values()):
        report["world_conditions"] = {s: t.summary() for s, t in under_condition.items()}
    if state:
        report["state"] = {key: tally.summary() for key, tally in sorted(state.items())}
    if read_back:
        report["read_back"] = {
            domain: {
                "all": parts.pop(ALL).summary(),
                "families": {name: parts[name].summary() for name in READ_BACK if name in parts},
            }
            for domain, parts in sorted(read_back.items())
        }
    return report


# -- text table ----------------------------------------------------------------------------

_COLUMNS: list[tuple[str, str, str]] = [  # (header, summary key, format)
    ("exact %", "exact", "pct"),
    ("similarity", "similarity", "ratio"),
    ("exit code %", "exit_code", "pct"),
    ("JSON valid %", "json_valid", "pct"),
    ("JSON shape %", "json_shape", "pct"),
    ("page state %", "page_state", "pct"),
    ("refs usable %", "refs_usable", "pct"),
    ("targets shown %", "targets_shown", "pct"),
    ("exact, volatile masked %", "exact_masked", "pct"),
    ("similarity, volatile masked", "similarity_masked", "ratio"),
]


def _cell(value: float | None, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{value * 100:.1f}"
    return f"{value:.1f}" if kind == "score" else f"{value:.3f}"


def _table(title: str, body: dict[str, Any]) -> list[str]:
    """A domain's table: a row per family, model / empty / previous per metric."""
    rows = [(ALL, body["all"]), *body["families"].items()]
    columns = [c for c in _COLUMNS if any(r["model"][c[1]] is not None for _, r in rows)]
    judged = any("judge" in r["model"] for _, r in rows)
    header = ["family", "n"] + [f"{h} (model/empty/prev)" for h, _, _ in columns]
    if judged:
        header.append("judge 0-100 (model/empty/prev)")
    lines = [f"### {title} ({body['all']['n']} samples, {body['all']['errors']} errors)"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for name, row in rows:
        cells = [name, str(row["n"])]
        for _, key, kind in columns:
            cells.append(" / ".join(_cell(row[s][key], kind) for s in SYSTEMS))
        if judged:
            cells.append(
                " / ".join(_cell(row[s].get("judge", {}).get("total"), "score") for s in SYSTEMS)
            )
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def render(report: dict[str, Any]) -> str:
    """Markdown tables, one per domain: a row per family, model / empty / previous per metric."""
    lines = [report["note"], ""]
    sections = list(report["domains"].items())
    if len(sections) > 1:
        sections.append(("all domains", {"all": report["overall"], "families": {}}))
    for domain, body in sections:
        lines += _table(domain, body)
    for domain, body in report.get("read_back", {}).items():
        lines += _table(f"{domain}, by whether a step reads back what the session changed", body)
    if conditions := report.get("world_conditions"):
        model = conditions["model"]
        lines += [
            "### calls under a world condition (a fault scenario's `world` effect)",
            'The condition\'s quoted messages (e.g. "No space left on device"): shown = share of '
            f"the {model['real_shows']} calls whose real observation shows one where this one "
            f"does too; false alarm = share of the {model['real_silent']} calls whose real "
            "observation shows none where this one does.",
            "| system | shown % | false alarm % |",
            "|---|---|---|",
            *(
                f"| {s} | {_cell(c['shown'], 'pct')} | {_cell(c['false_alarm'], 'pct')} |"
                for s, c in conditions.items()
            ),
            "",
        ]
    if state := report.get("state"):
        lines += [
            "### state accuracy (the model's recall and change against the sandbox's)",
            "Per step with a real state: recall = the same paths read, each as the same kind; "
            "change = the same ops, whole, in any order; step = both. A model that keeps no "
            "state counts as saying nothing.",
            "| world | steps | step % | recall % | change % | changing steps | change % there |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {key} | {t['n']} | {_cell(t['step'], 'pct')} | {_cell(t['recall'], 'pct')} "
                f"| {_cell(t['change'], 'pct')} | {t['changing_n']} "
                f"| {_cell(t['change_on_changing'], 'pct')} |"
                for key, t in state.items()
            ),
            "",
        ]
    return "\n".join(lines)
