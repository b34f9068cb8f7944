"""A first session of everyday commands: what the served Terminal world answers, beside what
real bash prints on the machine that world describes.

The truth is not written anywhere: the commands run in a real bash sandbox built from the
served world's facts (the bundled world's, with a ``--world`` file layered on), which makes a
recorded episode; that episode is replayed closed loop through the server like any held-out
one, so its rows land in ``predictions.jsonl`` for ``aw-mcp eval score`` as well. An answer is
right when it is the real one, whitespace at its ends aside (output and exit code). Where
strace can follow the real shell, each real step also records what it read and changed, so
``eval score`` gives state accuracy and the answers of steps that read back what the session
changed.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aw_mcp.domain.catalogue import ServedTool
from aw_mcp.domain.models import WorldSpec
from aw_mcp.errors import UserInputError
from aw_mcp.evaluation.closed_loop import ClosedLoop, ClosedLoopOptions, sample_keys
from aw_mcp.evaluation.predictions import PREDICTIONS_FILE
from aw_mcp.generation.sandbox import BashSandbox, observation_text
from aw_mcp.generation.state_trace import TraceUnavailable
from aw_mcp.generation.worlds import from_world
from aw_mcp.records.calls import CallRecord
from aw_mcp.records.reader import RecordedEpisode
from aw_mcp.records.sink import RecordSink
from aw_mcp.simulation.simulator import WorldSimulator
from aw_mcp.state.steps import StepState

log = logging.getLogger(__name__)

TOOL = "run_command"
EPISODE_ID = "everyday"  # every session's, whichever its commands (each gets a folder of its own)


def read_commands(path: Path) -> list[str]:
    """One command per line; blank lines and lines starting with ``#`` are skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UserInputError(f"cannot read the commands file {path}: {reason}") from None
    commands = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not commands:
        raise UserInputError(f"{path} holds no command (one per line; '#' starts a comment)")
    return commands


def same_answer(served: str, real: str) -> bool:
    return served.strip() == real.strip()


def real_observations(
    world: WorldSpec, commands: Sequence[str], real_dir: Path | None = None
) -> list[str]:
    """What bash prints for ``commands``, in one shell, on the machine ``world`` describes
    (its working directory a copy of ``real_dir`` where given: ``from_world``). Raises
    SandboxUnavailable where this machine cannot build the sandbox."""
    with BashSandbox(world=from_world(world, real_dir)) as shell:
        return [observation_text(*shell.run(command)) for command in commands]


def real_steps(
    world: WorldSpec, commands: Sequence[str], real_dir: Path | None = None
) -> list[tuple[str, StepState | None]]:
    """:func:`real_observations`, each with what its command read and changed where strace
    can follow the shell (None where it cannot: the session is then scored without state)."""
    if shutil.which("strace") is not None:
        try:
            with BashSandbox(world=from_world(world, real_dir), trace_state=True) as shell:
                traced = [shell.run_traced(command) for command in commands]
            return [(observation_text(output, code), step) for output, code, step in traced]
        except TraceUnavailable as exc:
            log.warning("%s; the session is scored without state", exc)
    return [(observation, None) for observation in real_observations(world, commands, real_dir)]


def shell_tool(simulator: WorldSimulator) -> ServedTool:
    """The served ``run_command``: the terminal world's where several domains have one."""
    shells = [s for s in simulator.catalogue if s.spec.name == TOOL]
    if not shells:
        raise UserInputError(
            f"the served domains have no {TOOL!r} tool: serve the terminal world "
            "(--simulator terminal)"
        )
    return next((s for s in shells if s.domain.name == "terminal"), shells[0])


def real_session(
    world: WorldSpec,
    commands: Sequence[str],
    domain: str,
    tool: str = TOOL,
    real_dir: Path | None = None,
) -> RecordedEpisode:
    """The commands as a recorded real episode of ``domain``'s shell tool (``tool``: its
    name on the wire), run where ``real_steps`` runs them."""
    started = time.time()
    records = [
        CallRecord(
            index=index,
            episode=EPISODE_ID,
            domain=domain,
            tool=tool,
            arguments={"command": command},
            observation=observation,
            is_error=False,
            source="real",
            started_at=started,
            seconds=0.0,
            state=state,
        )
        for index, (command, (observation, state)) in enumerate(
            zip(commands, real_steps(world, commands, real_dir), strict=True), start=1
        )
    ]
    return RecordedEpisode(EPISODE_ID, domain, records)


@dataclass(frozen=True)
class Answer:
    command: str
    served: str
    real: str
    error: str | None = None  # the call failed: the engine's error

    @property
    def right(self) -> bool:
        return same_answer(self.served, self.real)


class OutputExistsError(UserInputError):
    """The output folder already holds a session's predictions."""


async def run_session(
    simulator: WorldSimulator,
    commands: Sequence[str],
    output_dir: Path,
    quiet: bool = True,
    real_dir: Path | None = None,
) -> list[Answer]:
    """Serve ``commands`` as one fresh episode and compare each answer with real bash, run
    on the machine the served world describes, its working directory a copy of ``real_dir``
    where given (the directory a `world from-dir` world was made of).

    Writes ``output_dir/predictions.jsonl`` and the real episode under ``output_dir/real/``
    (a record folder, as ``serve --record-dir`` writes). The folder must not hold predictions
    yet: unlike a closed-loop run, a session is never resumed, since it takes a minute or two
    and an earlier one may have been served by another model."""
    served = shell_tool(simulator)
    if (existing := output_dir / PREDICTIONS_FILE).exists():
        raise OutputExistsError(
            f"{existing} already holds a session's predictions: choose a new --output-dir"
        )
    episode = real_session(served.world, commands, served.domain.name, served.public_name, real_dir)
    keys = sample_keys(episode)
    real = RecordSink(output_dir / "real")
    real.path_for(EPISODE_ID).unlink(missing_ok=True)  # left by a session that failed to serve
    for record in episode.records:
        real.write(record)
    loop = ClosedLoop(simulator, ClosedLoopOptions(quiet=quiet))
    predictions = await loop.run([episode], output_dir)
    rows = [predictions.rows[k] for k in keys]
    return [
        Answer(
            str(record.arguments["command"]),
            str(row.extra["gen"]),
            record.observation,
            row.extra.get("error"),
        )
        for record, row in zip(episode.records, rows, strict=True)
    ]


def render(answers: Sequence[Answer]) -> str:
    """Each wrong answer beside the real one, then the count."""
    lines = []
    for answer in answers:
        if not answer.right:
            served = f"failed: {answer.error}" if answer.error else repr(answer.served.strip())
            lines += [
                f"$ {answer.command}",
                f"  served: {served}",
                f"  real:   {answer.real.strip()!r}",
            ]
    right = sum(a.right for a in answers)
    share = f"{right / len(answers):.0%}"
    lines.append(f"{right} of {len(answers)} answered as real bash does ({share})")
    if failed := sum(bool(a.error) for a in answers):
        lines.append(f"{failed} failed: fix the engine and run again into a new --output-dir")
    return "\n".join(lines)
