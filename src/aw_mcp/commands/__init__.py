"""The commands of ``aw-mcp``, one module each (``aw-mcp serve`` is ``serve.py``).

Each module exposes ``register(subparsers)``: it adds its parser and sets ``handler`` (a
function of the parsed ``argparse.Namespace`` returning the exit code). ``cli.build_parser``
registers every module listed in ``COMMAND_MODULES``, in that order. Beside them: ``flags``
(flags generated from settings classes) and ``console`` (logging on stderr).
"""

from __future__ import annotations

import argparse
import importlib

COMMAND_MODULES: list[str] = [
    "serve",
    "client_config",
    "capture",
    "simulators",
    "faults",
    "generate",
    "export",
    "record",
    "eval",
    "view",
    "report",
    "train",
    "adapters",
    "models",
    "world",
]


def register_all(subparsers: argparse._SubParsersAction) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"aw_mcp.commands.{name}").register(subparsers)
