"""Drafts from the context (engines/drafting.py): pure, no model."""

from __future__ import annotations

import pytest

from aw_mcp.engines.drafting import AnswerMemory, ContextDrafter, DraftSettings


def test_the_draft_is_what_followed_the_tail_before():
    drafter = ContextDrafter([1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5])
    assert drafter.draft() == [6, 7, 8, 9]  # start_length 4
    assert drafter.draft(limit=2) == [6, 7]
    assert drafter.draft(limit=0) == []


def test_a_short_match_drafts_no_more_tokens_than_it_had_less_one():
    assert ContextDrafter([1, 2, 3, 4, 5, 6, 9, 1, 2, 3]).draft() == [4, 5]  # 3 matched
    assert ContextDrafter([1, 2, 3, 4, 5, 6, 9, 2, 3]).draft() == [4]  # 2 matched


def test_the_longest_tail_wins_over_a_more_recent_shorter_one():
    # "7 3" occurs last just before 8; "1 2 3" (longer) occurred earlier, before 4.
    drafter = ContextDrafter([1, 2, 3, 4, 4, 7, 3, 8, 8, 1, 2, 3])
    found = drafter.match()
    assert found is not None and found[1:] == (3, 3)
    assert drafter.draft(limit=1) == [4]


def test_of_equal_tails_the_most_recent_wins():
    drafter = ContextDrafter([5, 6, 1, 5, 6, 2, 5, 6])
    assert drafter.draft(limit=1) == [2]


def test_a_tail_shorter_than_min_match_drafts_nothing():
    drafter = ContextDrafter([1, 2, 9, 2], DraftSettings(min_match=2))
    assert drafter.match() is None  # only "2" occurred before, one token
    assert drafter.draft() == []
    assert ContextDrafter([1, 2, 9, 2], DraftSettings(min_match=1)).draft() == [9]


def test_a_draft_may_run_into_the_tail_itself_but_not_past_the_sequence():
    drafter = ContextDrafter([7, 7, 7, 7])  # a periodic sequence predicts itself
    assert drafter.draft() == [7]


def test_appended_output_is_drafted_from_too():
    drafter = ContextDrafter([10, 11, 12, 13, 14])
    for token in [99, 10, 11]:
        drafter.append(token)
    assert drafter.draft() == [12]  # "10 11" matched: one token
    drafter.extend(list(range(1000, 1600)))  # grows past its first buffer
    drafter.extend([10, 11])
    assert len(drafter) == 610
    assert drafter.draft(limit=3) == [1000]  # the output's "10 11", the most recent


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
    assert drafter.draft() == [9]
    for _ in range(5):
        drafter.feedback(1, 0)
    assert drafter.min_match == 4
    assert drafter.draft() == []  # "2 3" is too short a match now
    drafter.feedback(2, 2)
    assert drafter.min_match == 2
    assert drafter.draft() == [9]


def test_settings_are_checked():
    with pytest.raises(ValueError):
        DraftSettings(min_match=0)
    with pytest.raises(ValueError):
        DraftSettings(start_length=20, max_length=16)


# -- drafts from other episodes' answers (AnswerMemory) ------------------------------------


def _memory(*answers: tuple[list[int], list[int]], **settings: int) -> AnswerMemory:
    memory = AnswerMemory(DraftSettings(**settings))
    for prompt, answer in answers:
        memory.remember(prompt, answer)
    return memory


def test_an_answer_to_the_same_call_in_another_episode_is_drafted():
    # Another episode's call ended "... 40 41" and was answered 50 51 52 53 54.
    memory = _memory(([1, 2, 3, 40, 41], [50, 51, 52, 53, 54]), memory_lead=3)
    assert memory.tokens().tolist() == [3, 40, 41, 50, 51, 52, 53, 54, -1]
    drafter = ContextDrafter([7, 3, 40, 41, 50], answers=memory.tokens())
    assert drafter.draft() == [51, 52, 53]  # "3 40 41 50" matched
    # Without the memory the context has nothing to draft from.
    assert ContextDrafter([7, 3, 40, 41, 50]).draft() == []


def test_a_draft_from_the_memory_stops_at_the_end_of_its_answer():
    memory = _memory(([40, 41], [50, 51]), ([60], [70, 71, 72]), memory_lead=2)
    drafter = ContextDrafter([9, 41, 50], DraftSettings(start_length=8), memory.tokens())
    assert drafter.draft() == [51]  # not the next answer's lead or tokens


def test_the_own_context_wins_a_tie_and_the_memory_a_longer_match():
    memory = _memory(([1, 2, 3], [4, 5, 6]), memory_lead=3)
    # The context has "2 3" followed by 9; the memory "1 2 3" followed by 4.
    tie = ContextDrafter([2, 3, 9, 0, 2, 3], answers=memory.tokens())
    assert tie.draft(limit=1) == [9]
    longer = ContextDrafter([2, 3, 9, 1, 2, 3], answers=memory.tokens())
    assert longer.draft(limit=1) == [4]


def test_a_guess_is_what_followed_in_the_episode_not_in_the_memory():
    memory = _memory(([2, 1], [6, 7]), memory_lead=2)
    assert ContextDrafter([2, 1, 6], answers=memory.tokens()).guess() is None
    assert ContextDrafter([2, 1, 6, 3, 0, 2, 1, 6], answers=memory.tokens()).guess() == 3


def test_a_guess_is_made_only_where_the_tail_was_seen_before():
    # The last token occurred before, its tail of three (the default step_tail) did not:
    # such a step is evaluated alone, with no guess beside it.
    assert ContextDrafter([6, 3, 6]).guess() is None
    assert ContextDrafter([6, 3, 6], DraftSettings(min_match=1, step_tail=1)).guess() == 3


def test_a_tail_is_seen_before_in_the_episodes_own_tokens_only():
    two = DraftSettings(step_tail=2)
    assert not ContextDrafter([1, 2, 3, 4], two).seen_before()
    assert not ContextDrafter([1, 2, 3, 1], two).seen_before()  # one token is not a tail of two
    assert ContextDrafter([1, 2, 3, 1, 2], two).seen_before()
    assert not ContextDrafter([1, 2, 3, 1, 2]).seen_before()  # a tail of three (the default)
    assert ContextDrafter([1, 2, 3, 0, 1, 2, 3]).seen_before()
    assert not ContextDrafter([1, 2], two).seen_before()
    # Not in the memory: another episode's answers do not change how this one is computed.
    memory = _memory(([5], [6, 7]), memory_lead=1)
    assert not ContextDrafter([0, 6, 7], two, answers=memory.tokens()).seen_before()
    # A guess taken extends the longest tail seen before: "5 6" -> 7, not the latest "6" -> 8.
    drafter = ContextDrafter([4, 5, 6, 7, 0, 6, 8, 0, 4, 5, 6])
    guess = drafter.guess()
    assert guess == 7
    drafter.append(guess)
    assert drafter.seen_before()
    assert ContextDrafter([1, 2, 6]).guess() is None  # a 6 never occurred before


def test_with_own_tails_a_draft_from_the_memory_stops_where_the_episode_never_was():
    memory = _memory(([7, 8, 9, 1, 2], [3, 4, 5, 6]), memory_lead=5)
    # The memory drafts 3 4 5 6 after "7 8 9 1 2"; the episode held "1 2 3" and "2 3 4",
    # never "3 4 5".
    context = [1, 2, 3, 4, 0, 7, 8, 9, 1, 2]
    assert ContextDrafter(context, answers=memory.tokens()).draft() == [3, 4, 5, 6]
    own = ContextDrafter(context, answers=memory.tokens(), own_tails=True)
    assert own.draft() == [3, 4]


def test_the_memory_keeps_the_newest_answers_within_its_budget():
    memory = _memory(memory_tokens=12, memory_lead=1)
    memory.remember([1], [10, 11])  # 3 tokens and a boundary
    memory.remember([2], [20, 21])
    memory.remember([1], [10, 11])  # given again: moved to the end, not kept twice
    assert memory.tokens().tolist() == [2, 20, 21, -1, 1, 10, 11, -1]
    memory.remember([3], [30, 31, 32])  # 5 more: over 12, the oldest goes
    assert memory.tokens().tolist() == [1, 10, 11, -1, 3, 30, 31, 32, -1]
    memory.remember([4], list(range(40, 52)))  # longer than the budget: not kept
    assert len(memory) == 2
    memory.remember([5], [])  # an empty answer: nothing to draft
    assert len(memory) == 2
    tokens = memory.tokens()
    memory.clear()
    assert len(memory) == 0 and memory.tokens().size == 0
    assert tokens.tolist() == [1, 10, 11, -1, 3, 30, 31, 32, -1]  # a drafter's copy stays


def test_no_memory_is_kept_with_a_zero_budget_or_drafted_without_context_drafts():
    assert len(_memory(([1], [2, 3]), memory_tokens=0)) == 0
    memory = _memory(([1, 2], [3, 4]))
    guesses_only = ContextDrafter([9, 1, 2], DraftSettings(from_context=False), memory.tokens())
    assert guesses_only.draft() == [] and guesses_only.guess() is None
    with pytest.raises(ValueError):
        DraftSettings(memory_tokens=-1)
