"""The ``aw-mcp`` command line."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import logging
import sys
from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from pydantic import ValidationError

from aw_mcp import __version__
from aw_mcp.commands import register_all
from aw_mcp.config import ServeSettings
from aw_mcp.settings_cli import add_settings_flags, flag_name, settings_from_namespace
from aw_mcp.yaml_files import DataFileError

if TYPE_CHECKING:
    from aw_mcp.server.http_app import HttpOptions

log = logging.getLogger("aw_mcp")


def _add_serve_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve simulated tools over MCP (stdio by default)",
        description="Serve simulated tools to MCP clients. Every flag FLAG-NAME can also be "
        "set as the environment variable AW_MCP_FLAG_NAME; flags win.",
    )
    add_settings_flags(p, ServeSettings)
    p.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    settings = settings_from_namespace(ServeSettings, args)
    configure_logging(settings.log_level)
    from aw_mcp.runtime import build_simulator
    from aw_mcp.server.app import build_server
    from aw_mcp.server.transports import http_app, listen_socket, serve_http, serve_stdio

    simulator = build_simulator(settings)  # bad domain/world/fault files fail here, clearly
    # The server's lifespan loads the engine in the background and closes it on the way out.
    key = settings.request_state_key
    server = build_server(
        simulator,
        owns_engine=True,
        max_argument_bytes=settings.max_argument_bytes,
        request_state_keys=[key.get_secret_value()] if key else None,
    )
    http = http_options(settings)
    # Unsafe HTTP options and a port that cannot be had fail here, before anything starts
    # (the model would otherwise load, and "serving on" be logged, before the bind fails).
    app = http_app(server, http, simulator.episodes) if settings.transport == "http" else None
    listening = listen_socket(http.host, http.port) if app is not None else None
    log.info(
        "aw-mcp %s: %d tools from %s on %s",
        __version__,
        len(simulator.catalogue),
        ", ".join(d.name for d in simulator.catalogue.domains),
        simulator.engine.name,
    )

    async def main() -> None:
        if app is not None:
            await serve_http(app, http, listening)
        else:
            await serve_stdio(server)

    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(main)
    return 0


def http_options(settings: ServeSettings) -> HttpOptions:
    from aw_mcp.server.http_app import HttpOptions, body_limit

    token = settings.auth_token.get_secret_value() if settings.auth_token else None
    return HttpOptions(
        host=settings.host,
        port=settings.port,
        session_idle_timeout=settings.session_idle_timeout,
        max_sessions=settings.max_sessions,
        allowed_hosts=tuple(settings.allowed_host),
        allowed_origins=tuple(settings.allowed_origin),
        auth_token=token or None,
        ui=settings.ui,
        max_body_bytes=body_limit(settings.max_argument_bytes),
    )


def _add_capture_parser(subparsers: argparse._SubParsersAction) -> None:
    from aw_mcp.real_server import add_server_arguments

    p = subparsers.add_parser(
        "capture",
        help="save the tools (and resources, prompts) of a real MCP server, for --tools-from",
        description="Connect to a real MCP server as a client and save its tools/list as "
        "JSON. Examples: aw-mcp capture --out time.json -- uvx mcp-server-time; "
        "aw-mcp capture --out x.json --url http://127.0.0.1:8000/mcp",
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="FILE.json",
        help="where the captured tools/list (and resources, templates, prompts) is written",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
    add_server_arguments(p)
    p.set_defaults(handler=_capture)


def _capture(args: argparse.Namespace) -> int:
    from aw_mcp.capture import CaptureError, capture_tools, write_capture
    from aw_mcp.real_server import server_target

    try:
        target = server_target(args)
    except ValueError as exc:
        print(f"aw-mcp capture: {exc}", file=sys.stderr)
        return 2
    try:
        capture = anyio.run(capture_tools, target, args.timeout)
    except CaptureError as exc:
        print(f"aw-mcp capture: {exc}", file=sys.stderr)
        return 1
    write_capture(capture, args.out)
    counts = ", ".join(f"{len(items)} {key}" for key, items in capture.items())
    print(f"saved {counts} to {args.out}", file=sys.stderr)
    return 0


def _list_simulators(args: argparse.Namespace) -> int:
    from aw_mcp.domain.loader import bundled_domain_names, load_domain

    for name in bundled_domain_names():
        domain = load_domain(name)
        print(f"{name:12} {len(domain.tools):3} tools  {domain.description}")
    return 0


def _add_faults_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("faults", help="check, list and describe fault scenario files")
    actions = p.add_subparsers(dest="faults_command", required=True)
    check = actions.add_parser(
        "check", help="validate scenario files; name file, line and field of each error"
    )
    check.add_argument("files", nargs="+", metavar="NAME|FILE")
    check.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="DOMAIN|FILE",
        help="also warn about rules that name arguments the tools they match do not have, "
        "for the tools of this domain (bundled name, domain YAML, or a tools/list capture "
        ".json); repeatable, each checked on its own",
    )
    check.set_defaults(handler=_check_faults)
    actions.add_parser("list", help="list the bundled scenarios").set_defaults(handler=_list_faults)
    actions.add_parser(
        "schema", help="print the JSON Schema of scenario files (for editors)"
    ).set_defaults(handler=_print_faults_schema)


def _check_faults(args: argparse.Namespace) -> int:
    from aw_mcp.faults.scenario import Scenario, resolve_scenario_path
    from aw_mcp.yaml_files import load_yaml_file

    failed = 0
    scenarios = []
    for name in args.files:
        try:
            path = resolve_scenario_path(name)
            scenario = load_yaml_file(path, Scenario)
        except DataFileError as exc:
            failed += 1
            print(exc, file=sys.stderr)
            continue
        scenarios.append(scenario)
        rules = len(scenario.rules)
        print(f"ok: {path}: {scenario.name} ({rules} rule{'s' * (rules > 1)})")
    for target in args.against:
        for gap in _argument_gaps_against(scenarios, target):
            print(f"warning: against {target}: {gap}", file=sys.stderr)
    return 1 if failed else 0


def _argument_gaps_against(scenarios: list, target: str) -> list[str]:
    from aw_mcp.catalogue import Catalogue
    from aw_mcp.domain.loader import load_domain
    from aw_mcp.domain.mirror import mirror_domain
    from aw_mcp.faults.coverage import argument_gaps, served_tool_arguments

    domain = mirror_domain(target) if target.endswith(".json") else load_domain(target)
    return argument_gaps(scenarios, served_tool_arguments(Catalogue([domain])))


def _list_faults(args: argparse.Namespace) -> int:
    from aw_mcp.data_files import bundled_dir
    from aw_mcp.faults.scenario import Scenario
    from aw_mcp.yaml_files import load_yaml_file

    for path in sorted(bundled_dir("faults").glob("*.yaml")):
        scenario = load_yaml_file(path, Scenario)
        summary = (scenario.description.strip().splitlines() or [""])[0]
        print(f"{path.stem:20} {len(scenario.rules):2} rules  {summary}")
    return 0


def _print_faults_schema(args: argparse.Namespace) -> int:
    import json

    from aw_mcp.faults.scenario import scenario_json_schema

    print(json.dumps(scenario_json_schema(), indent=2))
    return 0


def configure_logging(level: str) -> None:
    # stderr only: on stdio, stdout is the MCP wire.
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aw-mcp", description="MCP server of simulated worlds answered by a world model."
    )
    parser.add_argument("--version", action="version", version=f"aw-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve_parser(sub)
    _add_capture_parser(sub)
    p = sub.add_parser("simulators", help="list the bundled simulated domains")
    p.set_defaults(handler=_list_simulators)
    _add_faults_parser(sub)
    register_all(sub)
    return parser


def parse_arguments(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> Namespace:
    """``parser.parse_args``, and an unknown flag gets "did you mean" the command's closest."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _chosen_parser(parser, args)
        message = f"unrecognized arguments: {' '.join(unknown)}"
        known = [o for o in command._option_string_actions if o.startswith("--")]
        flags = [u.split("=", 1)[0] for u in unknown if u.startswith("--")]
        if flags and (close := difflib.get_close_matches(flags[0], known, n=1)):
            message += f" (did you mean {close[0]}?)"
        command.error(message)
    return args


def _chosen_parser(parser: argparse.ArgumentParser, args: Namespace) -> argparse.ArgumentParser:
    """The (sub)command parser that ``args`` were parsed with, following nested commands."""
    while True:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, actions[0].dest, None) if actions else None
        if not actions or chosen not in actions[0].choices:
            return parser
        parser = actions[0].choices[chosen]


def settings_problems(exc: ValidationError) -> str:
    """A settings ValidationError as one line per flag: ``--port: Input should be ...``."""
    return "\n".join(
        f"{flag_name(str(e['loc'][0])) if e['loc'] else 'settings'}: {e['msg']}"
        for e in exc.errors(include_url=False)
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(build_parser(), argv)
    try:
        return args.handler(args)
    except DataFileError as exc:
        print(f"aw-mcp: invalid file\n{exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:  # a flag or AW_MCP_* value out of range
        print(f"aw-mcp: invalid settings\n{settings_problems(exc)}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"aw-mcp: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
