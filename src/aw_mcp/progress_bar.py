"""Progress bars of the long commands (on stderr, so stdout stays for results)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

ItemT = TypeVar("ItemT")


def counted(items: Iterable[ItemT], description: str, unit: str, quiet: bool) -> Iterator[ItemT]:
    """``items`` with a bar on stderr that counts them; ``quiet`` turns it off. Log lines
    written meanwhile print above the bar instead of through it."""
    if quiet:
        yield from items
        return
    with logging_redirect_tqdm():
        yield from tqdm(items, desc=description, unit=unit, file=sys.stderr, dynamic_ncols=True)


def add_quiet_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
