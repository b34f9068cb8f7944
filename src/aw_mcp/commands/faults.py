"""``aw-mcp faults``: check, list and describe fault scenario files."""

from __future__ import annotations

import argparse
import sys

from aw_mcp.files.yaml import DataFileError


def register(subparsers: argparse._SubParsersAction) -> None:
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
    from aw_mcp.files.yaml import load_yaml_file

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
    from aw_mcp.domain.catalogue import Catalogue
    from aw_mcp.domain.loader import load_domain
    from aw_mcp.domain.mirror import mirror_domain
    from aw_mcp.faults.coverage import argument_gaps, served_tool_arguments

    domain = mirror_domain(target) if target.endswith(".json") else load_domain(target)
    return argument_gaps(scenarios, served_tool_arguments(Catalogue([domain])))


def _list_faults(args: argparse.Namespace) -> int:
    from aw_mcp.faults.scenario import Scenario
    from aw_mcp.files.bundled import bundled_dir
    from aw_mcp.files.yaml import load_yaml_file

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
