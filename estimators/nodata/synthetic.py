"""The paper's synthetic setup: 12-bit strings, its two rubrics, its evaluators and liars.

Rubrics (paper Table 1; σ = majority vote):

* in-phenomenon (IP): c0 = even number of zeros (the published code; the paper says ones — the
  same criterion on 12-bit strings, since zeros = 12 − ones), c1 = starts with 0 XOR contains
  10101 (clauses c1a, c1b), c2 = more than five ones;
* out-of-phenomenon (OOP): c0 = contains 111, c1 = ends with 1, c2 = contains 110001.

Evaluators (the published notebook's): a decision tree (scikit-learn defaults,
random_state=123) fitted on the IP training split, reading the string *as one number*
(``as_number``: the decimal value, which the tree stores as float32 — the published tree reads
a numpy string array the same way), or, beside it, on the 12 bits as features (``as_bits``).
The generator always works with the IP rubric; the verifier checks with the rubric of the
data set under test.

Generators, all uniform picks over the 4 096 strings (the published code draws uniform strings
until one fits — the same distribution):

* ``oracle`` — same IP total evaluation C̄(x′) = C̄(x) (knows f);
* ``no_sigma`` (Lie 1, "σ unknown") — same number of satisfied IP criteria (C(x′) equal to C(x)
  up to a permutation of its bits);
* ``no_f`` (Lie 2, "f unknown") — the published code: the majority *bit* of x′ (tie → 1)
  equals the claimed label, i.e. it never looks at the rubric; ``no_f_text`` — the paper's
  words: any x′ with f(x′) = ỹ′ under the IP rubric;
* ``probabilistic(p)`` (Lie 3) — the oracle, replaced w.p. p by a uniform random string
  (the code's default p = 1/4; the paper's text says 1/10).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from itertools import product
from typing import TYPE_CHECKING

from .aggregators import majority_vote
from .criteria import contains, count_above, ends_with, even_count, starts_with, xor
from .evaluators import ModelEvaluator, PickFromPool, Unreliable
from .rubrics import Rubric
from .verifiers import ProgrammaticVerifier

if TYPE_CHECKING:
    from sklearn.tree import DecisionTreeClassifier

K = 12

IP_RUBRIC = Rubric((
    even_count("c0", "0"),
    xor("c1", starts_with("c1a", "0"), contains("c1b", "10101"),
        "starts with 0 or contains 10101, not both"),
    count_above("c2", "1", 5),
), majority_vote, "in-phenomenon")

#: The paper's Table 1 wording of c0 (even number of ones); equal to IP_RUBRIC on 12 bits.
IP_RUBRIC_TEXT = Rubric((even_count("c0", "1"),) + IP_RUBRIC.criteria[1:], majority_vote,
                        "in-phenomenon (paper's text)")

OOP_RUBRIC = Rubric((
    contains("c0", "111"),
    ends_with("c1", "1"),
    contains("c2", "110001"),
), majority_vote, "out-of-phenomenon")

RUBRICS = {"ip": IP_RUBRIC, "oop": OOP_RUBRIC}
_FILES = {("ip", "train"): "good_data_train_with_xor.json",
          ("ip", "test"): "good_data_test_with_xor.json",
          ("oop", "train"): "other_data_train_with_xor.json",
          ("oop", "test"): "other_data_test_with_xor.json"}


@cache
def load(phenomenon: str, split: str) -> tuple[tuple[str, int], ...]:
    """The shipped data set as ((bitstring, label), …); phenomenon "ip"/"oop", split
    "train"/"test"."""
    name = _FILES[(phenomenon, split)]
    rows = json.loads(resources.files(__package__).joinpath("data", name).read_text("utf-8"))
    return tuple((x, int(y)) for x, y in rows)


@cache
def universe(k: int = K) -> tuple[str, ...]:
    """Every k-bit string, in lexicographic order."""
    return tuple("".join(bits) for bits in product("01", repeat=k))


def as_number(x: str) -> list[float]:
    """The paper's feature: the bit string read as one decimal number."""
    return [float(x)]


def as_bits(x: str) -> list[float]:
    """The 12 bits as 12 features."""
    return [float(ch) for ch in x]


FEATURES = {"dt_number": as_number, "dt_bits": as_bits}


@cache
def fitted_tree(evaluator: str) -> DecisionTreeClassifier:
    """The decision tree of ``evaluator`` ("dt_number" as the paper, or "dt_bits") fitted on
    the IP training split with scikit-learn defaults and random_state=123.

    scikit-learn is imported here, not with the module: importing it costs about a second of
    CPU, which the rubrics, the data sets and the generators (an audit's demo data) never need.
    """
    from sklearn.tree import DecisionTreeClassifier

    featurize = FEATURES[evaluator]
    train = load("ip", "train")
    clf = DecisionTreeClassifier(random_state=123)
    clf.fit([featurize(x) for x, _ in train], [y for _, y in train])
    return clf


def _majority_bit(x: str) -> int:
    return majority_vote([int(ch) for ch in x])


@cache
def generator(name: str, p: float = 0.25):
    """The named generator (module docstring), built once per (name, p)."""
    pool = universe()
    total = IP_RUBRIC.total()
    if name == "oracle":
        return PickFromPool(pool, total.encode)
    if name == "no_sigma":
        return PickFromPool(pool, lambda s: sum(IP_RUBRIC.encode(s)))
    if name == "no_f":
        return PickFromPool(pool, _majority_bit, query=lambda x, label: label)
    if name == "no_f_text":
        return PickFromPool(pool, IP_RUBRIC.label, query=lambda x, label: label)
    if name == "probabilistic":
        return Unreliable(generator("oracle"), p, pool)
    raise ValueError(f"generator: unknown {name!r}")


@cache
def tree_evaluator(evaluator: str = "dt_number", gen: str = "oracle", *, p: float = 0.25,
                   label_noise: float = 0.0) -> ModelEvaluator:
    """A fitted tree with a named generator; ``label_noise`` = the lying evaluator's p.

    One instance per setting (it only remembers the tree's deterministic predictions)."""
    return ModelEvaluator(fitted_tree(evaluator), FEATURES[evaluator], generator(gen, p),
                          label_noise)


@cache
def verifier(phenomenon: str) -> ProgrammaticVerifier:
    """The programmatic verifier of the data set under test (shared: its memo of encodings
    then covers the 4 096 strings once for all runs)."""
    return ProgrammaticVerifier(RUBRICS[phenomenon])
