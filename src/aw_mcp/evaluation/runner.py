"""Run work items concurrently (bounded), with a progress bar, for infer and closed-loop."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio
from tqdm import tqdm

ItemT = TypeVar("ItemT")


async def run_bounded(
    items: Sequence[ItemT],
    work: Callable[[ItemT], Awaitable[int]],
    *,
    jobs: int,
    total: int,
    description: str,
    quiet: bool = False,
) -> None:
    """``work(item)`` for every item, at most ``jobs`` at once; each returns how many units
    (samples) it finished, which advance a bar of ``total`` units on stderr."""
    limiter = anyio.CapacityLimiter(jobs)
    with tqdm(total=total, desc=description, unit="sample", disable=quiet, file=sys.stderr) as bar:

        async def one(item: ItemT) -> None:
            async with limiter:
                bar.update(await work(item))

        async with anyio.create_task_group() as tg:
            for item in items:
                tg.start_soon(one, item)
