"""Plausible-but-wrong observations: the ``mislead`` fault effect.

No proxy can forge a wrong answer that still looks right; a world model can, when asked. The
effect asks it through the prompt, the way world conditions do: the firing call's action
carries an instruction to answer plausibly but wrongly in the described way. Later prompts
show that turn with its instruction, so the world model knows the observation was a lie and
the true state holds again. A ``sticky`` lie adds a condition for every later call instead:
stay consistent with what step N reported, as if it were true.

Both are ``WorldCondition`` objects, so they reach the prompt, the turn and the record (its
``conditions``) like any other condition, and the record's ``faults`` names the effect.
"""

from __future__ import annotations

from aw_mcp.episode.episode import WorldCondition
from aw_mcp.faults.scenario import MisleadEffect, MisleadWrongness

WRONGNESS: dict[MisleadWrongness, str] = {
    "stale": "show the state as it was before the most recent change (an old value, as a "
    "stale cache would return it)",
    "missing-row": "leave exactly one item (row, line, entry) out of the listing",
    "off-by-one": "make the count or number that matters one more or one less than the truth",
    "false-success": "report that the change succeeded, although nothing changed: the world "
    "stays exactly as it was",
}
LIE_PREFIX = "MISLEAD"  # heads the instruction, so a record says at a glance which turn lied


def wrongness_text(effect: MisleadEffect) -> str:
    if effect.instruction and effect.instruction.strip():
        return effect.instruction.strip().rstrip(".")
    assert effect.wrongness is not None  # the model's validator demands one of the two
    return WRONGNESS[effect.wrongness]


def mislead_conditions(effect: MisleadEffect, source: str, call_index: int) -> list[WorldCondition]:
    """The instruction for the firing call; for a sticky lie, also the condition that keeps
    every later call consistent with it."""
    how = wrongness_text(effect)
    conditions = [
        WorldCondition(
            text=f"{LIE_PREFIX}: the observation of this step must look correct and complete "
            f"but be wrong: {how}. Give no hint that anything is wrong.",
            source=source,
            since_call=call_index,
            until_call=call_index,
        )
    ]
    if effect.sticky:
        conditions.append(
            WorldCondition(
                text=f"Step {call_index}'s observation was wrong on purpose ({how}); keep every "
                "later observation consistent with it, as if it were the truth.",
                source=source,
                since_call=call_index + 1,
            )
        )
    return conditions
