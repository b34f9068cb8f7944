"""Drafts from the context (engines/drafting.py): pure, no model."""

from __future__ import annotations

import pytest

from aw_mcp.engines.drafting import ContextDrafter, DraftSettings


def test_the_draft_is_what_followed_the_tail_before():
    drafter = ContextDrafter([1, 2, 3, 4, 5, 6, 9, 1, 2, 3])
    assert drafter.draft() == [4, 5, 6, 9]  # start_length 4
    assert drafter.draft(limit=2) == [4, 5]
    assert drafter.draft(limit=0) == []


def test_the_longest_tail_wins_over_a_more_recent_shorter_one():
    # "7 3" occurs last just before 8; "1 2 3" (longer) occurred earlier, before 4.
    drafter = ContextDrafter([1, 2, 3, 4, 4, 7, 3, 8, 8, 1, 2, 3])
    assert drafter.match() == (3, 3)
    assert drafter.draft(limit=1) == [4]


def test_of_equal_tails_the_most_recent_wins():
    drafter = ContextDrafter([5, 6, 1, 5, 6, 2, 5, 6])
    assert drafter.draft(limit=1) == [2]


def test_a_tail_shorter_than_min_match_drafts_nothing():
    drafter = ContextDrafter([1, 2, 9, 2], DraftSettings(min_match=2))
    assert drafter.match() is None  # only "2" occurred before, one token
    assert drafter.draft() == []
    assert ContextDrafter([1, 2, 9, 2], DraftSettings(min_match=1)).draft() == [9, 2]


def test_a_draft_may_run_into_the_tail_itself_but_not_past_the_sequence():
    drafter = ContextDrafter([7, 7, 7, 7])  # a periodic sequence predicts itself
    assert drafter.draft() == [7]


def test_appended_output_is_drafted_from_too():
    drafter = ContextDrafter([10, 11, 12, 13, 14])
    for token in [99, 10, 11]:
        drafter.append(token)
    assert drafter.draft() == [12, 13, 14, 99]
    drafter.extend(list(range(1000, 1600)))  # grows past its first buffer
    drafter.extend([10, 11])
    assert len(drafter) == 610
    assert drafter.draft(limit=3) == [1000, 1001, 1002]  # "99 10 11", the output's own copy


def test_the_length_grows_on_full_acceptance_and_shrinks_on_rejection():
    settings = DraftSettings(start_length=4, max_length=16)
    drafter = ContextDrafter([], settings)
    drafter.feedback(4, 4)
    assert drafter.length == 8
    drafter.feedback(8, 8)
    drafter.feedback(16, 16)
    assert drafter.length == 16  # capped
    drafter.feedback(16, 5)
    assert drafter.length == 6  # one more than what was accepted
    drafter.feedback(6, 0)
    assert drafter.length == 1
    assert (drafter.drafts, drafter.drafted, drafter.accepted) == (5, 50, 33)
    drafter.feedback(0, 0)  # no draft: nothing learnt
    assert drafter.drafts == 5


def test_rejected_first_tokens_raise_the_match_needed_until_a_draft_is_taken_whole():
    settings = DraftSettings(min_match=2, max_min_match=4)
    drafter = ContextDrafter([1, 2, 3, 9, 2, 3], settings)
    assert drafter.draft() == [9, 2, 3]
    for _ in range(5):
        drafter.feedback(1, 0)
    assert drafter.min_match == 4
    assert drafter.draft() == []  # "2 3" is too short a match now
    drafter.feedback(2, 2)
    assert drafter.min_match == 2
    assert drafter.draft() == [9, 2]


def test_settings_are_checked():
    with pytest.raises(ValueError):
        DraftSettings(min_match=0)
    with pytest.raises(ValueError):
        DraftSettings(start_length=20, max_length=16)
