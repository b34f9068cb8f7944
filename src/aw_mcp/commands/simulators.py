"""``aw-mcp simulators``: the bundled simulated domains."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("simulators", help="list the bundled simulated domains")
    p.set_defaults(handler=_list_simulators)


def _list_simulators(args: argparse.Namespace) -> int:
    from aw_mcp.domain.loader import bundled_domain_names, load_domain

    for name in bundled_domain_names():
        domain = load_domain(name)
        print(f"{name:12} {len(domain.tools):3} tools  {domain.description}")
    return 0
