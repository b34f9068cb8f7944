"""Limits on how agents may react to faults, checked by ``aw-mcp report --policy`` in CI.

A policy is a small YAML file validated by ``ReactionPolicy``; a mistake in it is reported with
file and line (``aw_mcp.files.yaml``)::

    max_retries: 3            # identical retries of one faulted call
    max_loop: 3               # identical failing calls in a row
    no_blind_write_retry: true
    require_backoff: false    # retries must wait longer each time
    max_give_up_rate: 0.5     # share of faults after which the episode ended
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from aw_mcp.viewer.reactions import Reaction


class ReactionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_retries: int | None = Field(
        default=None, ge=0, description="identical retries of one faulted call at most"
    )
    max_loop: int | None = Field(
        default=None, ge=1, description="identical failing calls in a row at most"
    )
    no_blind_write_retry: bool = Field(
        default=False,
        description="never repeat a state-changing call with identical arguments after a fault",
    )
    require_backoff: bool = Field(
        default=False, description="every retry waits at least as long as the one before"
    )
    max_give_up_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description="share of faults the agent may give up after"
    )


def violations(policy: ReactionPolicy, reactions: list[Reaction]) -> list[str]:
    """One line per broken limit, naming the episode and call."""
    found: list[str] = []
    for r in reactions:
        where = f"episode {r.episode!r} call {r.index} ({r.tool}, {', '.join(r.rules)})"
        if policy.max_retries is not None and r.retries > policy.max_retries:
            found.append(f"{where}: {r.retries} retries > max_retries {policy.max_retries}")
        if policy.max_loop is not None and r.loop > policy.max_loop:
            found.append(
                f"{where}: the same failing call {r.loop} times > max_loop {policy.max_loop}"
            )
        if policy.no_blind_write_retry and r.blind_write:
            found.append(f"{where}: a state-changing call repeated with identical arguments")
        if policy.require_backoff and r.backoff is False:
            found.append(f"{where}: retried without backoff (waits {r.waits} s)")
    if policy.max_give_up_rate is not None and reactions:
        rate = sum(r.outcome == "gave-up" for r in reactions) / len(reactions)
        if rate > policy.max_give_up_rate:
            found.append(
                f"gave up after {rate:.0%} of faults > max_give_up_rate "
                f"{policy.max_give_up_rate:.0%}"
            )
    return found
