"""Coverage of Krippendorff's α's interval (per arm and pooled on the assisted dashboard,
:func:`estimators.assisted.agreement.krippendorff_alpha_nominal`) by simulation with known
agreement (issue 18; docs/coverage.md "Assisted: Krippendorff's α").

    python -m estimators.assisted.coverage --alpha [--write docs/coverage.md]

Generator (a known agreement structure): S sentences, each with a consensus verdict c_s
drawn from the verdict shares π (Accurate, Inaccurate, Can't assess); each of its m ratings
is c_s with probability a and otherwise an independent draw from π. Two ratings of one
sentence then agree with probability a² + (1 − a²) Σ π_c², two ratings anywhere with
probability Σ π_c², so D_o = (1 − a²)(1 − Σ π²), D_e = 1 − Σ π² and the population α is
exactly **a²** (a test checks it against α of a very large sample). π is balanced
(0.6 / 0.3 / 0.1), skewed (0.85 / 0.12 / 0.03: most sentences clearly accurate) or very
skewed (0.95 / 0.04 / 0.01), the regime where few ratings disagree at all.

Intervals at 95 %, from the same 500 sentence resamples the dashboard draws: the default
(BCa, :mod:`estimators.assisted.agreement`) and the former percentile interval. Where
fewer than ``MIN_ALPHA_MINORITY`` ratings fall outside the most common verdict (or no two
ratings disagree) the dashboard says α's interval is unreliable; the table gives coverage
where it shows no such note, and how often it does.
"""

from __future__ import annotations

import math
import time

import numpy as np

from estimators.assisted.agreement import (
    MIN_ALPHA_MINORITY,
    _alpha_parts,
    krippendorff_alpha_nominal,
)
from estimators.numerics.bootstrap import cluster_count_chunks

ALPHA_HEADING = "## Assisted: Krippendorff's alpha (α), sentence bootstrap with BCa"
SHARES = {"balanced": (0.6, 0.3, 0.1), "skewed": (0.85, 0.12, 0.03),
          "very skewed": (0.95, 0.04, 0.01)}
ALPHAS = (0.2, 0.5, 0.8)
SENTENCES = (20, 50, 100, 200, 400)
RATINGS_PER_SENTENCE = (2, 3)
N_RESAMPLES = 500  # as the dashboard (annotations.assisted.services.analysis)


def simulate_ratings(rng: np.random.Generator, n_sentences: int, n_ratings: int,
                     alpha: float, shares: tuple[float, ...]) -> np.ndarray:
    """(n_sentences, n_ratings) verdict codes with population α = ``alpha`` (docstring)."""
    k = len(shares)
    consensus = rng.choice(k, n_sentences, p=shares)
    keep = rng.random((n_sentences, n_ratings)) < math.sqrt(alpha)
    noise = rng.choice(k, (n_sentences, n_ratings), p=shares)
    return np.where(keep, consensus[:, None], noise)


def alpha_cell(shares: tuple[float, ...], alpha: float, n_sentences: int, n_ratings: int,
               n_studies: int, *, seed: int = 0) -> dict[str, float]:
    """Over ``n_studies`` studies: coverage of the default ("bca") and former
    ("percentile") intervals over the studies with an interval, the default's coverage
    where the dashboard shows no note ("bca_reliable"), the share of studies with the note
    ("note"), and the number with an interval ("n")."""
    rng = np.random.default_rng([seed, n_sentences, n_ratings, int(alpha * 100),
                                 int(shares[0] * 100)])
    unit = np.repeat(np.arange(n_sentences), n_ratings)
    hits = {"bca": 0, "percentile": 0, "bca_reliable": 0}
    n = reliable = 0
    for i in range(n_studies):
        values = simulate_ratings(rng, n_sentences, n_ratings, alpha, shares).ravel()
        got = krippendorff_alpha_nominal(unit, values, n_resamples=N_RESAMPLES, seed=i)
        if not math.isfinite(got.lower):
            continue
        n += 1
        inside = got.lower <= alpha <= got.upper
        hits["bca"] += inside
        if got.interval_reliable:
            reliable += 1
            hits["bca_reliable"] += inside
        lo, hi = percentile_interval(unit, values, seed=i)
        hits["percentile"] += lo <= alpha <= hi
    return {"bca": hits["bca"] / max(n, 1), "percentile": hits["percentile"] / max(n, 1),
            "bca_reliable": hits["bca_reliable"] / reliable if reliable else math.nan,
            "note": 1 - reliable / max(n, 1), "n": n, "n_reliable": reliable}


def percentile_interval(unit: np.ndarray, values: np.ndarray, *, seed: int,
                        level: float = 0.95) -> tuple[float, float]:
    """The former interval: plain percentiles of the same sentence resamples (the same seed
    draws the same resamples as the default)."""
    k = int(values.max()) + 1
    n_units = int(unit.max()) + 1
    counts = np.zeros((n_units, k))
    np.add.at(counts, (unit, values), 1)
    m = counts.sum(axis=1)
    diag = (counts * (counts - 1)).sum(axis=1) / (m - 1)
    reps = np.concatenate([_alpha_parts(w @ diag, w @ counts)[0] for w in
                           cluster_count_chunks(n_units, N_RESAMPLES, seed, dtype=float)])
    lo, hi = np.nanquantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def alpha_table(n_studies: int = 600, seed: int = 0) -> str:
    """The Markdown section of docs/coverage.md."""
    t0 = time.time()
    cells = [(name, alpha, m, s, alpha_cell(shares, alpha, s, m, n_studies, seed=seed))
             for name, shares in SHARES.items() for alpha in ALPHAS
             for m in RATINGS_PER_SENTENCE for s in SENTENCES]
    se = 100 * math.sqrt(0.95 * 0.05 / n_studies)
    enough = min(100, max(1, n_studies // 4))  # studies without a note for a cell to count
    lines = [
        ALPHA_HEADING, "",
        f"Generated by `python -m estimators.assisted.coverage --alpha --studies {n_studies} "
        f"--seed {seed} --write docs/coverage.md` ({time.time() - t0:.0f} s). {n_studies} "
        f"simulated studies per cell (Monte-Carlo SE ≈ {se:.1f} points at 95 %), each with "
        f"the dashboard's {N_RESAMPLES} sentence resamples. Generator: S sentences with a "
        "consensus verdict drawn from the verdict shares π; each of a sentence's m ratings "
        "is the consensus with probability a, else a fresh draw from π — the population α "
        "is exactly a² (`estimators/assisted/coverage_alpha.py`). π: balanced 0.6 / 0.3 / "
        "0.1, skewed 0.85 / 0.12 / 0.03, very skewed 0.95 / 0.04 / 0.01. **Default**: BCa "
        "(bias-corrected and accelerated) percentiles of the sentence resamples, the "
        "acceleration from the delete-one-sentence jackknife. **Former**: plain "
        "percentiles of the same resamples. **Note**: the dashboard says α's interval is "
        f"unreliable where fewer than {MIN_ALPHA_MINORITY} ratings fall outside the most "
        "common verdict, or no two ratings of a sentence disagree; \"where shown\" is the "
        f"default's coverage in the other studies (cells with fewer than {enough} such "
        "studies are left blank).", "",
    ]
    cond = np.array([c["bca_reliable"] for *_, c in cells if c["n_reliable"] >= enough]
                    or [math.nan])
    bca = np.array([c["bca"] for *_, c in cells])
    pct = np.array([c["percentile"] for *_, c in cells])
    lines += [
        "| interval | min | median | cells < 93.5 % | cells |", "|---|---|---|---|---|",
        f"| former percentile, every study | {100 * pct.min():.1f} | "
        f"{100 * np.median(pct):.1f} | {int((pct < 0.935).sum())} | {pct.size} |",
        f"| **BCa (default)**, every study | {100 * bca.min():.1f} | "
        f"{100 * np.median(bca):.1f} | {int((bca < 0.935).sum())} | {bca.size} |",
        f"| **BCa where the dashboard shows it without a note** | {100 * cond.min():.1f} | "
        f"{100 * np.median(cond):.1f} | {int((cond < 0.935).sum())} | {cond.size} |", ""]
    worst = sorted(((c["bca_reliable"], name, a, m, s) for name, a, m, s, c in cells
                    if c["n_reliable"] >= enough))[:3]
    lines += ["Lowest cells where no note is shown: " + "; ".join(
        f"{100 * v:.1f} % ({name}, α = {a:g}, {m} ratings per sentence, {s} sentences)"
        for v, name, a, m, s in worst) + ".", "",
        "Every cell (coverage in %; note: share of studies where the dashboard says the "
        "interval is unreliable):", "",
        "| π | α | ratings per sentence | sentences | former percentile | BCa | "
        "BCa where shown | note |", "|---|---|---|---|---|---|---|---|"]
    for name, a, m, s, c in cells:
        where = f"{100 * c['bca_reliable']:.1f}" if c["n_reliable"] >= enough else ""
        lines.append(f"| {name} | {a:g} | {m} | {s} | {100 * c['percentile']:.1f} | "
                     f"{100 * c['bca']:.1f} | {where} | {100 * c['note']:.0f} % |")
    return "\n".join(lines) + "\n"
