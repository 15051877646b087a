"""Criteria, rubrics, total rubrics, aggregators and relevant substrings (paper 004, Section 5),
and the shipped data against the rubrics that made them."""

from __future__ import annotations

import itertools

import pytest

from estimators.nodata.aggregators import AllOf, AnyOf, MajorityVote, all_of, any_of, majority_vote
from estimators.nodata.criteria import Criterion, contains, field_equals, starts_with, xor
from estimators.nodata.rubrics import Rubric
from estimators.nodata.substrings import whole, windows
from estimators.nodata.synthetic import IP_RUBRIC, IP_RUBRIC_TEXT, OOP_RUBRIC, load, universe


def test_a_criterion_gives_the_ints_zero_and_one():
    c = Criterion("truthy", lambda x: x)  # returns whatever it is given
    assert [c(v) for v in ("", "a", 0, 7, [], [1])] == [0, 1, 0, 1, 0, 1]


def test_xor_lists_its_clauses_and_is_one_when_exactly_one_holds():
    a, b = starts_with("a", "0"), contains("b", "101")
    c = xor("c", a, b)
    assert c.clauses == (a, b) and not c.is_total and a.is_total
    for x in ("0101", "0000", "1101", "1111"):
        assert c(x) == (a(x) != b(x))


def test_the_total_rubric_lists_each_xor_clause_before_the_xor():
    # given the paper's in-phenomenon rubric (Table 1: the total rubric has five entries)
    total = IP_RUBRIC.total()
    # then
    assert total.names == ("c0", "c1a", "c1b", "c1", "c2")
    assert OOP_RUBRIC.total().names == OOP_RUBRIC.names  # no non-linear criterion
    x = "011010101111"
    assert total.encode(x) == (IP_RUBRIC.criteria[0](x), 1, 1, 0, IP_RUBRIC.criteria[2](x))


def test_a_rubric_refuses_no_criteria_and_repeated_names():
    with pytest.raises(ValueError, match="at least one"):
        Rubric(())
    with pytest.raises(ValueError, match="repeated: a"):
        Rubric((contains("a", "1"), contains("a", "0")))
    with pytest.raises(ValueError, match="no aggregator"):
        Rubric((contains("a", "1"),)).label("1")


def test_majority_vote_breaks_ties_with_one_as_the_paper():
    assert majority_vote((1, 1, 0)) == 1 and majority_vote((0, 0, 1)) == 0
    assert majority_vote((1, 0)) == 1 and majority_vote((1, 1, 0, 0)) == 1
    assert MajorityVote(tie=0)((1, 0)) == 0


@pytest.mark.parametrize("bits", list(itertools.product((0, 1), repeat=3)))
def test_any_of_and_all_of(bits):
    assert any_of(bits) == int(1 in bits) and all_of(bits) == int(0 not in bits)
    assert AnyOf()(()) == 0 and AllOf()(()) == 1


def test_field_equals_reads_json_objects():
    c = field_equals("lang", "language", "fy")
    assert (c({"language": "fy"}), c({"language": "nl"}), c({}), c("fy")) == (1, 0, 0, 0)


def test_relevant_substrings():
    assert whole("0101") == ("0101",)
    assert windows(3)("01011") == ("010", "101", "011")
    assert windows(8)("0101") == ("0101",)
    with pytest.raises(ValueError, match="k:"):
        windows(0)


@pytest.mark.parametrize(("phenomenon", "rubric"), [("ip", IP_RUBRIC), ("oop", OOP_RUBRIC)])
@pytest.mark.parametrize("split", ["train", "test"])
def test_every_shipped_row_has_its_rubrics_majority_label(phenomenon, split, rubric):
    rows = load(phenomenon, split)
    assert len(rows) == {"train": 2000, "test": 498}[split]
    assert all(len(x) == 12 and set(x) <= {"0", "1"} for x, _ in rows)
    assert [y for _, y in rows] == [rubric.label(x) for x, _ in rows]
    assert sum(y for _, y in rows) * 2 == len(rows)  # balanced


def test_zeros_or_ones_in_c0_is_the_same_criterion_on_twelve_bits():
    # The code counts zeros, the paper's Table 1 says ones: on 12-bit strings they agree.
    assert all(IP_RUBRIC.encode(x) == IP_RUBRIC_TEXT.encode(x) for x in universe())
    assert IP_RUBRIC.criteria[0]("0") != IP_RUBRIC_TEXT.criteria[0]("0")  # not on odd lengths
