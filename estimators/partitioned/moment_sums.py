"""The clustered variance's statistics as exact integer sums that a study can keep up to date
(:class:`MomentSums`): the moments of :class:`~estimators.partitioned.clustered.ClusterMoments`
of every scope a recompute reads — the whole study, each stratum, the inverse-probability
weighted labels (any per-class weights), each confidence band and each cut — summed over
item clusters, so that a change to some items changes them by those items' new terms less
their old ones (``plus``), and the sums kept that way equal the sums computed afresh, bit for
bit.

Per label l and AI system j, its **kind** t = 4·yes + code, code = present | match << 1, and
its contribution y(t) to the cluster's x = (S_o, T_o, S_c, T_c) (METHODS.md M1), with the
complementary score scaled by K − 1 so that every entry is an integer (:func:`kind_scores`):

* K ≥ 3 — a "yes" is an ordinary label: (match, 1 − match, 0, 0); a "no" a complementary one:
  (0, 0, s, K − 1 − s) with s = (K−1)(present − match) + (K−2)(1 − present) (a missing
  prediction scores (K−2)/(K−1));
* K = 2 — every label is ordinary: a "yes" (match, 1 − match, 0, 0), a "no"
  (present − match, 1 − present + match, 0, 0).

A **cluster** is an item's labels that carry one stratum (an item's queries carry its
stratum; one whose queries disagree counts once per stratum). With x_i the sum of its
labels' y, per stratum h: ``first`` = Σ_i x_i, ``second`` = Σ_i x_i x_iᵀ, ``labelled`` =
the clusters, ``several`` = those with two or more ordinary labels. The second moments are
counted over ordered pairs of labels of one cluster — Σ_i x_i x_iᵀ = Σ_{l, l' ∈ i}
y(t_l) y(t_l')ᵀ — by the pairs' kinds, then contracted with y: one ``bincount`` per system.
Per class pair (c, c') the same over labels of classes c and c' (``class_second``): the
moments with per-class weights w are Σ_cc' w_c w_c' of them (IPW), and with w = 1 those of
the whole study. Per confidence band scope (:data:`BAND_SCOPES`: band b alone, b = 1…7,
then each cut — bands ≥ c + 1, c = 0…6) of each banded system the same over the labels of
the scope.

Integers: a recompute from the labels and the maintained sums give the same
``ClusterMoments`` exactly (:meth:`MomentSums.moments` divides once, by the same scale), so
the estimates of the two are identical, not merely close."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from estimators.partitioned.clustered import ClusterMoments

KINDS = 8  # 4·yes + present | match << 1
BANDS = 7  # confidence bands 1…7 (0: none)
BAND_SCOPES = 2 * BANDS  # band b alone (index b − 1), then cut c: bands ≥ c + 1 (BANDS + c)


def kind_scores(k: int) -> np.ndarray:
    """y(t) of every kind t (8 × 4 integers; module docstring)."""
    y = np.zeros((KINDS, 4), dtype=np.int64)
    for t in range(KINDS):
        yes, present, match = t >> 2, t & 1, (t >> 1) & 1
        if yes:
            y[t, :2] = match, 1 - match
        elif k >= 3:
            s = (k - 1) * (present - match) + (k - 2) * (1 - present)
            y[t, 2:] = s, k - 1 - s
        else:
            y[t, :2] = present - match, 1 - present + match
    return y


def _scale(k: int) -> np.ndarray:
    return np.array([1.0, 1.0, k - 1.0, k - 1.0]) if k >= 3 else np.ones(4)


def band_scope_members(scope: int) -> np.ndarray:
    """The bands (1…7) of scope ``scope`` (:data:`BAND_SCOPES`)."""
    bands = np.arange(1, BANDS + 1)
    return bands == scope + 1 if scope < BANDS else bands >= scope - BANDS + 1


@dataclass(frozen=True)
class LabelArrays:
    """A set of labels: per label its cluster id (any integer; labels of one item share
    it), stratum (index into ``strata``), class ``k``, answer (``yes``), per AI system its
    code present | match << 1 (``code``, labels × systems) and, for the banded systems,
    its confidence band 0…7 (``band``, labels × banded systems, those systems' columns of
    ``code`` in ``band_columns``; None: no bands)."""

    cluster: np.ndarray
    stratum: np.ndarray
    strata: tuple[str, ...]
    k: np.ndarray
    yes: np.ndarray
    code: np.ndarray
    band: np.ndarray | None = None
    band_columns: tuple[int, ...] = ()

    def subset(self, keep: np.ndarray) -> LabelArrays:
        return LabelArrays(self.cluster[keep], self.stratum[keep], self.strata, self.k[keep],
                           self.yes[keep], self.code[keep],
                           None if self.band is None else self.band[keep], self.band_columns)


@dataclass(frozen=True)
class MomentSums:
    """The integer sums of the module docstring for one set of labels (strata on axis 0 of
    the per-stratum arrays, in ``strata`` order; systems on the last axis)."""

    k: int
    strata: tuple[str, ...]
    first: np.ndarray  # (H, 4, J)
    second: np.ndarray  # (H, 4, 4, J)
    labelled: np.ndarray  # (H,)
    several: np.ndarray  # (H,)
    class_first: np.ndarray  # (K, 4, J)
    class_second: np.ndarray  # (K, K, 4, 4, J)
    band_first: np.ndarray | None = None  # (BAND_SCOPES, 4, Jb)
    band_second: np.ndarray | None = None  # (BAND_SCOPES, 4, 4, Jb)
    band_labelled: np.ndarray | None = None  # (BAND_SCOPES, Jb)
    band_several: np.ndarray | None = None  # (BAND_SCOPES, Jb)

    # --- arithmetic ------------------------------------------------------------------------
    def _aligned(self, strata: tuple[str, ...]) -> dict[str, np.ndarray]:
        """The per-stratum arrays laid out on ``strata`` (a superset of this one's)."""
        index = [strata.index(h) for h in self.strata]
        out = {}
        for name in ("first", "second", "labelled", "several"):
            mine = getattr(self, name)
            wide = np.zeros((len(strata), *mine.shape[1:]), dtype=np.int64)
            wide[index] = mine
            out[name] = wide
        return out

    def plus(self, other: MomentSums, sign: int = 1) -> MomentSums:
        """These sums and ``other``'s times ``sign`` (±1): the sums of a set of clusters with
        ``other``'s added or taken away. Strata left with no cluster are dropped."""
        if other.k != self.k or other.first.shape[-1] != self.first.shape[-1]:
            raise ValueError("moment sums of different shapes cannot be added")
        strata = tuple(sorted(set(self.strata) | set(other.strata)))
        mine, theirs = self._aligned(strata), other._aligned(strata)
        summed = {name: mine[name] + sign * theirs[name] for name in mine}
        keep = (summed["labelled"] != 0) | np.any(summed["first"] != 0, axis=(1, 2))
        out = {name: value[keep] for name, value in summed.items()}
        bands = {}
        for f in fields(self):
            if f.name.startswith("class_") or f.name.startswith("band_"):
                a, b = getattr(self, f.name), getattr(other, f.name)
                bands[f.name] = None if a is None and b is None else (
                    (a if a is not None else 0) + sign * (b if b is not None else 0))
        return MomentSums(k=self.k, strata=tuple(h for h, kept in zip(strata, keep,
                                                                      strict=True) if kept),
                          **out, **bands)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MomentSums):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))

    __hash__ = None  # type: ignore[assignment]

    def fits(self, systems: int, banded: int) -> bool:
        """Whether these sums are of ``systems`` AI systems, ``banded`` of them with
        confidence bands (0: bands not read)."""
        return self.first.shape[-1] == systems and (
            not banded or self.band_first is not None and self.band_first.shape[-1] == banded)

    # --- what the estimators read ----------------------------------------------------------
    def moments(self, stratum: str | None = None, weights=None) -> ClusterMoments:
        """The :class:`ClusterMoments` of one stratum (None: the whole study) — or, with
        per-class ``weights`` (K floats), of the whole study's labels each weighted by its
        class's weight."""
        scale = _scale(self.k)
        pair = scale[:, None] * scale[None, :]
        cells = self.first.shape[-1]
        if weights is not None:
            w = np.asarray(weights, dtype=float)
            first = np.einsum("c,caj->aj", w, self.class_first.astype(float))
            second = np.einsum("c,d,cdabj->abj", w, w, self.class_second.astype(float))
            labelled, several = self.labelled.sum(), self.several.sum()
        else:
            rows = (slice(None) if stratum is None
                    else [i for i, h in enumerate(self.strata) if h == stratum])
            first = self.first[rows].sum(axis=0).astype(float)
            second = self.second[rows].sum(axis=0).astype(float)
            labelled, several = self.labelled[rows].sum(), self.several[rows].sum()
        return ClusterMoments(first=first / scale[:, None], second=second / pair[:, :, None],
                              labelled=np.full(cells, float(labelled)),
                              several_ordinary=bool(several > 0))

    def band_moments(self, scope: int, columns: list[int] | None = None) -> ClusterMoments:
        """The :class:`ClusterMoments` of band scope ``scope`` (:data:`BAND_SCOPES`) of the
        banded systems (``columns``: of those, these)."""
        if self.band_first is None:
            raise ValueError("these sums hold no confidence bands")
        pick = slice(None) if columns is None else columns
        scale = _scale(self.k)
        pair = scale[:, None] * scale[None, :]
        return ClusterMoments(
            first=self.band_first[scope][..., pick].astype(float) / scale[:, None],
            second=self.band_second[scope][..., pick].astype(float) / pair[:, :, None],
            labelled=self.band_labelled[scope][pick].astype(float),
            several_ordinary=bool(self.band_several[scope][pick].sum() > 0))

    # --- storage ---------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        """Every field as an array (``strata`` as unicode, ``k`` as a 0-d integer): what
        ``numpy.savez`` stores without pickling."""
        out = {"k": np.array(self.k), "strata": np.array(self.strata, dtype=str)}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name not in out and value is not None:
                out[f.name] = value
        return out

    @classmethod
    def of_arrays(cls, arrays) -> MomentSums:
        names = {f.name for f in fields(cls)}
        values = {name: np.asarray(arrays[name]) for name in names if name in arrays}
        values["k"] = int(values["k"])
        values["strata"] = tuple(str(h) for h in values["strata"].tolist())
        return cls(**values)


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return np.array_equal(np.asarray(a), np.asarray(b)) and np.shape(a) == np.shape(b)


def _pairs(starts: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair (l, l') of positions within one run (runs given by their
    ``starts`` and ``sizes``, covering 0…n−1 in order), l = l' included: Σ size² pairs."""
    per = np.repeat(sizes, sizes)  # each position's run size
    left = np.repeat(np.arange(per.size), per)
    run_start = np.repeat(np.repeat(starts, sizes), per)
    offset = np.arange(left.size) - np.repeat(np.cumsum(per) - per, per)
    return left, run_start + offset


def _contract(counts: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Σ_{t,u} counts[..., t, u] y[t]ᵀ y[u] — from pair counts by kinds to second moments
    (..., 4, 4), in integers."""
    return np.einsum("...tu,ta,ub->...ab", counts, y, y)


def moment_sums(labels: LabelArrays, k: int, n_systems: int) -> MomentSums:
    """The :class:`MomentSums` of ``labels`` (module docstring)."""
    y = kind_scores(k)
    n_strata, n = len(labels.strata), len(labels.yes)
    j_all = np.arange(n_systems)
    banded = labels.band is not None
    n_banded = labels.band.shape[1] if banded else 0
    empty = MomentSums(
        k=k, strata=(), first=np.zeros((0, 4, n_systems), np.int64),
        second=np.zeros((0, 4, 4, n_systems), np.int64), labelled=np.zeros(0, np.int64),
        several=np.zeros(0, np.int64), class_first=np.zeros((k, 4, n_systems), np.int64),
        class_second=np.zeros((k, k, 4, 4, n_systems), np.int64),
        **({"band_first": np.zeros((BAND_SCOPES, 4, n_banded), np.int64),
            "band_second": np.zeros((BAND_SCOPES, 4, 4, n_banded), np.int64),
            "band_labelled": np.zeros((BAND_SCOPES, n_banded), np.int64),
            "band_several": np.zeros((BAND_SCOPES, n_banded), np.int64)} if banded else {}))
    if n == 0:
        return empty
    # clusters: (cluster id, stratum), labels sorted by it
    stratum = np.asarray(labels.stratum, dtype=np.int64)
    key = np.asarray(labels.cluster, dtype=np.int64) * max(n_strata, 1) + stratum
    order = np.argsort(key, kind="stable")
    key, stratum = key[order], stratum[order]
    cls = np.asarray(labels.k, dtype=np.int64)[order]
    yes = np.asarray(labels.yes, dtype=bool)[order]
    kind = (4 * yes[:, None].astype(np.int8)
            + np.asarray(labels.code, dtype=np.int8)[order]) & 7  # int8: 8× less to move
    ordinary = (yes if k >= 3 else np.ones(n, dtype=bool)).astype(np.int64)
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    sizes = np.diff(np.r_[starts, n])
    cluster_stratum = stratum[starts]
    several_cluster = np.add.reduceat(ordinary, starts) >= 2
    left, right = _pairs(starts, sizes)

    present_strata = np.unique(stratum)
    first = np.zeros((n_strata, 4, n_systems), np.int64)
    second = np.zeros((n_strata, 4, 4, n_systems), np.int64)
    class_first = np.zeros((k, 4, n_systems), np.int64)
    class_second = np.zeros((k, k, 4, 4, n_systems), np.int64)
    # one count per (stratum, class(es), kind(s)) and system: strata and classes are both
    # sums of it (a cluster is in one stratum)
    single_group = (stratum * k + cls) * KINDS
    pair_group = ((stratum[left] * k + cls[left]) * k + cls[right]) * KINDS * KINDS
    by_system = np.ascontiguousarray(kind.T)  # a system's kinds contiguous: cheap gathers
    for j in j_all:
        column = by_system[j]
        singles = np.bincount(single_group + column,
                              minlength=n_strata * k * KINDS).reshape(n_strata, k, KINDS) @ y
        first[..., j] = singles.sum(axis=1)
        class_first[..., j] = singles.sum(axis=0)
        index = pair_group + (column[left] * KINDS + column[right])
        pairs = np.bincount(index, minlength=n_strata * k * k * KINDS * KINDS).reshape(
            n_strata, k, k, KINDS, KINDS)
        second[..., j] = _contract(pairs.sum(axis=(1, 2)), y)
        class_second[..., j] = _contract(pairs.sum(axis=0), y)
    out = {"first": first[present_strata], "second": second[present_strata],
           "labelled": np.bincount(cluster_stratum, minlength=n_strata)[present_strata],
           "several": np.bincount(cluster_stratum, weights=several_cluster,
                                  minlength=n_strata).astype(np.int64)[present_strata],
           "class_first": class_first, "class_second": class_second}
    if banded:
        out.update(_band_sums(np.asarray(labels.band, dtype=np.int64)[order],
                              kind, ordinary, starts, left, right, y, labels.band_columns))
    return MomentSums(k=k, strata=tuple(labels.strata[i] for i in present_strata), **out)


def _band_sums(band: np.ndarray, kind: np.ndarray, ordinary: np.ndarray, starts: np.ndarray,
               left: np.ndarray, right: np.ndarray, y: np.ndarray, columns: tuple[int, ...]
               ) -> dict[str, np.ndarray]:
    """The band scopes' sums of the banded systems (``band``'s columns; their kinds are
    ``kind``'s columns ``columns``)."""
    n_banded = band.shape[1]
    members = np.array([np.r_[False, band_scope_members(s)] for s in range(BAND_SCOPES)])
    first = np.zeros((BAND_SCOPES, 4, n_banded), np.int64)
    second = np.zeros((BAND_SCOPES, 4, 4, n_banded), np.int64)
    labelled = np.zeros((BAND_SCOPES, n_banded), np.int64)
    several = np.zeros((BAND_SCOPES, n_banded), np.int64)
    slots = BANDS + 1
    for jb in range(n_banded):
        b, column = np.clip(band[:, jb], 0, BANDS), kind[:, columns[jb]]
        singles = np.bincount(b * KINDS + column, minlength=slots * KINDS).reshape(
            slots, KINDS) @ y
        index = ((b[left] * slots + b[right]) * KINDS + column[left]) * KINDS + column[right]
        pairs = _contract(np.bincount(index, minlength=slots * slots * KINDS * KINDS)
                          .reshape(slots, slots, KINDS, KINDS), y)
        mask = np.bitwise_or.reduceat(np.left_shift(1, b), starts)
        for s in range(BAND_SCOPES):
            inside = members[s]
            first[s, :, jb] = singles[inside].sum(axis=0)
            second[s, :, :, jb] = pairs[np.ix_(inside, inside)].sum(axis=(0, 1))
            scope_mask = int(sum(1 << int(v) for v in np.flatnonzero(inside)))
            labelled[s, jb] = int(np.count_nonzero(mask & scope_mask))
            several[s, jb] = int(np.count_nonzero(
                np.add.reduceat(ordinary * inside[b], starts) >= 2))
    return {"band_first": first, "band_second": second, "band_labelled": labelled,
            "band_several": several}


__all__ = ["BAND_SCOPES", "LabelArrays", "MomentSums", "band_scope_members", "kind_scores",
           "moment_sums"]
