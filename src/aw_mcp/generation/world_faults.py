"""World faults made real: terminal episodes run under a real condition, labelled with the
condition text the fault layer writes into the prompt (``aw-mcp generate terminal
--world-fault NAME``), so a model trained on them learns to render a world fault.

The condition and the call it starts at come from a bundled fault scenario (one sticky
``world`` rule fired at the n-th call), the same file that serves or evaluates the episodes
(``--faults NAME``): the training label and the serving prompt are one text. What makes the
condition true in the sandbox is the only code here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aw_mcp.errors import UserInputError
from aw_mcp.faults.scenario import WorldEffect, load_scenario
from aw_mcp.generation.sandbox import BashSandbox


@dataclass(frozen=True)
class RealCondition:
    """How the sandbox makes a condition true: its disk (None: the host's) and the change."""

    disk_bytes: int | None
    impose: Callable[[BashSandbox], None]


REAL_CONDITIONS: dict[str, RealCondition] = {
    # /home is a 4 MiB tmpfs (the scenario's "tmpfs, 4.0M"), filled to the last byte
    "sandbox-disk-full": RealCondition(4 << 20, BashSandbox.fill_disk),
    "sandbox-read-only": RealCondition(None, BashSandbox.make_read_only),
}


@dataclass(frozen=True)
class WorldFault:
    name: str
    at: int  # the first call made under the condition
    condition: str  # what the fault layer writes into the prompt from that call on
    real: RealCondition


def world_fault(name: str) -> WorldFault:
    """The world fault of the bundled scenario ``name``, checked to be one the sandbox can
    make real: a single sticky world rule on the n-th call of the episode, any tool."""
    if name not in REAL_CONDITIONS:
        raise UserInputError(
            f"no real condition for {name!r}; the sandbox can make: {', '.join(REAL_CONDITIONS)}"
        )
    scenario = load_scenario(name)
    found = [
        (rule, effect)
        for rule in scenario.rules
        for effect in rule.effects
        if isinstance(effect, WorldEffect)
    ]
    if len(scenario.rules) != 1 or len(found) != 1:
        raise UserInputError(f"scenario {name!r} must hold exactly one rule with one world effect")
    rule, effect = found[0]
    when = rule.when
    if not isinstance(when.nth, int) or when.count != "all" or effect.calls is not None:
        raise UserInputError(
            f"scenario {name!r}: the world rule must fire once, on call `nth` of the episode "
            "(count: all), and stay (no `calls:`)"
        )
    if rule.match.model_dump(exclude_defaults=True) or rule.probability != 1.0:
        raise UserInputError(f"scenario {name!r}: the world rule must match every call, always")
    return WorldFault(name, when.nth, effect.condition, REAL_CONDITIONS[name])
