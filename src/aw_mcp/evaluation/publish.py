"""Fidelity results as data files, and the tables of docs/fidelity.md and README.md made from them.

A results file (``lab/results/*.yaml``, or ``.json``) holds one group of rows measured on one
held-out set: the set (title, data folders, episodes, calls), where the numbers come from, when
they were measured, and one row per system (the model measured, or a baseline) with its
metrics. ``aw-mcp eval score --save-result FILE`` writes one from real predictions (or adds its
system to one); ``aw-mcp eval publish`` renders every file into the tables between markers:

- docs/fidelity.md, ``<!-- fidelity-tables:start -->``: every group, every row;
- README.md, ``<!-- fidelity:start -->``: one line per group marked ``readme: true``, the
  shipped default beside the two baselines (print nothing, repeat the previous observation).

Rates and similarities are fractions from 0 to 1 (49.7% is 0.497); a count that matters is a
share (``{n: 7, of: 17}``). Groups are rendered in file-name order.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from aw_mcp.files.yaml import DataFileError, parse_yaml_text, read_data_file

RESULTS_DIR = Path("lab/results")
DOC = Path("docs/fidelity.md")
README = Path("README.md")
DOC_MARKERS = ("<!-- fidelity-tables:start -->", "<!-- fidelity-tables:end -->")
README_MARKERS = ("<!-- fidelity:start -->", "<!-- fidelity:end -->")
RESULT_SUFFIXES = (".yaml", ".yml", ".json")


# -- the format -----------------------------------------------------------------------------


def _fraction(value: float) -> float:
    if not 0 <= value <= 1:
        raise ValueError(f"{value} is not a fraction from 0 to 1 (write 49.7% as 0.497)")
    return value


Fraction = Annotated[float, AfterValidator(_fraction)]


class Share(BaseModel):
    """``n`` of ``of`` calls (or answers, snapshots): rendered with its percentage."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(ge=0)
    of: int = Field(ge=1)

    @model_validator(mode="after")
    def _n_within(self) -> Share:
        if self.n > self.of:
            raise ValueError(f"n ({self.n}) is more than of ({self.of})")
        return self

    @property
    def fraction(self) -> float:
        return self.n / self.of


def _measure_kind(value: Any) -> str:
    if isinstance(value, dict | Share):
        return "share"
    if isinstance(value, list | tuple):
        return "parts"
    return "number"


# One value of a metric: a fraction, a share, or one value per part of a set with parts.
Measure = Annotated[
    Annotated[Fraction, Tag("number")]
    | Annotated[Share, Tag("share")]
    | Annotated[list[Fraction | None], Tag("parts")],
    Discriminator(_measure_kind),
]


class Metrics(BaseModel):
    """What was measured; a metric left out was not measured (or does not apply)."""

    model_config = ConfigDict(extra="forbid")

    similarity: Measure | None = None  # difflib ratio on whitespace-normalized text
    exact: Measure | None = None  # identical but for trailing spaces and blank end lines
    exit_code: Measure | None = None  # the last line's exit code agrees, where real has one
    shown: Measure | None = None  # the condition's message, where the real answer shows it
    false_alarm: Measure | None = None  # ... where the real answer does not
    page_state: Measure | None = None  # well-formed page states (web snapshots)
    refs_usable: Measure | None = None  # the next action's real ref is in the snapshot
    targets_shown: Measure | None = None  # the element that ref names is in it
    right: Share | None = None  # a session's answers right, output and exit code alike

    def measured(self) -> dict[str, Any]:
        return {name: value for name, value in self if value is not None}


# (field, column header in docs/fidelity.md, label in README's cells; "" = the bare value)
COLUMNS: list[tuple[str, str, str]] = [
    ("similarity", "similarity", ""),
    ("exact", "exact", "exact"),
    ("exit_code", "exit code right", "exit code"),
    ("shown", "shows it on", "shown"),
    ("false_alarm", "false alarm", "false alarm"),
    ("page_state", "page state", "page state"),
    ("refs_usable", "refs usable", "refs usable"),
    ("targets_shown", "targets shown", "targets shown"),
    ("right", "answers right", "right"),
]

Calls = int | list[int]


class HeldOutSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1)
    data: list[str] = Field(default_factory=list)  # folders of real episodes ([]: built in)
    episodes: Calls | None = None
    calls: Calls
    parts: list[str] = Field(default_factory=list)  # a set of several: values are lists


class Row(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system: str = Field(min_length=1)  # what answered: a plain label, or a run's
    run: str | None = None  # the lab run it is (lab/README.md), where it is one
    shipped: bool = False  # what plain `aw-mcp serve` answers this set with today
    baseline: Literal["empty", "previous"] | None = None
    calls: Calls | None = None  # where this row was measured on other calls than the set's
    metrics: Metrics
    note: str = ""

    @model_validator(mode="after")
    def _shipped_is_no_baseline(self) -> Row:
        if self.shipped and self.baseline:
            raise ValueError("a baseline is not shipped: set shipped or baseline, not both")
        return self


class ResultFile(BaseModel):
    """One group of rows measured on one held-out set."""

    model_config = ConfigDict(extra="forbid")

    held_out: HeldOutSet
    date: datetime.date | None = None  # when measured (None: the source does not say)
    source: str = Field(min_length=1)  # where the numbers come from
    notes: str = ""
    readme: bool = False  # a line of README's short table
    rows: list[Row] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> ResultFile:
        parts = len(self.held_out.parts)
        for i, row in enumerate(self.rows):
            for name, value in row.metrics.measured().items():
                if isinstance(value, list) and len(value) != parts:
                    raise ValueError(
                        f"rows[{i}].metrics.{name}: {len(value)} values for "
                        f"{parts} parts of held_out.parts"
                    )
        if self.readme and sum(row.shipped for row in self.rows) != 1:
            raise ValueError("readme: true needs exactly one shipped row (the default)")
        return self


def load_result(path: Path) -> ResultFile:
    """A results file; DataFileError naming the file, the line and the field if it is bad."""
    return parse_yaml_text(read_data_file(path), ResultFile, path)


def result_paths(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise FileNotFoundError(f"no results folder at {directory}")
    return sorted(p for p in directory.iterdir() if p.suffix in RESULT_SUFFIXES)


def load_results(directory: Path) -> list[ResultFile]:
    """Every results file of ``directory``, in file-name order."""
    return [load_result(path) for path in result_paths(directory)]


def dump_result(result: ResultFile, path: Path) -> None:
    """Write as YAML, or JSON for a ``.json`` path; fields at their defaults left out."""
    data = result.model_dump(mode="json", exclude_defaults=True)
    data["held_out"] = result.held_out.model_dump(mode="json", exclude_defaults=True)
    if path.suffix == ".json":
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    else:
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# -- from a score report --------------------------------------------------------------------

BASELINE_LABELS: dict[Literal["empty", "previous"], str] = {
    "empty": "baseline: print nothing",
    "previous": "baseline: repeat the previous real observation",
}


def _share(rate: float | None, n: int) -> Share | None:
    return Share(n=round(rate * n), of=n) if rate is not None and n else None


def metrics_of(report: dict[str, Any], system: str) -> Metrics:
    """One system's overall metrics in a report of ``scoring.score``."""
    summary = report["overall"][system]
    values: dict[str, Any] = {"similarity": summary["similarity"], "exact": summary["exact"]}
    if summary["exit_code_n"]:
        values["exit_code"] = summary["exit_code"]
    for name in ("page_state", "refs_usable", "targets_shown"):
        values[name] = _share(summary[name], summary[f"{name}_n"])
    if conditions := report.get("world_conditions"):
        mine = conditions[system]
        values["shown"] = _share(mine["shown"], mine["real_shows"])
        values["false_alarm"] = _share(mine["false_alarm"], mine["real_silent"])
    return Metrics.model_validate({k: v for k, v in values.items() if v is not None})


class Measurement(BaseModel):
    """What ``eval score --save-result`` knows beside the report."""

    model_config = ConfigDict(extra="forbid")

    predictions: str  # the predictions file scored
    episodes: int
    calls: int
    system: str = Field(min_length=1)
    title: str | None = None  # the held-out set; required for a new file
    data: list[str] = Field(default_factory=list)
    run: str | None = None
    shipped: bool = False
    readme: bool = False
    note: str = ""
    date: datetime.date = Field(default_factory=datetime.date.today)


def save_result(report: dict[str, Any], measurement: Measurement, path: Path) -> ResultFile:
    """Write the model's row and both baselines' to a new results file at ``path``, or add the
    model's row to the file there (its baselines kept); returns what was written."""
    m = measurement
    row = Row(
        system=m.system,
        run=m.run,
        shipped=m.shipped,
        metrics=metrics_of(report, "model"),
        note=m.note,
    )
    if path.exists():
        result = load_result(path)
        if m.title is not None and m.title != result.held_out.title:
            raise DataFileError(
                path,
                [(None, f"held_out.title: is {result.held_out.title!r}, not {m.title!r}")],
            )
        if m.calls != result.held_out.calls:
            row.calls = m.calls
        if m.date != result.date:
            row.note = "; ".join(x for x in (f"measured {m.date}", row.note) if x)
        rows = result.rows
        if m.shipped:  # one system is the default
            rows = [r.model_copy(update={"shipped": False}) for r in rows]
        result = result.model_copy(
            update={"rows": [*rows, row], "readme": result.readme or m.readme}
        )
    else:
        if m.title is None:
            raise DataFileError(path, [(None, "a new results file needs the held-out set's title")])
        baselines = [
            Row(system=label, baseline=name, metrics=metrics_of(report, name))
            for name, label in BASELINE_LABELS.items()
        ]
        result = ResultFile(
            held_out=HeldOutSet(title=m.title, data=m.data, episodes=m.episodes, calls=m.calls),
            date=m.date,
            source=f"measured: aw-mcp eval score --predictions {m.predictions}",
            readme=m.readme,
            rows=[row, *baselines],
        )
    result = ResultFile.model_validate(result.model_dump())  # the checks of a file read back
    dump_result(result, path)
    return result


# -- rendering ------------------------------------------------------------------------------


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _one(value: float | Share | None, name: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, Share):
        if name == "right":
            return f"{value.n} of {value.of}"
        return f"{_pct(value.fraction)} ({value.n} of {value.of})"
    return f"{value:.3f}" if name == "similarity" else _pct(value)


def render_value(value: Any, name: str) -> str:
    if isinstance(value, list):
        return " / ".join(_one(v, name) for v in value)
    return _one(value, name)


def _calls(calls: Calls | None) -> str:
    if calls is None:
        return "-"
    return " / ".join(str(c) for c in calls) if isinstance(calls, list) else str(calls)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _caption(result: ResultFile) -> str:
    held = result.held_out
    facts = ["Data: " + (", ".join(f"`{d}`" for d in held.data) if held.data else "built in")]
    if held.parts:
        facts.append("parts: " + " / ".join(held.parts))
    if held.episodes is not None:
        facts.append(f"{_calls(held.episodes)} episodes")
    facts.append(f"{_calls(held.calls)} calls")
    facts.append(f"measured {result.date}" if result.date else "date not recorded")
    return "; ".join(facts) + f". Source: {result.source}."


def render_group(result: ResultFile) -> list[str]:
    """One held-out set's section of docs/fidelity.md: a caption, then every row."""
    names = [
        name
        for name, _, _ in COLUMNS
        if any(getattr(row.metrics, name) is not None for row in result.rows)
    ]
    headers = {name: header for name, header, _ in COLUMNS}
    with_calls = any(row.calls is not None for row in result.rows)
    with_notes = any(row.note for row in result.rows)
    header = ["system", *(["calls"] if with_calls else []), *(headers[n] for n in names)]
    header += ["notes"] if with_notes else []
    rows = []
    for row in result.rows:
        label = f"**{row.system}**" if row.shipped else row.system
        if row.run and row.run not in row.system:
            label += f" (run {row.run})"
        cells = [label]
        if with_calls:
            cells.append(_calls(row.calls if row.calls is not None else result.held_out.calls))
        cells += [render_value(getattr(row.metrics, n), n) for n in names]
        cells += [row.note] if with_notes else []
        rows.append(cells)
    lines = [f"### {result.held_out.title}", "", _caption(result)]
    if result.notes:
        lines += ["", result.notes.strip()]
    return [*lines, "", *_table(header, rows)]


def render_doc_tables(results: list[ResultFile]) -> str:
    sections = ["\n".join(render_group(result)) for result in results]
    return "\n\n".join(sections)


def _summary(row: Row | None) -> str:
    if row is None:
        return "not measured"
    parts = []
    for name, _, label in COLUMNS:
        if (value := getattr(row.metrics, name)) is not None:
            text = render_value(value, name)
            if name == "right":
                parts.append(f"{text} right")
            else:
                parts.append(f"{label} {text}" if label else text)
    return ", ".join(parts)


def render_readme_table(results: list[ResultFile]) -> str:
    """README's short table: the shipped default beside both baselines, one line a set."""
    header = [
        "held-out set",
        "calls",
        "the default",
        "print nothing",
        "repeat the previous observation",
    ]
    rows = []
    for result in results:
        if not result.readme:
            continue
        shipped = next(row for row in result.rows if row.shipped)
        by_baseline = {row.baseline: row for row in result.rows if row.baseline}
        rows.append(
            [
                result.held_out.title,
                _calls(shipped.calls if shipped.calls is not None else result.held_out.calls),
                _summary(shipped),
                _summary(by_baseline.get("empty")),
                _summary(by_baseline.get("previous")),
            ]
        )
    return "\n".join(_table(header, rows))


# -- between markers ------------------------------------------------------------------------


def replace_between(text: str, markers: tuple[str, str], body: str, source: Path) -> str:
    """``text`` with what lies between the two marker lines replaced by ``body``."""
    start, end = markers
    start_at = text.find(start + "\n")
    body_from = start_at + len(start) + 1
    end_at = text.find(end, body_from) if start_at >= 0 else -1
    if end_at < 0 or text[end_at - 1] != "\n":
        raise DataFileError(source, [(None, f"no {start} ... {end} markers to write between")])
    return f"{text[:body_from]}{body}\n{text[end_at:]}"


def publish(
    results_dir: Path = RESULTS_DIR,
    doc: Path = DOC,
    readme: Path = README,
    *,
    write: bool = True,
) -> list[Path]:
    """Render the results files into ``doc`` and ``readme``; returns the files that were stale
    (and, with ``write``, are rewritten)."""
    results = load_results(results_dir)
    targets: list[tuple[Path, tuple[str, str], Callable[[list[ResultFile]], str]]] = [
        (doc, DOC_MARKERS, render_doc_tables),
        (readme, README_MARKERS, render_readme_table),
    ]
    stale = []
    for path, markers, render in targets:
        text = read_data_file(path)
        new = replace_between(text, markers, render(results), path)
        if new != text:
            stale.append(path)
            if write:
                path.write_text(new, encoding="utf-8")
    return stale
