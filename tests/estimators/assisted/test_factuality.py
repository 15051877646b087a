"""The factuality scale's binarisation and the per-item human label (METHODS.md M2), against
the rules written out label by label."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimators.assisted.factuality import (
    ACCURATE,
    CANT_ASSESS,
    INACCURATE,
    LABELS,
    SKIPPED,
    gold_accurate,
    item_human_correct,
    majority_verdicts,
    ratings_correct,
    verdicts,
)


def test_binarisation_follows_m2():
    # given every label code and the display names
    labels = ["accurate", "inaccurate", "unsupported", "disputed", "no_attribution",
              "cant_assess", "skip", " Accurate ", "Doesn't require attribution",
              "Can't confidently assess"]
    # then only "accurate" is Accurate, the three others are Inaccurate, can't-assess is its
    # own verdict and skip is excluded
    assert verdicts(labels).tolist() == [ACCURATE, INACCURATE, INACCURATE, INACCURATE,
                                         INACCURATE, CANT_ASSESS, SKIPPED, ACCURATE,
                                         INACCURATE, CANT_ASSESS]
    assert set(LABELS) == {"accurate", "inaccurate", "unsupported", "disputed",
                           "no_attribution", "cant_assess", "skip"}


def test_unknown_label_names_its_index():
    with pytest.raises(ValueError, match=r"labels\[2\]: unknown factuality label 'mostly true'"):
        verdicts(["accurate", "disputed", "mostly true"])


def test_gold_refuses_cant_assess_and_skip():
    assert gold_accurate(["accurate", "unsupported", "inaccurate"]).tolist() == [True, False,
                                                                                 False]
    with pytest.raises(ValueError, match=r"gold\[1\]: a gold label must be accurate or "
                                         r"inaccurate, got 'cant_assess'"):
        gold_accurate(["accurate", "cant_assess"])


def test_cant_assess_is_always_wrong():
    v = verdicts(["cant_assess", "cant_assess", "accurate", "disputed"])
    assert ratings_correct(v, np.array([True, False, True, False])).tolist() == [
        False, False, True, True]


def _majority_by_hand(votes: list[int]) -> int:
    """The paper's rule, written out: the modal verdict; a tie for the mode → Inaccurate."""
    votes = [v for v in votes if v != SKIPPED]
    if not votes:
        return SKIPPED
    counts = {v: votes.count(v) for v in set(votes)}
    top = max(counts.values())
    modes = [v for v, k in counts.items() if k == top]
    return modes[0] if len(modes) == 1 else INACCURATE


def test_majority_ties_count_as_inaccurate():
    # given items with a clear majority, an Accurate/Inaccurate tie, an Accurate/can't-assess
    # tie, a can't-assess majority, only skips, and no rating at all
    item = np.array([0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 4])
    v = np.array([ACCURATE, ACCURATE, INACCURATE, ACCURATE, INACCURATE, ACCURATE, CANT_ASSESS,
                  CANT_ASSESS, CANT_ASSESS, ACCURATE, SKIPPED])
    # then
    assert majority_verdicts(item, v, 6).tolist() == [ACCURATE, INACCURATE, INACCURATE,
                                                      CANT_ASSESS, SKIPPED, SKIPPED]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([ACCURATE, INACCURATE,
                                                               CANT_ASSESS, SKIPPED])),
                max_size=60),
       st.lists(st.booleans(), min_size=6, max_size=6))
def test_item_labels_match_the_rules_item_by_item(ratings, gold):
    # given ratings (item, verdict) and a gold label per item
    item = np.array([i for i, _ in ratings], dtype=int)
    v = np.array([x for _, x in ratings], dtype=int)
    gold = np.array(gold)
    maj = item_human_correct(item, v, gold, n_items=6, rule="majority")
    ind = item_human_correct(item, v, gold, n_items=6, rule="individual")
    # then, item by item
    for i in range(6):
        votes = [x for j, x in ratings if j == i and x != SKIPPED]
        if not votes:
            assert np.isnan(maj[i]) and np.isnan(ind[i])
            continue
        right = ACCURATE if gold[i] else INACCURATE
        assert maj[i] == float(_majority_by_hand(votes) == right)
        assert ind[i] == pytest.approx(sum(x == right for x in votes) / len(votes))


def test_item_index_out_of_range_is_named():
    with pytest.raises(ValueError, match=r"item\[1\]: 7 is not an item index in 0..4"):
        item_human_correct([0, 7], [ACCURATE, ACCURATE], np.ones(5, bool), n_items=5)
    with pytest.raises(ValueError, match="rule"):
        item_human_correct([0], [ACCURATE], np.ones(5, bool), n_items=5, rule="mean")


def test_curly_apostrophes_and_spacing_read_as_the_trace_parser_reads_them():
    # given the spellings the trace parser accepts (curly apostrophes, extra spaces)
    labels = ["Can\u2019t confidently assess", "Doesn\u2019t  require attribution",
              "can\u2018t confidently assess", "Does not require attribution", "No attribution"]
    # then the factuality scale reads them too
    assert verdicts(labels).tolist() == [CANT_ASSESS, INACCURATE, CANT_ASSESS, INACCURATE,
                                         INACCURATE]
