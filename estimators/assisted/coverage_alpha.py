"""Coverage of Krippendorff's α's interval (per arm and pooled on the assisted dashboard,
:func:`estimators.assisted.agreement.krippendorff_alpha_nominal`) by simulation with known
agreement (issue 18; docs/coverage.md "Assisted: Krippendorff's α").

    .venv/bin/python manage.py coverage_tables assisted --alpha [--studies N] [--former M]
        [--write docs/coverage.md]

Generator (a known agreement structure): S sentences, each with a consensus verdict c_s
drawn from the verdict shares π (Accurate, Inaccurate, Can't assess); each of its m ratings
is c_s with probability √a and otherwise an independent draw from π. Two ratings of one
sentence then agree with probability a + (1 − a) Σ π_c², two ratings anywhere with
probability Σ π_c², so D_o = (1 − a)(1 − Σ π²), D_e = 1 − Σ π² and the population α is
exactly **a** (a test checks it against α of a very large sample). π is balanced
(0.6 / 0.3 / 0.1), skewed (0.85 / 0.12 / 0.03: most sentences clearly accurate) or very
skewed (0.95 / 0.04 / 0.01), the regime where few ratings disagree at all.

Intervals at 95 %: the default (the profile likelihood of the rating patterns with the
cut-off t² on Satterthwaite's ν, :mod:`estimators.assisted.alpha_likelihood`), the same
likelihood with the χ²₁ cut-off and with F(1, S − 1)'s (t on S − 1 degrees of freedom), all
on every study of a cell, computed for all studies at once by the dashboard's own
:func:`estimators.assisted.agreement.alpha_of_counts` (the function
``krippendorff_alpha_nominal`` calls for one study; a test checks they agree); and, on the
first ``n_former`` studies, the former default: BCa percentiles of 500 sentence resamples
(:func:`bca_interval`). Where fewer than ``MIN_ALPHA_MINORITY`` ratings fall outside the
most common verdict (or no two ratings disagree) the dashboard says α's interval is
unreliable; the table gives coverage where it shows no such note, and how often it does.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import stats

from estimators.assisted.agreement import MIN_ALPHA_MINORITY, _alpha_parts, alpha_of_counts
from estimators.assisted.alpha_likelihood import cutoff
from estimators.numerics.bootstrap import cluster_count_chunks
from estimators.numerics.coverage_doc import command

ALPHA_HEADING = ("## Assisted: Krippendorff's alpha (α), profile likelihood of the rating "
                 "patterns")
SHARES = {"balanced": (0.6, 0.3, 0.1), "skewed": (0.85, 0.12, 0.03),
          "very skewed": (0.95, 0.04, 0.01)}
ALPHAS = (0.2, 0.5, 0.8)
SENTENCES = (20, 50, 100, 200, 400)
RATINGS_PER_SENTENCE = (2, 3)
N_RESAMPLES = 500  # the former default's sentence resamples, as the dashboard drew them
FLOOR = 0.935
LEVEL = 0.95
CHUNK = 1000  # studies simulated at once


def simulate_ratings(rng: np.random.Generator, n_sentences: int, n_ratings: int,
                     alpha: float, shares: tuple[float, ...], n_studies: int | None = None
                     ) -> np.ndarray:
    """(n_sentences, n_ratings) verdict codes with population α = ``alpha`` (docstring);
    (n_studies, n_sentences, n_ratings) with ``n_studies``."""
    lead = () if n_studies is None else (n_studies,)
    k = len(shares)
    consensus = rng.choice(k, (*lead, n_sentences), p=shares)
    keep = rng.random((*lead, n_sentences, n_ratings)) < math.sqrt(alpha)
    noise = rng.choice(k, (*lead, n_sentences, n_ratings), p=shares)
    return np.where(keep, consensus[..., None], noise)


def study_figures(ratings: np.ndarray, k: int, level: float = LEVEL) -> dict[str, np.ndarray]:
    """Per study of ``ratings`` (studies, S, m): α̂, whether the dashboard shows the interval
    without a note, and the default interval together with the χ²₁ and t_{S−1} variants
    (those where it is shown) — every study at once through the dashboard's own
    :func:`~estimators.assisted.agreement.alpha_of_counts` (what
    :func:`~estimators.assisted.agreement.krippendorff_alpha_nominal` calls for one study),
    the variants with its ``crit``."""
    n_studies, s, _ = ratings.shape
    counts = (ratings[..., None] == np.arange(k)).sum(axis=2).astype(float)  # (B, S, k)
    fig = alpha_of_counts(counts, interval=True, level=level)
    ok = np.isfinite(fig.alpha)
    shown = fig.interval_reliable & ok
    out = {"alpha": fig.alpha, "shown": shown, "ok": ok, "default": (fig.lower, fig.upper)}
    for name, crit in (("chi2", stats.chi2.ppf(level, 1)),
                       ("t_sentences", float(cutoff(np.array(s - 1.0), level)))):
        lo, hi = np.full(n_studies, np.nan), np.full(n_studies, np.nan)
        if shown.any():
            there = alpha_of_counts(counts[shown], interval=True, level=level, crit=crit)
            lo[shown], hi[shown] = there.lower, there.upper
        out[name] = (lo, hi)
    return out


def bca_interval(unit: np.ndarray, values: np.ndarray, *, seed: int,
                 level: float = LEVEL) -> tuple[float, float]:
    """The former default: Efron's BCa percentiles of ``N_RESAMPLES`` sentence resamples
    α*_b (drawn by ``cluster_count_chunks`` from ``seed``, as the dashboard drew them),

        z₀ = Φ⁻¹((#{α*_b < α̂} + ½ #{α*_b = α̂}) / B),
        a = Σ_u (ᾱ₍.₎ − α₍u₎)³ / (6 [Σ_u (ᾱ₍.₎ − α₍u₎)²]^{3/2}),
        bounds = the Φ(z₀ + (z₀ + z_q) / (1 − a (z₀ + z_q))) quantiles of the α*_b,

    α₍u₎ the delete-one-sentence jackknife values."""
    k = int(values.max()) + 1
    n_units = int(unit.max()) + 1
    counts = np.zeros((n_units, k))
    np.add.at(counts, (unit, values), 1)
    m = counts.sum(axis=1)
    diag = (counts * (counts - 1)).sum(axis=1) / (m - 1)
    estimate = float(_alpha_parts(diag.sum(), counts.sum(axis=0))[0])
    reps = np.concatenate([_alpha_parts(w @ diag, w @ counts)[0] for w in
                           cluster_count_chunks(n_units, N_RESAMPLES, seed, dtype=float)])
    reps = reps[np.isfinite(reps)]
    if not reps.size:
        return math.nan, math.nan
    jack = _alpha_parts(diag.sum() - diag, counts.sum(axis=0) - counts)[0]
    jack = jack[np.isfinite(jack)]
    below = (np.sum(reps < estimate) + 0.5 * np.sum(reps == estimate)) / reps.size
    z0 = float(stats.norm.ppf(np.clip(below, 0.5 / reps.size, 1 - 0.5 / reps.size)))
    dev = jack.mean() - jack
    spread = float((dev ** 2).sum())
    acc = float((dev ** 3).sum()) / (6 * spread ** 1.5) if spread > 0 else 0.0
    zq = stats.norm.ppf([(1 - level) / 2, (1 + level) / 2])
    den = 1 - acc * (z0 + zq)
    with np.errstate(divide="ignore"):
        q = np.where(den > 0, stats.norm.cdf(z0 + (z0 + zq) / np.where(den > 0, den, 1)),
                     [0.0, 1.0])
    lo, hi = np.quantile(reps, q)
    return float(lo), float(hi)


def alpha_cell(shares: tuple[float, ...], alpha: float, n_sentences: int, n_ratings: int,
               n_studies: int, n_former: int = 0, *, seed: int = 0) -> dict[str, float]:
    """Coverage over ``n_studies`` studies of one cell: of the default over every study
    with an interval ("default_all"), where the dashboard shows no note ("default") and
    where it does ("default_noted"), of
    the χ²₁ and t_{S−1} cut-offs there ("chi2", "t_sentences"), of the former BCa on the
    first ``n_former`` studies where shown and where noted ("former", "former_noted"); mean
    widths where shown ("width", "former_width"); the share of studies with the note
    ("note") and the counts."""
    rng = np.random.default_rng([seed, n_sentences, n_ratings, int(alpha * 100),
                                 int(shares[0] * 100)])
    ratings, parts = [], []
    for start in range(0, n_studies, CHUNK):  # bounded memory
        r = simulate_ratings(rng, n_sentences, n_ratings, alpha, shares,
                             min(CHUNK, n_studies - start))
        parts.append(study_figures(r, len(shares)))
        if start < n_former:
            ratings.append(r)
    fig = {key: (np.concatenate([p[key][0] for p in parts]),
                 np.concatenate([p[key][1] for p in parts])) if isinstance(parts[0][key], tuple)
           else np.concatenate([p[key] for p in parts]) for key in parts[0]}
    ratings = np.concatenate(ratings) if ratings else np.zeros((0, n_sentences, n_ratings))
    shown, ok = fig["shown"], fig["ok"]

    def covered(name: str, where: np.ndarray) -> float:
        lo, hi = fig[name]
        return float(((lo <= alpha) & (alpha <= hi))[where].mean()) if where.any() \
            else math.nan

    out = {"default_all": covered("default", ok), "default": covered("default", shown),
           "default_noted": covered("default", ok & ~shown), "n_noted": int((ok & ~shown).sum()),
           "chi2": covered("chi2", shown), "t_sentences": covered("t_sentences", shown),
           "note": 1 - shown.sum() / max(ok.sum(), 1), "n": int(ok.sum()),
           "n_shown": int(shown.sum())}
    lo, hi = fig["default"]
    out["width"] = float((hi - lo)[shown].mean()) if shown.any() else math.nan
    unit = np.repeat(np.arange(n_sentences), n_ratings)
    hits, widths, where = [], [], []
    for i in np.flatnonzero(ok[:n_former]):
        f_lo, f_hi = bca_interval(unit, ratings[i].ravel(), seed=int(i))
        hits.append(f_lo <= alpha <= f_hi)
        widths.append(f_hi - f_lo)
        where.append(shown[i])
    hits, widths, where = np.array(hits, bool), np.array(widths), np.array(where, bool)
    out["former"] = float(hits[where].mean()) if where.any() else math.nan
    out["former_width"] = float(widths[where].mean()) if where.any() else math.nan
    out["former_noted"] = float(hits[~where].mean()) if (~where).any() else math.nan
    out["n_former"], out["n_former_noted"] = int(where.sum()), int((~where).sum())
    return out


def _summary(label: str, values: list[float]) -> str:
    v = np.array([x for x in values if math.isfinite(x)] or [math.nan])
    return (f"| {label} | {100 * v.min():.1f} | {100 * np.median(v):.1f} | "
            f"{100 * v.max():.1f} | {int((v < FLOOR).sum())} | {v.size} |")


def alpha_table(n_studies: int = 4000, n_former: int = 600, seed: int = 0) -> str:
    """The Markdown section of docs/coverage.md."""
    t0 = time.time()
    cells = [(name, alpha, m, s, alpha_cell(shares, alpha, s, m, n_studies, n_former,
                                            seed=seed))
             for name, shares in SHARES.items() for alpha in ALPHAS
             for m in RATINGS_PER_SENTENCE for s in SENTENCES]
    se = 100 * math.sqrt(0.95 * 0.05 / n_studies)
    se_former = 100 * math.sqrt(0.95 * 0.05 / max(n_former, 1))
    enough = max(1, n_studies // 4)  # studies without a note for a cell to count
    enough_former = max(1, n_former // 4)
    counted = [c for *_, c in cells if c["n_shown"] >= enough]
    former = [c for *_, c in cells if c["n_former"] >= enough_former]
    lines = [
        ALPHA_HEADING, "",
        f"Generated by `{command('assisted')} --alpha --studies {n_studies} "
        f"--former {n_former} --seed {seed} --write docs/coverage.md` "
        f"({time.time() - t0:.0f} s). Simulated studies with known agreement: {n_studies} "
        f"per cell (Monte-Carlo SE ≈ {se:.1f} points at 95 %); the former interval on the "
        f"first {n_former} of them (SE ≈ {se_former:.1f}). Generator: S sentences with a "
        "consensus verdict drawn from the verdict shares π; each of a sentence's m ratings "
        "is the consensus with probability √a, else a fresh draw from π — the population α "
        "is exactly a (`estimators/assisted/coverage_alpha.py`). Grid: π balanced 0.6 / "
        "0.3 / 0.1, skewed 0.85 / 0.12 / 0.03, very skewed 0.95 / 0.04 / 0.01; a ∈ {0.2, "
        "0.5, 0.8}; m ∈ {2, 3}; S ∈ {20, 50, 100, 200, 400}. **Default**: the profile "
        "likelihood of the sentences' rating patterns — every possible pattern allowed, "
        "seen or not — cut at t² on Satterthwaite's degrees of freedom of the "
        "delete-one-sentence jackknife (`estimators/assisted/alpha_likelihood.py`). The "
        "same likelihood cut at χ²₁ and at t² on S − 1 degrees of freedom shows why the "
        f"default's cut-off. **Former**: BCa percentiles of {N_RESAMPLES} sentence "
        "resamples. **Note**: the dashboard says α's interval is unreliable where fewer "
        f"than {MIN_ALPHA_MINORITY} ratings fall outside the most common verdict, or no "
        "two ratings of a sentence disagree; coverage \"where shown\" counts the other "
        f"studies, in cells with at least {enough} of them ({enough_former} for the "
        "former).", "",
        "Where the dashboard shows the interval without a note (coverage in %):", "",
        "| interval | min | median | max | cells < 93.5 % | cells |",
        "|---|---|---|---|---|---|",
        _summary(f"former: BCa, {N_RESAMPLES} sentence resamples",
                 [c["former"] for c in former]),
        _summary("likelihood, χ²₁ cut-off", [c["chi2"] for c in counted]),
        _summary("likelihood, t on S − 1", [c["t_sentences"] for c in counted]),
        _summary("**likelihood, t on Satterthwaite's ν (default)**",
                 [c["default"] for c in counted]),
        "",
    ]
    ratio = [c["width"] / c["former_width"] for c in former if c["former_width"] > 0]
    noted = [c["default_noted"] for *_, c in cells if c["n_noted"] >= enough] or [math.nan]
    former_noted = [c["former_noted"] for *_, c in cells
                    if c["n_former_noted"] >= enough_former] or [math.nan]
    worst = sorted((c["default"], name, a, m, s) for name, a, m, s, c in cells
                   if c["n_shown"] >= enough)[:3]
    widths = (f"The default is {100 * (np.median(ratio) - 1):+.0f} % wider than the former "
              f"interval in the median cell ({100 * (min(ratio) - 1):+.0f} % to "
              f"{100 * (max(ratio) - 1):+.0f} %). ") if ratio else ""
    lines += [
        widths + "Lowest cells where no note is shown: "
        + "; ".join(f"{100 * v:.1f} % ({name}, α = {a:g}, {m} ratings per sentence, {s} "
                    "sentences)" for v, name, a, m, s in worst) + ".", "",
        f"Where the note shows, the default covered {100 * min(noted):.1f}–"
        f"{100 * max(noted):.1f} % (median {100 * np.median(noted):.1f} %, "
        f"{sum(v < FLOOR for v in noted)} of {len(noted)} cells below 93.5 %; cells with at "
        f"least {enough} such studies); the former {100 * min(former_noted):.1f}–"
        f"{100 * max(former_noted):.1f} % (median {100 * np.median(former_noted):.1f} %). "
        "There α rests on "
        "a handful of disagreements, and how far the likelihood's promise holds depends on "
        "patterns too rare to check from the study itself.", "",
        "Every cell (coverage in %; width: the mean width where shown; note: share of "
        "studies where the dashboard says the interval is unreliable; a blank: too few "
        "studies):", "",
        "| π | α | m | S | note | default, where shown | width | χ²₁ | t on S − 1 | former "
        "BCa | former width | default, where noted | former, where noted |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, a, m, s, c in cells:
        here, there = c["n_shown"] >= enough, c["n_former"] >= enough_former
        noted, former_noted = c["n_noted"] >= enough, c["n_former_noted"] >= enough_former
        cols = [f"{100 * c['default']:.1f}" if here else "",
                f"{c['width']:.3f}" if here else "",
                f"{100 * c['chi2']:.1f}" if here else "",
                f"{100 * c['t_sentences']:.1f}" if here else "",
                f"{100 * c['former']:.1f}" if there else "",
                f"{c['former_width']:.3f}" if there else "",
                f"{100 * c['default_noted']:.1f}" if noted else "",
                f"{100 * c['former_noted']:.1f}" if former_noted else ""]
        lines.append(f"| {name} | {a:g} | {m} | {s} | {100 * c['note']:.0f} % | "
                     + " | ".join(cols) + " |")
    return "\n".join(lines) + "\n"
