"""Values in real observations that no simulator can know, and how to mask them for scoring.

Some text in a real answer depends on when, not on what, the episode ran: the UTC time in
the names of the snapshot and console files Playwright MCP writes, and the real clock that
``get_current_time`` reads. A simulator can only invent them, so a fair exact-match or
similarity score compares both texts with those values masked (:func:`mask_volatile`), and
reports the raw score beside it. Values that follow from the world and the history (refs,
totals, order numbers of the Bookshop, commit hashes of a fixed seed) are NOT masked.
"""

from __future__ import annotations

import re

# (what, pattern, replacement); applied in order.
VOLATILE: list[tuple[str, re.Pattern[str], str]] = [
    (
        "the time in a Playwright MCP output file name",
        re.compile(r"\b(page|console)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.(yml|log)"),
        r"\1-<time>.\2",
    ),
    (
        "a clock reading with seconds (ISO 8601 with an offset)",
        re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)"),
        "<datetime>",
    ),
]


def mask_volatile(text: str) -> str:
    """``text`` with every value of :data:`VOLATILE` replaced by its placeholder."""
    for _what, pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text
