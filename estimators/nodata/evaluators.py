"""Evaluators for the EV protocol (``protocol.Evaluator``) and their generation strategies.

An evaluator = a labeller (ỹ′) + a generator of similar datapoints (x′). Here:

* ``ModelEvaluator`` — a fitted scikit-learn classifier labels x (``predict`` on
  ``featurize(x)``, batched once in ``prepare``); optionally it lies about the label with
  probability ``label_noise`` each round (the paper's Table 3 evaluator: 1/10); a
  ``Generator`` strategy supplies x′.
* ``CommitmentsEvaluator`` — commitments made elsewhere (an offline LLM run, a vendor), imported
  from JSONL by ``commitments.read_commitments``; a missing (item, round) fails that round.

Generators (``Generator.similar(x, label, rng) → x′ or None``):

* ``PickFromPool`` — pick uniformly among pool datapoints whose key matches x's (the strategy
  that worked for LLMs: picking from data rather than generating). With the pool = every
  string and key = the total rubric this is the paper's "oracle" generator, and the same
  distribution as the published code's rejection sampling (uniform random strings until one
  matches).
* ``Unreliable`` — another generator that, with probability p, returns a uniformly random pool
  datapoint instead (the paper's "probabilistic liar").

The platform's AI-provider evaluator implements ``protocol.Evaluator`` the same way.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .protocol import Commitment, Datapoint


class Generator(Protocol):
    """Produces x′ similar to x for a claimed label, or None when it finds none."""

    def similar(self, x: Datapoint, label: int, rng: np.random.Generator) -> Datapoint | None: ...


@dataclass
class PickFromPool:
    """Uniform pick among ``pool`` members with ``key(member) == query(x, label)``.

    ``query`` defaults to ``key(x)`` (similar = same key as x). Buckets are built once; without
    a ``query``, the bucket of each hashable x is remembered (``key`` is deterministic). One
    ``rng.integers(len(bucket))`` per call that finds a non-empty bucket, none otherwise.
    """

    pool: Sequence[Datapoint]
    key: Callable[[Datapoint], Hashable]
    query: Callable[[Datapoint, int], Hashable] | None = None
    _buckets: dict = field(init=False, repr=False)
    _bucket_of: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        buckets: dict[Hashable, list] = defaultdict(list)
        for member in self.pool:
            buckets[self.key(member)].append(member)
        self._buckets = dict(buckets)

    def similar(self, x: Datapoint, label: int, rng: np.random.Generator) -> Datapoint | None:
        if self.query is not None:
            bucket = self._buckets.get(self.query(x, label))
        else:
            try:
                bucket = self._bucket_of[type(x), x]  # 1, 1.0 and True stay apart
            except KeyError:
                bucket = self._bucket_of[type(x), x] = self._buckets.get(self.key(x))
            except TypeError:  # unhashable datapoint: no memo
                bucket = self._buckets.get(self.key(x))
        if not bucket:
            return None
        return bucket[int(rng.integers(len(bucket)))]


@dataclass
class Unreliable:
    """``generator``'s x′, replaced w.p. ``p`` by a uniformly random member of ``pool``.

    The draw order follows the published code: generate first, then one uniform draw.
    """

    generator: Generator
    p: float
    pool: Sequence[Datapoint]

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"p: a probability lies in [0, 1], got {self.p}")

    def similar(self, x: Datapoint, label: int, rng: np.random.Generator) -> Datapoint | None:
        out = self.generator.similar(x, label, rng)
        if rng.random() < self.p:
            return self.pool[int(rng.integers(len(self.pool)))]
        return out


@dataclass
class ModelEvaluator:
    """A fitted classifier with ``predict`` labels x; ``generator`` supplies x′.

    ``featurize(x)`` gives one feature row. Labels must come out as 0/1 (ints or "0"/"1").
    ``label_noise`` = probability of committing to the opposite label in a round (one uniform
    draw per round from the evaluator's Generator, before the generator's draws).
    """

    model: Any
    featurize: Callable[[Datapoint], Sequence[float]]
    generator: Generator
    label_noise: float = 0.0
    _labels: dict = field(default_factory=dict, init=False, repr=False)
    _memo: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.label_noise <= 1.0:
            raise ValueError(f"label_noise: a probability lies in [0, 1], got {self.label_noise}")

    def predict(self, data: Sequence[Datapoint]) -> np.ndarray:
        """The model's labels for ``data`` as an int array of 0/1 (one batched ``predict`` for
        the datapoints not seen before; hashable datapoints are remembered)."""
        labels: list[int] = []
        todo: list[int] = []
        for i, x in enumerate(data):
            try:
                known = self._memo.get((type(x), x))
            except TypeError:
                known = None
            if known is None:
                todo.append(i)
                known = 0
            labels.append(known)
        if todo:
            raw = self.model.predict(np.asarray([self.featurize(data[i]) for i in todo],
                                                dtype=float))
            fresh = np.asarray(raw).astype(int)
            bad = ~np.isin(fresh, (0, 1))
            if bad.any():
                raise ValueError(f"model: predicted label {fresh[bad][0]!r} is not 0 or 1")
            for i, y in zip(todo, fresh.tolist(), strict=True):
                labels[i] = y
                with contextlib.suppress(TypeError):  # unhashable: not remembered
                    self._memo[(type(data[i]), data[i])] = y
        return np.asarray(labels, dtype=int)

    def prepare(self, items: Sequence[tuple[Hashable, Datapoint]]) -> None:
        labels = self.predict([x for _, x in items]).tolist()
        self._labels = dict(zip([item for item, _ in items], labels, strict=True))

    def commit(self, item: Hashable, x: Datapoint, round_index: int,
               rng: np.random.Generator) -> Commitment:
        label = self._labels.get(item)
        if label is None:
            label = int(self.predict([x])[0])
        if self.label_noise and rng.random() < self.label_noise:
            label = 1 - label
        similar = self.generator.similar(x, label, rng)
        if similar is None:
            return Commitment.invalid("the generator found no similar datapoint")
        return Commitment(label, similar)


@dataclass
class CommitmentsEvaluator:
    """Replays imported commitments keyed by (item, round); a missing one fails its round."""

    commitments: Mapping[tuple[str, int], Commitment]
    source: str = "the commitments file"

    def prepare(self, items: Sequence[tuple[Hashable, Datapoint]]) -> None:
        return None

    def commit(self, item: Hashable, x: Datapoint, round_index: int,
               rng: np.random.Generator) -> Commitment:
        found = self.commitments.get((str(item), round_index))
        if found is None:
            return Commitment.invalid(
                f"{self.source} has no commitment for item {item!s} round {round_index}")
        return found
