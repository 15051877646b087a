"""Cluster bootstrap, vectorised: the sentence (item) bootstraps of the assisted figures
(curves, held-out thresholds, bands, results table, ECE, α) and the cluster counts they
draw. The rater-clustered reliance intervals are closed form since issue 18
(:mod:`estimators.numerics.clustered`: the rater percentile bootstrap covered 76–89 % with 5
raters per arm, docs/coverage.md).

A resample draws C clusters (items, or raters) with replacement from the C observed ones and
keeps all their observations. Instead of materialising resampled rows, each resample is a
vector of counts w_c (how often cluster c was drawn, Σ_c w_c = C; within each stratum when
strata are given), so a statistic built from per-cluster sums is, for all resamples at
once, one matrix product W @ sums (W: resamples × clusters; :func:`resampled_sums`).
Intervals are percentile intervals of the replicates (the paper's "95 % bootstrapped
CIs"); an undefined (NaN) replicate is left out.

The counts are drawn as a bincount of uniform draws (exactly multinomial(C, 1/C)), in chunks
of resamples so memory stays bounded; the generator is seeded, so results are reproducible.
A set of figures bootstrapped over the same clusters with the same integer seed draws the
same counts; inside :func:`shared_resamples` they are drawn once and reused (bit-identical
results, a fraction of the time: the assisted analysis runs some sixty item bootstraps).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

# Resamples are drawn in chunks of at most this many cluster draws (resamples × clusters).
_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class IntervalEstimate:
    """A point estimate with its interval (NaN everywhere when undefined)."""

    value: float
    lower: float
    upper: float

    @property
    def defined(self) -> bool:
        return math.isfinite(self.value)

    def as_dict(self, name: str) -> dict[str, float | None]:
        """``{name: value, name_lower: lower, name_upper: upper}``, None where undefined
        (JSON/CSV ready)."""
        return {name: _json_float(self.value), f"{name}_lower": _json_float(self.lower),
                f"{name}_upper": _json_float(self.upper)}

    def shifted(self, scale: float, offset: float) -> IntervalEstimate:
        """The interval of offset + scale·θ (bounds swap when scale < 0)."""
        lo, hi = offset + scale * self.lower, offset + scale * self.upper
        return IntervalEstimate(offset + scale * self.value, min(lo, hi), max(lo, hi))


UNDEFINED = IntervalEstimate(math.nan, math.nan, math.nan)


def _json_float(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _rng(seed: int | np.random.Generator) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level: must lie strictly between 0 and 1, got {level}")


def check_resamples(n_resamples: int) -> None:
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"n_resamples: need a positive integer, got {n_resamples}")


def encode(labels: ArrayLike, field: str) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values in sorted order, integer code of each entry) of a 1-D label array
    (ints or strings); raises naming ``field`` for missing entries."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{field}: need a 1-D array, got shape {arr.shape}")
    if arr.dtype == object:
        bad = np.array([v is None or (isinstance(v, float) and math.isnan(v)) for v in arr],
                       dtype=bool)
        if bad.any():
            raise ValueError(f"{field}[{int(np.argmax(bad))}]: missing value")
        arr = arr.astype(str) if all(isinstance(v, str) for v in arr) else arr
    elif arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(f"{field}[{int(np.argmax(np.isnan(arr)))}]: missing value")
    values, codes = np.unique(arr, return_inverse=True)
    return values, codes.reshape(-1)


def _groups(n_clusters: int, strata: ArrayLike | None) -> list[np.ndarray]:
    if n_clusters < 1:
        raise ValueError("n_clusters: need at least one cluster")
    if strata is None:
        return [np.arange(n_clusters)]
    _, codes = encode(strata, "strata")
    if codes.size != n_clusters:
        raise ValueError(f"strata: {codes.size} entries for {n_clusters} clusters")
    order = np.argsort(codes, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(codes[order])) + 1)


@dataclass
class _SharedCounts:
    max_cells: int
    cells: int = 0
    chunks: dict[tuple, list[np.ndarray]] = field(default_factory=dict)


_shared: contextvars.ContextVar[_SharedCounts | None] = contextvars.ContextVar(
    "bootstrap_shared_counts", default=None)


@contextlib.contextmanager
def shared_resamples(max_cells: int = 8_000_000) -> Iterator[None]:
    """Within the block, count matrices drawn for the same (clusters, resamples, integer
    seed, strata, dtype) are drawn once and reused — the same numbers the draws would give
    again, so every result is unchanged. At most ``max_cells`` cells are kept (8 bytes each as
    float: 64 MB by default); later draws past that are not kept. Draws from a Generator
    (whose state moves on) are never shared. Per thread (a context variable)."""
    token = _shared.set(_SharedCounts(max_cells))
    try:
        yield
    finally:
        _shared.reset(token)


def cluster_count_chunks(n_clusters: int, n_resamples: int, rng: int | np.random.Generator,
                         *, strata: ArrayLike | None = None,
                         dtype: type = np.int32) -> Iterator[np.ndarray]:
    """:func:`cluster_counts` in consecutive chunks of resamples (bounded memory) as
    ``dtype`` (float for a matrix product); the concatenated chunks equal
    ``cluster_counts`` with the same generator state. Inside :func:`shared_resamples` the
    chunks of an integer seed are read-only and may be shared with other callers."""
    check_resamples(n_resamples)
    shared = _shared.get()
    if shared is None or isinstance(rng, np.random.Generator):
        yield from _draw_chunks(n_clusters, n_resamples, _rng(rng), strata, dtype)
        return
    key = (n_clusters, n_resamples, int(rng), np.dtype(dtype).str,
           None if strata is None else np.asarray(strata).tobytes())
    kept = shared.chunks.get(key)
    if kept is None:
        cells = n_clusters * n_resamples
        if shared.cells + cells > shared.max_cells:  # too big to keep: streamed as usual
            yield from _draw_chunks(n_clusters, n_resamples, _rng(rng), strata, dtype)
            return
        kept = list(_draw_chunks(n_clusters, n_resamples, _rng(rng), strata, dtype))
        for chunk in kept:
            chunk.flags.writeable = False
        shared.chunks[key] = kept
        shared.cells += cells
    yield from kept


def _draw_chunks(n_clusters: int, n_resamples: int, rng: np.random.Generator,
                 strata: ArrayLike | None, dtype: type) -> Iterator[np.ndarray]:
    groups = _groups(n_clusters, strata)
    step = max(1, _CHUNK_CELLS // n_clusters)
    for start in range(0, n_resamples, step):
        b = min(step, n_resamples - start)
        picks = np.concatenate([g[rng.integers(0, g.size, size=(b, g.size))] for g in groups],
                               axis=1)
        flat = picks + (np.arange(b) * n_clusters)[:, None]
        yield np.bincount(flat.ravel(), minlength=b * n_clusters).reshape(
            b, n_clusters).astype(dtype)


def cluster_counts(n_clusters: int, n_resamples: int, rng: int | np.random.Generator, *,
                   strata: ArrayLike | None = None) -> np.ndarray:
    """How often each cluster is drawn in each resample: int32 array (n_resamples, n_clusters).

    Without strata each row is multinomial(C, 1/C) (C draws with replacement from all
    clusters); with ``strata`` (a code per cluster) each stratum of size C_s gets C_s draws
    from its own clusters, so stratum sizes stay fixed (arms of a between-subjects design)."""
    return np.concatenate(list(cluster_count_chunks(n_clusters, n_resamples, rng,
                                                    strata=strata)), axis=0)


def resampled_sums(sums: np.ndarray, n_resamples: int, rng: int | np.random.Generator, *,
                   strata: ArrayLike | None = None) -> np.ndarray:
    """W @ sums for cluster-count matrices W drawn chunk by chunk: (n_resamples, k) from
    per-cluster sums (n_clusters, k)."""
    return np.concatenate([w @ sums for w in cluster_count_chunks(
        sums.shape[0], n_resamples, rng, strata=strata, dtype=float)], axis=0)


def cluster_sums(cluster: np.ndarray, values: np.ndarray, n_clusters: int) -> np.ndarray:
    """Per-cluster column sums: (n_clusters, k) from integer codes (n,) and values (n, k)."""
    k = values.shape[1]
    flat = (cluster[:, None] * k + np.arange(k)[None, :]).ravel()
    return np.bincount(flat, weights=values.ravel(), minlength=n_clusters * k).reshape(
        n_clusters, k)


def percentile_interval(replicates: np.ndarray, level: float = 0.95) -> tuple[np.ndarray,
                                                                               np.ndarray]:
    """(lower, upper) percentile bounds per column, ignoring undefined (NaN) replicates;
    NaN for a column with no defined replicate."""
    check_level(level)
    reps = np.asarray(replicates, dtype=float)
    reps2 = reps.reshape(reps.shape[0], -1)
    lo = np.full(reps2.shape[1], np.nan)
    hi = np.full(reps2.shape[1], np.nan)
    ok = np.isfinite(reps2).any(axis=0)
    if ok.any():
        q = np.nanquantile(reps2[:, ok], [(1 - level) / 2, (1 + level) / 2], axis=0)
        lo[ok], hi[ok] = q[0], q[1]
    return lo.reshape(reps.shape[1:]), hi.reshape(reps.shape[1:])


def bootstrap_means(values: ArrayLike, *, n_resamples: int = 2000, level: float = 0.95,
                    seed: int | np.random.Generator = 0) -> list[IntervalEstimate]:
    """Item bootstrap of the column means of (n, k) ``values`` (one row per independent
    unit); a column holding NaN is undefined (UNDEFINED)."""
    check_level(level)
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    n, k = arr.shape
    if n == 0:
        return [UNDEFINED] * k
    defined = np.isfinite(arr).all(axis=0)
    out = [UNDEFINED] * k
    if not defined.any():
        return out
    sub = arr[:, defined]
    reps = resampled_sums(sub, n_resamples, seed) / n
    lo, hi = percentile_interval(reps, level)
    means = sub.mean(axis=0)
    for pos, j in enumerate(np.flatnonzero(defined)):
        out[j] = IntervalEstimate(float(means[pos]), float(lo[pos]), float(hi[pos]))
    return out
