"""Simulated recursive-critique studies with planted per-level accuracies (METHODS.md M3).

Used by the tests (known truth) and by the demo seeding. The sampling tree is the paper's
(Figure 4) with configurable counts: per question ``counts[0]`` responses, ``counts[l]``
critiques of level l, all on the *first two* outputs of level l − 1. Ids are assigned
level by level, so within every group of siblings the chain's inputs have the lowest ids.

The model, per question q (drawn once: a difficulty quantile U_q ~ Uniform(0, 1)):

* accuracy of level l on q: p_lq = F_l⁻¹(U_q), F_l the Beta distribution with mean
  ``accuracy[l]`` and SD ``spread`` (p_lq = accuracy[l] when spread = 0). The same U_q
  for every level and author makes a hard question hard everywhere (the reason intervals
  are clustered by question); E[p_lq] = accuracy[l] exactly, so the planted level
  accuracy is the population value the estimates target.
* a response is correct with probability p_0q, independently given q. A level-l critique
  whose two inputs hold k ∈ {0, 1, 2} correct finals is correct with probability

      r_k = p_lq + w_q (k/2 − π_q),   π_q = accuracy of the inputs' level on q,

  w_q = min(``input_weight``, (1 − p_lq)/(1 − π_q), p_lq/π_q) (so 0 ≤ r_k ≤ 1). Each
  input is correct with probability π_q given q, so E[k/2 | q] = π_q (linearity; the two
  need not be independent) and the critique's accuracy on q is still exactly p_lq, while
  it depends on its inputs the way the paper's Table 5 shows (both correct → high, both
  wrong → low); ``input_weight`` = 0 makes critiques ignore their inputs' correctness.
* a correct output's final is the gold option; a wrong one's is a uniformly drawn wrong
  option, or — a wrong critique that follows a wrong input (probability 1 −
  ``neither_rate``) — that input's final (its own wrong option if that final is
  unparseable). ``unparsed_rate`` of the wrong outputs have an unparseable final (None).
* choice of a critique: a correct critique picks a correct input (uniformly if both are)
  unless it says "neither" (probability ``neither_rate``; always when no input is
  correct); a wrong critique picks a wrong input it follows (above), else "neither".
* confidence: floor(c_l) + Bernoulli(frac(c_l)), mean exactly ``confidence[l]``;
  time: log-normal with mean ``minutes[l]`` (σ = 0.4 on the log scale).

Modes: "human" and "ai" (one author kind everywhere); "human_ai" — the paper's Table 3:
an AI chain (``counts``, ``ai_accuracy``) plus ``human_counts[l]`` human outputs per level:
independent human responses, and human critiques of level l on the AI's level-(l−1) pair
(humans never feed the chain). Human accuracies are ``accuracy``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from estimators.critique.records import (
    OPTIONAL_FIELDS,
    CritiqueStudy,
    OutputRecord,
    QuestionRecord,
)

MODES = ("human", "ai", "human_ai")
LOG_SD_TIME = 0.4


@dataclass(frozen=True)
class CritiqueDesign:
    n_questions: int = 64
    counts: tuple[int, ...] = (7, 5, 3, 1)
    accuracy: tuple[float, ...] = (0.55, 0.65, 0.72, 0.78)
    n_options: int = 4
    domains: tuple[str, ...] = ("math", "english")
    spread: float = 0.15
    neither_rate: float = 0.1
    confidence: tuple[float, ...] = (3.2, 3.5, 3.8, 4.0)
    minutes: tuple[float, ...] = (16.0, 15.0, 14.0, 13.0)
    mode: str = "human"
    ai_accuracy: tuple[float, ...] | None = None
    human_counts: tuple[int, ...] | None = None
    unparsed_rate: float = 0.0
    gold_share: float = 1.0
    input_weight: float = 0.6
    n_annotators: int | None = None

    @property
    def top_level(self) -> int:
        return len(self.counts) - 1

    def check(self) -> None:
        """Raise ValueError naming the first impossible field."""
        n_lv = len(self.counts)
        if self.n_questions < 1:
            raise ValueError("n_questions: need at least 1")
        if n_lv < 1 or any(int(c) != c or c < 0 for c in self.counts):
            raise ValueError(f"counts: non-negative integers per level, got {self.counts}")
        if any(c < 2 for c in self.counts[:-1]):
            raise ValueError(f"counts: every level below the top needs ≥ 2 outputs (the "
                             f"next level critiques two of them), got {self.counts}")
        if self.mode not in MODES:
            raise ValueError(f"mode: one of {MODES}, got {self.mode!r}")
        per_level = {"accuracy": self.accuracy, "confidence": self.confidence,
                     "minutes": self.minutes}
        if self.mode == "human_ai":
            per_level["ai_accuracy"] = self.ai_accuracy
            per_level["human_counts"] = self.human_counts
        for name, values in per_level.items():
            if values is None or len(values) != n_lv:
                raise ValueError(f"{name}: one value per level ({n_lv}), got {values}")
        for name in ("accuracy", "ai_accuracy"):
            values = getattr(self, name)
            if name == "ai_accuracy" and self.mode != "human_ai":
                continue
            for lv, p in enumerate(values):
                if not 0 < p < 1:
                    raise ValueError(f"{name}[{lv}]: must lie strictly in (0, 1), got {p}")
                if self.spread > 0 and self.spread ** 2 >= p * (1 - p):
                    raise ValueError(f"spread: {self.spread} is too large for {name}[{lv}] = "
                                     f"{p} (need spread² < p(1 − p))")
        if any(not 1 <= c <= 5 for c in self.confidence):
            raise ValueError(f"confidence: means in [1, 5], got {self.confidence}")
        if any(m <= 0 for m in self.minutes):
            raise ValueError(f"minutes: positive means, got {self.minutes}")
        if self.n_options < 2:
            raise ValueError(f"n_options: need at least 2, got {self.n_options}")
        for name in ("neither_rate", "unparsed_rate", "gold_share", "input_weight"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name}: must lie in [0, 1], got {getattr(self, name)}")
        if self.spread < 0:
            raise ValueError(f"spread: must be ≥ 0, got {self.spread}")
        if self.n_annotators is not None:
            need = (max(self.human_counts or (0,)) if self.mode == "human_ai"
                    else max(c + 2 * lv for lv, c in enumerate(self.counts)))
            if self.mode != "ai" and self.n_annotators < need:
                raise ValueError(f"n_annotators: these counts need at least {need} "
                                 f"annotators, got {self.n_annotators}")
        if not self.domains:
            raise ValueError("domains: need at least one")


@dataclass(frozen=True, eq=False)
class SimulatedCritique:
    """A simulated study, its records (question and output records, e.g. for seeding
    demo rows) and its truth: ``question_accuracy[q, l]`` = p_lq of the human outputs
    (mode "ai": of the AI), ``ai_question_accuracy`` the AI's in mode "human_ai"."""

    study: CritiqueStudy
    design: CritiqueDesign
    records: tuple[list[QuestionRecord], list[OutputRecord]]
    question_accuracy: np.ndarray
    ai_question_accuracy: np.ndarray | None = None


def _level_accuracy(u: np.ndarray, means: tuple[float, ...], spread: float) -> np.ndarray:
    """p_lq = Beta⁻¹(U_q) with the level's mean and SD ``spread`` (Q × levels)."""
    means_arr = np.asarray(means, dtype=float)
    if spread == 0:
        return np.broadcast_to(means_arr, (len(u), len(means_arr))).copy()
    k = means_arr * (1 - means_arr) / spread ** 2 - 1
    return np.asarray(stats.beta.ppf(u[:, None], means_arr * k, (1 - means_arr) * k))


class _Builder:
    def __init__(self, n_questions: int) -> None:
        self.next_id = 1
        self.cols: dict[str, list[np.ndarray]] = {k: [] for k in OutputRecord._fields
                                             if k not in OPTIONAL_FIELDS}
        self.annotator: list[np.ndarray] = []
        self.n_questions = n_questions

    def add(self, level: int, finals: np.ndarray, choice: np.ndarray, parents: np.ndarray,
            confidence: np.ndarray, time_ms: np.ndarray, ai: bool,
            who: np.ndarray | None = None) -> np.ndarray:
        """Append a Q × count block (``who``: the annotators, Q × count, or None); returns
        its ids (Q × count)."""
        q_n, count = finals.shape
        ids = self.next_id + np.arange(q_n * count).reshape(q_n, count)
        self.next_id += q_n * count
        c = self.cols
        c["id"].append(ids.ravel())
        c["question"].append(np.repeat(np.arange(q_n), count))
        c["level"].append(np.full(q_n * count, level))
        c["parent_a"].append(np.repeat(parents[:, 0], count))
        c["parent_b"].append(np.repeat(parents[:, 1], count))
        c["final"].append(finals.ravel())
        c["choice"].append(choice.ravel())
        c["confidence"].append(confidence.ravel())
        c["time_ms"].append(time_ms.ravel())
        c["author"].append(np.full(q_n * count, ai))
        self.annotator.append(np.full(q_n * count, -1) if who is None else who.ravel())
        return ids


def _block(rng: np.random.Generator, design: CritiqueDesign, level: int, count: int,
           p: np.ndarray, gold: np.ndarray,
           inputs: tuple[np.ndarray, np.ndarray, np.ndarray] | None):
    """Finals and choices of a Q × count block. ``inputs``: (finals, correct, accuracy π_q)
    of the two inputs (Q × 2, Q × 2, Q), None for responses."""
    q_n = len(p)
    k = design.n_options
    if inputs is None:
        p_right = np.broadcast_to(p[:, None], (q_n, count))
    else:
        pi = inputs[2]
        with np.errstate(divide="ignore", invalid="ignore"):
            w = np.minimum.reduce([np.full(q_n, design.input_weight),
                                   np.where(pi < 1, (1 - p) / (1 - pi), np.inf),
                                   np.where(pi > 0, p / pi, np.inf)])
        share = inputs[1].sum(axis=1) / 2
        p_right = np.broadcast_to((p + w * (share - pi))[:, None], (q_n, count))
    right = rng.random((q_n, count)) < p_right
    wrong_option = (gold[:, None] + rng.integers(1, k, (q_n, count))) % k
    choice = np.full((q_n, count), -1)
    if inputs is None:
        finals = np.where(right, gold[:, None], wrong_option)
    else:
        in_final, in_right = inputs[0], inputs[1]
        coin = rng.integers(0, 2, (q_n, count))
        says_neither = rng.random((q_n, count)) < design.neither_rate
        n_right = in_right.sum(axis=1)[:, None]
        # A correct critique picks a correct input (uniformly if both are).
        correct_pick = np.where(n_right == 2, coin, np.where(in_right[:, :1], 0, 1))
        # A wrong critique follows a wrong input (uniformly if both are wrong).
        wrong_pick = np.where(n_right == 0, coin, np.where(in_right[:, :1], 1, 0))
        can_follow = (n_right < 2) & ~says_neither
        follow = ~right & can_follow
        choice = np.where(right & (n_right > 0) & ~says_neither, correct_pick, choice)
        choice = np.where(follow, wrong_pick, choice)
        followed_final = np.take_along_axis(in_final, np.where(follow, wrong_pick, 0), axis=1)
        # an unparseable input has no answer to follow: the critique gives its own
        followed_final = np.where(followed_final < 0, wrong_option, followed_final)
        finals = np.where(right, gold[:, None], np.where(follow, followed_final, wrong_option))
    unparsed = ~right & (rng.random((q_n, count)) < design.unparsed_rate)
    finals = np.where(unparsed, -1, finals)
    c = design.confidence[level]
    confidence = np.floor(c) + (rng.random((q_n, count)) < c - np.floor(c))
    time_ms = design.minutes[level] * 60000.0 * np.exp(
        LOG_SD_TIME * rng.standard_normal((q_n, count)) - LOG_SD_TIME ** 2 / 2)
    return finals, choice, right, confidence, time_ms


def simulate_critique(design: CritiqueDesign, seed: int) -> SimulatedCritique:
    """One simulated study (model: module docstring); deterministic given ``seed``."""
    design.check()
    rng = np.random.default_rng(seed)
    q_n = design.n_questions
    n_lv = design.top_level + 1
    gold = rng.integers(0, design.n_options, q_n)
    u = rng.random(q_n)
    p_main = _level_accuracy(u, design.accuracy, design.spread)
    p_ai = (_level_accuracy(u, design.ai_accuracy, design.spread)
            if design.mode == "human_ai" and design.ai_accuracy is not None else None)
    has_gold = np.zeros(q_n, dtype=bool)
    has_gold[rng.permutation(q_n)[:round(design.gold_share * q_n)]] = True
    b = _Builder(q_n)
    chain_ai = design.mode != "human"
    chain_p = p_ai if p_ai is not None else p_main
    none2 = np.full((q_n, 2), -1)
    chain_inputs = None  # (finals, correct, π_q, ids) of the chain pair of the level below
    order = None
    if design.n_annotators is not None:  # a separate stream: the outputs stay the same
        arng = np.random.default_rng([seed, 1])
        order = np.argsort(arng.random((n_lv, q_n, design.n_annotators)), axis=-1)

    def who(lv: int, count: int, chain: bool) -> np.ndarray | None:
        """The platform's rule: output i of level l of the chain by annotator π[2l + i] of
        the question (nobody critiques a chain holding their output, nor writes twice at a
        level); human outputs beside an AI chain by π[i] of a fresh order per level."""
        if order is None or (chain and chain_ai):
            return None
        start = 2 * lv if chain else 0
        return order[0 if chain else lv, :, start:start + count]

    for lv in range(n_lv):
        blk = _block(rng, design, lv, design.counts[lv], chain_p[:, lv], gold,
                     None if chain_inputs is None else chain_inputs[:3])
        parents = none2 if chain_inputs is None else chain_inputs[3]
        ids = b.add(lv, blk[0], blk[1], parents, blk[3], blk[4], chain_ai,
                    who(lv, design.counts[lv], True))
        if design.mode == "human_ai" and design.human_counts is not None \
                and design.human_counts[lv] > 0:
            hb = _block(rng, design, lv, design.human_counts[lv], p_main[:, lv], gold,
                        None if chain_inputs is None else chain_inputs[:3])
            b.add(lv, hb[0], hb[1], parents, hb[3], hb[4], False,
                  who(lv, design.human_counts[lv], False))
        if lv + 1 < n_lv:
            chain_inputs = (blk[0][:, :2], blk[2][:, :2], chain_p[:, lv], ids[:, :2])
    c = {k: np.concatenate(v) for k, v in b.cols.items()}
    c["annotator"] = np.concatenate(b.annotator)
    domains = design.domains
    questions = [QuestionRecord(int(q), int(gold[q]) if has_gold[q] else None,
                                domains[q % len(domains)]) for q in range(q_n)]

    def opt(x: int) -> int | None:
        return None if x < 0 else int(x)

    outputs = [OutputRecord(int(i), int(q), int(lv), opt(a), opt(pb), opt(f), opt(ch),
                            float(cf), float(t), "ai" if ai else "human", None, opt(who_))
               for i, q, lv, a, pb, f, ch, cf, t, ai, who_ in zip(
                   c["id"], c["question"], c["level"], c["parent_a"], c["parent_b"],
                   c["final"], c["choice"], c["confidence"], c["time_ms"], c["author"],
                   c["annotator"], strict=True)]
    study = CritiqueStudy.from_records(questions, outputs)
    return SimulatedCritique(study=study, design=design, question_accuracy=p_main,
                             ai_question_accuracy=p_ai, records=(questions, outputs))
