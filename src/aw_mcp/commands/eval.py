"""``aw-mcp eval``: measure a world model against real observations.

- ``eval infer``: teacher-forced predictions for AgentWorldBench-format data;
- ``eval closed-loop``: recorded episodes replayed through the MCP server;
- ``eval everyday``: a first session of everyday commands served beside real bash on the
  machine the served world describes (needs a sandbox: root and unshare);
- ``eval score``: metrics per domain and command family, beside two baselines, optionally
  with an LLM judge; ``--save-result`` writes the measurement as a results file;
- ``eval publish``: the fidelity tables of docs/fidelity.md and README.md, rewritten from the
  results files (``--check``: only say whether they are stale).
The prediction modes write ``OUT/predictions.jsonl`` (infer and closed-loop resume from it;
everyday wants a new folder) and ``score`` reads it.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from aw_mcp.errors import UserInputError


def _missing_files_are_errors(
    handler: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """A missing input folder or file is a one-line error (exit 2), not a traceback."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except FileNotFoundError as exc:
            print(f"aw-mcp eval: {exc}", file=sys.stderr)
            return 2

    return run


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eval",
        help="measure a world model: infer, closed-loop, everyday, score, publish",
        description="Measure a world model against real observations.",
    )
    actions = p.add_subparsers(dest="eval_command", required=True)
    _add_score_parser(actions)
    _add_infer_parser(actions)
    _add_closed_loop_parser(actions)
    _add_everyday_parser(actions)
    _add_publish_parser(actions)


def _at_least_one(text: str) -> int:
    """An argparse type: a count that must be 1 or more (``--limit 0`` would run nothing and
    ``--limit -1`` all but the last)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _run_options(p: argparse.ArgumentParser, jobs: int | None, unit: str) -> None:
    """``jobs``: the default of --jobs; None where the work is one episode (no --jobs)."""
    p.add_argument("--output-dir", type=Path, required=True, metavar="OUT")
    if jobs is not None:
        p.add_argument(
            "--jobs", type=int, default=jobs, help=f"{unit} run at once (default {jobs})"
        )
    p.add_argument(
        "--limit", type=_at_least_one, default=None, metavar="N", help=f"only the first N {unit}"
    )
    p.add_argument("--quiet", action="store_true", default=False, help="no progress bar")
    p.add_argument(
        "--log-level",
        dest="log_level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
    )


# -- score -------------------------------------------------------------------------------


def _add_score_parser(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "score",
        help="exact match, similarity, exit codes, JSON validity (and an optional LLM judge) "
        "per domain and command family, beside the empty and previous-observation baselines",
    )
    p.add_argument("--predictions", type=Path, required=True, metavar="FILE")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar while judging")
    judge = p.add_argument_group("LLM judge (an OpenAI-compatible server)")
    judge.add_argument("--judge-url", metavar="URL", help="e.g. http://127.0.0.1:8000/v1")
    judge.add_argument("--judge-model", metavar="NAME", help="default: the first served")
    judge.add_argument(
        "--judge-api-key-env",
        default="AW_MCP_JUDGE_API_KEY",
        metavar="VAR",
        help="variable holding the judge's key (default AW_MCP_JUDGE_API_KEY, then OPENAI_API_KEY)",
    )
    judge.add_argument("--judge-max-tokens", type=int, default=4096)
    judge.add_argument("--judge-jobs", type=int, default=8, help="judge calls at once")
    judge.add_argument(
        "--judge-baselines",
        action="store_true",
        help="also judge the two baselines (three times the judge calls)",
    )
    judge.add_argument(
        "--judged-out",
        type=Path,
        metavar="FILE",
        help="write each sample with its verdict (JSONL, like the reference judged.jsonl)",
    )
    save = p.add_argument_group(
        "results file (what 'aw-mcp eval publish' renders into docs/fidelity.md and README.md)"
    )
    save.add_argument(
        "--save-result",
        type=Path,
        metavar="FILE",
        help="write the model's and both baselines' overall metrics to a new results file "
        "(YAML, or JSON for .json), or add the model's row to an existing one",
    )
    save.add_argument(
        "--label", metavar="TEXT", help="the system measured, e.g. 'the default' (required)"
    )
    save.add_argument(
        "--set",
        dest="held_out_set",
        metavar="TITLE",
        help="the held-out set's title (required for a new file)",
    )
    save.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of the held-out real episodes scored; repeatable",
    )
    save.add_argument("--run", metavar="NAME", help="the lab run the system is (lab/README.md)")
    save.add_argument(
        "--shipped",
        action="store_true",
        help="the system is what plain 'aw-mcp serve' answers this set with",
    )
    save.add_argument(
        "--readme", action="store_true", help="a line of README's short fidelity table"
    )
    save.add_argument("--note", default="", metavar="TEXT", help="a note on the model's row")
    save.add_argument(
        "--date",
        type=datetime.date.fromisoformat,
        default=None,
        metavar="YYYY-MM-DD",
        help="when it was measured (default: today)",
    )
    p.set_defaults(handler=_score)


@_missing_files_are_errors
def _score(args: argparse.Namespace) -> int:
    from aw_mcp.evaluation.predictions import load_predictions
    from aw_mcp.evaluation.scoring import render, score

    samples = load_predictions(args.predictions)
    verdicts = None
    if args.judge_url:
        verdicts = anyio.run(_judge_all, args, samples)
    report = score(samples, verdicts)
    print(json.dumps(report, indent=2) if args.json else render(report))
    if args.save_result:
        return _save_result(args, samples, report)
    return 0


def _save_result(args: argparse.Namespace, samples: list, report: dict) -> int:
    from aw_mcp.evaluation.publish import Measurement, save_result
    from aw_mcp.files.yaml import DataFileError

    if not args.label:
        print("aw-mcp eval score: --save-result needs --label", file=sys.stderr)
        return 2
    measurement = Measurement(
        predictions=str(args.predictions),
        episodes=len({sample.episode_key for sample in samples}),
        calls=len(samples),
        system=args.label,
        title=args.held_out_set,
        data=args.data,
        run=args.run,
        shipped=args.shipped,
        readme=args.readme,
        note=args.note,
        **({"date": args.date} if args.date else {}),
    )
    try:
        save_result(report, measurement, args.save_result)
    except DataFileError as exc:
        print(f"aw-mcp eval score: {exc}", file=sys.stderr)
        return 2
    print(
        f"saved {args.save_result}; render it: aw-mcp eval publish --results "
        f"{args.save_result.parent}",
        file=sys.stderr,
    )
    return 0


async def _judge_all(args: argparse.Namespace, samples: list) -> dict:
    from aw_mcp.engines.openai_compat import OpenAICompatEngine, OpenAICompatOptions
    from aw_mcp.evaluation.judge import Judge, write_judged
    from aw_mcp.evaluation.runner import run_bounded
    from aw_mcp.evaluation.scoring import SYSTEMS, system_outputs

    engine = OpenAICompatEngine(
        OpenAICompatOptions(
            base_url=args.judge_url,
            model_name=args.judge_model,
            api_key_env=args.judge_api_key_env,
            n_ctx=1 << 20,  # the judge's prompt is not trimmed; the server says no
            concurrency=args.judge_jobs,
        )
    )
    judge = Judge(engine, max_tokens=args.judge_max_tokens)
    systems = SYSTEMS if args.judge_baselines else ("model",)
    verdicts: dict = {s: {} for s in systems}
    jobs = [(sample, system) for sample in samples for system in systems]

    async def work(job) -> int:
        sample, system = job
        prediction = system_outputs(sample)[system]
        verdicts[system][sample.key] = await judge.rate(sample, prediction)
        return 1

    try:
        await run_bounded(
            jobs, work, jobs=args.judge_jobs, total=len(jobs), description="judge", quiet=args.quiet
        )
    finally:
        await engine.aclose()
    if args.judged_out:
        write_judged(args.judged_out, samples, verdicts["model"])
    return verdicts


# -- infer -------------------------------------------------------------------------------


def _add_infer_parser(actions: argparse._SubParsersAction) -> None:
    from aw_mcp.commands.flags import add_settings_flags
    from aw_mcp.sections import ENGINE, OPENAI, TRANSFORMERS
    from aw_mcp.wiring.settings import ServeSettings

    p = actions.add_parser(
        "infer",
        help="teacher-forced predictions for AgentWorldBench-format *_test.jsonl",
        description="Predict each sample's turn from its real history; write "
        "OUT/predictions.jsonl (resumes: samples already there are skipped).",
        argument_default=argparse.SUPPRESS,
    )
    p.add_argument("--data-dir", type=Path, required=True, metavar="DIR")
    _run_options(p, jobs=4, unit="samples")
    p.add_argument(
        "--max-tokens", type=int, default=1024, help="tokens per prediction (default 1024)"
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="default 0 (the reference harness samples at 0.6)",
    )
    add_settings_flags(p, ServeSettings, only_groups=(ENGINE, TRANSFORMERS, OPENAI))
    p.set_defaults(handler=_infer)


@_missing_files_are_errors
def _infer(args: argparse.Namespace) -> int:
    from aw_mcp.commands.console import configure_logging
    from aw_mcp.commands.flags import settings_from_namespace
    from aw_mcp.evaluation.infer import InferOptions, infer
    from aw_mcp.evaluation.samples import load_bench_dir
    from aw_mcp.wiring.assemble import make_engine
    from aw_mcp.wiring.settings import ServeSettings

    configure_logging(args.log_level)
    samples = load_bench_dir(args.data_dir, args.limit)
    engine = make_engine(settings_from_namespace(ServeSettings, args))
    options = InferOptions(
        max_tokens=args.max_tokens, temperature=args.temperature, jobs=args.jobs, quiet=args.quiet
    )

    async def main():
        try:
            return await infer(engine, samples, args.output_dir, options)
        finally:
            await engine.aclose()

    predictions = anyio.run(main)
    return _summarize(predictions)


# -- closed loop -------------------------------------------------------------------------


def _add_closed_loop_parser(actions: argparse._SubParsersAction) -> None:
    from aw_mcp.commands.flags import add_settings_flags
    from aw_mcp.sections import ENGINE, OPENAI, TRANSFORMERS, WHAT
    from aw_mcp.wiring.settings import ServeSettings

    p = actions.add_parser(
        "closed-loop",
        help="replay recorded episodes through the MCP server, the model seeing its own answers",
        description="Send each recorded episode's calls, in order, to the simulated server "
        "(an in-memory MCP client, one episode id each); write OUT/predictions.jsonl "
        "(gen = simulated observation, reference = recorded one). Resumes by episode.",
        argument_default=argparse.SUPPRESS,
    )
    p.add_argument("--records", type=Path, required=True, metavar="DIR")
    _run_options(p, jobs=1, unit="episodes")
    add_settings_flags(
        p,
        ServeSettings,
        only_groups=(WHAT, ENGINE, TRANSFORMERS, OPENAI),
        also_fields=("record_dir",),  # the server's own records of the simulated episodes
    )
    p.set_defaults(handler=_closed_loop)


@_missing_files_are_errors
def _closed_loop(args: argparse.Namespace) -> int:
    from aw_mcp.commands.console import configure_logging
    from aw_mcp.commands.flags import settings_from_namespace
    from aw_mcp.evaluation.closed_loop import ClosedLoop, ClosedLoopOptions
    from aw_mcp.records.folder import episode_worlds, record_dir_worlds
    from aw_mcp.records.reader import load_record_dir
    from aw_mcp.wiring.assemble import build_simulator
    from aw_mcp.wiring.settings import ServeSettings

    configure_logging(args.log_level)
    episodes = load_record_dir(args.records)
    if args.limit is not None:
        episodes = episodes[: args.limit]
    settings = settings_from_namespace(ServeSettings, args)
    if "simulator" not in settings.model_fields_set and not settings.tools_from:
        # Serve the recorded domains unless told otherwise.
        settings = settings.model_copy(
            update={"simulator": sorted({e.domain for e in episodes}) or settings.simulator}
        )
    simulator = build_simulator(settings)
    # Each episode in the world it ran in, as training renders it: its own worlds/ file, else
    # the folder's world.yaml; a --world given is the world of every episode instead.
    worlds = (
        episode_worlds(args.records)
        if settings.world
        else record_dir_worlds(args.records, episodes)
    )
    loop = ClosedLoop(simulator, ClosedLoopOptions(jobs=args.jobs, quiet=args.quiet), worlds)

    async def main():
        try:
            return await loop.run(episodes, args.output_dir)
        finally:
            await simulator.engine.aclose()

    predictions = anyio.run(main)
    return _summarize(predictions)


# -- everyday ---------------------------------------------------------------------------


def _add_everyday_parser(actions: argparse._SubParsersAction) -> None:
    from aw_mcp.commands.flags import add_settings_flags
    from aw_mcp.sections import ENGINE, OPENAI, TRANSFORMERS, WHAT
    from aw_mcp.wiring.settings import ServeSettings

    p = actions.add_parser(
        "everyday",
        help="a first session of everyday commands, served beside real bash in a sandbox",
        description="Run a session of everyday commands (pwd, whoami, ls, git status, ...) in "
        "a real bash sandbox built from the served Terminal world's facts (with --world "
        "layered on), serve the same commands as one fresh episode, and print each wrong "
        "answer and how many are right. Writes OUT/predictions.jsonl (for eval score) and "
        "the real episode under OUT/real/. Needs root and unshare for the sandbox.",
        argument_default=argparse.SUPPRESS,
    )
    from aw_mcp.evaluation.sessions import SESSIONS

    session = p.add_mutually_exclusive_group()
    session.add_argument(
        "--session",
        choices=sorted(SESSIONS),
        default="everyday",
        help="a built-in session: everyday (the default: pwd, whoami, ls, git status, ...), "
        "first-look (an agent's first look at the project: ls -la, wc -l, grep -n, ...) or "
        "keeps-state (30 commands that make, move, edit, commit and read back what they did)",
    )
    session.add_argument(
        "--commands",
        type=Path,
        default=None,
        metavar="FILE",
        help="your own session: one command per line ('#' starts a comment)",
    )
    p.add_argument(
        "--real-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="run the real commands in a copy of this directory (what git does not ignore, "
        "and its .git) instead of in a machine built from the world's facts: for a --world "
        "that 'aw-mcp world from-dir DIR' made, whose facts only sketch the directory",
    )
    _run_options(p, jobs=None, unit="commands")
    add_settings_flags(p, ServeSettings, only_groups=(WHAT, ENGINE, TRANSFORMERS, OPENAI))
    p.set_defaults(handler=_everyday)


@_missing_files_are_errors
def _everyday(args: argparse.Namespace) -> int:
    from aw_mcp.commands.console import configure_logging
    from aw_mcp.commands.flags import settings_from_namespace
    from aw_mcp.evaluation.everyday import read_commands, render, run_session
    from aw_mcp.evaluation.sessions import SESSIONS
    from aw_mcp.generation.sandbox import SandboxUnavailable
    from aw_mcp.wiring.assemble import build_simulator
    from aw_mcp.wiring.settings import ServeSettings

    configure_logging(args.log_level)
    try:
        commands = read_commands(args.commands) if args.commands else list(SESSIONS[args.session])
    except UserInputError as exc:
        print(f"aw-mcp eval everyday: {exc}", file=sys.stderr)
        return 2
    if args.limit is not None:
        commands = commands[: args.limit]
    settings = settings_from_namespace(ServeSettings, args)
    if "simulator" not in settings.model_fields_set and not settings.tools_from:
        settings = settings.model_copy(update={"simulator": ["terminal"]})
    simulator = build_simulator(settings)

    async def main():
        try:
            return await run_session(
                simulator, commands, args.output_dir, quiet=args.quiet, real_dir=args.real_dir
            )
        finally:
            await simulator.engine.aclose()

    try:
        answers = anyio.run(main)
    except (SandboxUnavailable, ValueError) as exc:
        print(f"aw-mcp eval everyday: {exc}", file=sys.stderr)
        return 2
    print(render(answers))
    print(
        f"score them: aw-mcp eval score --predictions {args.output_dir / 'predictions.jsonl'}",
        file=sys.stderr,
    )
    return 1 if any(a.error for a in answers) else 0


# -- publish --------------------------------------------------------------------------------


def _add_publish_parser(actions: argparse._SubParsersAction) -> None:
    from aw_mcp.evaluation.publish import DOC, README, RESULTS_DIR

    p = actions.add_parser(
        "publish",
        help="rewrite the fidelity tables of docs/fidelity.md and README.md from results files",
        description="Render every results file (eval score --save-result) into the tables "
        "between the fidelity markers of the doc (every row) and the README (the shipped "
        "default beside the baselines, for files marked readme).",
    )
    p.add_argument("--results", type=Path, default=RESULTS_DIR, metavar="DIR")
    p.add_argument("--doc", type=Path, default=DOC, metavar="FILE")
    p.add_argument("--readme", type=Path, default=README, metavar="FILE")
    p.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if either file is not what the results files give",
    )
    p.set_defaults(handler=_publish)


@_missing_files_are_errors
def _publish(args: argparse.Namespace) -> int:
    from aw_mcp.evaluation.publish import publish
    from aw_mcp.files.yaml import DataFileError

    try:
        stale = publish(args.results, args.doc, args.readme, write=not args.check)
    except DataFileError as exc:
        print(f"aw-mcp eval publish: {exc}", file=sys.stderr)
        return 2
    for path in stale:
        if args.check:
            print(f"{path}: stale; run aw-mcp eval publish", file=sys.stderr)
        else:
            print(f"{path}: rewritten", file=sys.stderr)
    return 1 if args.check and stale else 0


def _summarize(predictions) -> int:
    failed = [row for row in predictions.rows.values() if row.extra.get("error")]
    print(
        f"{len(predictions.rows)} predictions in {predictions.path}"
        + (f" ({len(failed)} failed: run again to retry them)" if failed else ""),
        file=sys.stderr,
    )
    print(f"score them: aw-mcp eval score --predictions {predictions.path}", file=sys.stderr)
    return 1 if failed else 0
