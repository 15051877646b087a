"""The design-weighted estimate's maintained statistics of a study with a targeted routing
design (``TallyState.design``, ``TallyItem``): the estimate of
``estimators.partitioned.design_estimate`` is a function of the items' step arrays, and it
reads each item through one AI system's columns at a time — so per system, items whose steps
that system's estimate sees identically (the same answers, draw probabilities, picks) are one
**type**, and the estimate from each type once, counted as many times as it has items
(``DesignSteps.count``), equals the estimate from every item (1e-12; the estimators' test).
A study keeps its types with their counts; a recompute reads them, not the answers.

Contract of a fold (:func:`designs_folded`): the items the folded entries name — their
queries' answers, undos, rejections, withdrawals, re-imports, and (migration 0038) their
predictions — are read again (``selectors.study_design_rows`` of those items: the reference
recompute's own reading) and their steps turned into types the reference's way
(``services.design_estimates.design_step_arrays``); each item's old share, stored by
``TallyItem`` (its types' keys), is taken out and its new one added. A read newer than the
entries it folds is harmless: an item's share is always the one last read, and any later
change of it logs an entry that reads it again. An item's type key is a 64-bit hash of its
steps (:func:`item_keys`); two items of different steps sharing a key would merge (odds
about 2⁻⁶⁴ per pair): the consistency check against the full recompute would report it.

The statistics' **signature** — K, the depth (steps per item) and the systems' ordinals —
is stored with them; a fold that finds another rebuilds (a system added). A study without a
targeted design keeps none (its estimates do not read them)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field, replace

import numpy as np
from django.db import connection

from annotations.core.models import Study, StudyClass
from annotations.core.services.bulk import rows_insert
from annotations.partitioned.models import RoutingDesign, TallyItem, TallyState
from annotations.partitioned.selectors import study_design_rows
from annotations.partitioned.services.design_estimates import design_step_arrays
from annotations.partitioned.services.tally_moments import ITEM, Rebuild
from assistants.models import AISystem
from estimators.partitioned.design_estimate import DesignSteps

# a step's fields as one system's estimate reads them (design_step_arrays' keys): common to
# the systems, then the system's own column
COMMON = ("step", "yes", "p_asked", "remaining", "rest", "inv_total")
OWN = ("own", "p_own", "present")


def signature(study_id: int) -> tuple | None:
    """(K, depth, ordinals) of the statistics the study keeps, or None when it keeps none
    (no targeted design)."""
    if not RoutingDesign.objects.filter(study_id=study_id,
                                        kind=RoutingDesign.Kind.TARGETED).exists():
        return None
    k = StudyClass.objects.filter(study_id=study_id).count()
    qpi = Study.objects.filter(pk=study_id).values_list("queries_per_item", flat=True).get()
    ordinals = tuple(AISystem.objects.filter(study_id=study_id).order_by("ordinal")
                     .values_list("ordinal", flat=True))
    return k, min(qpi, k), ordinals


# --- types ---------------------------------------------------------------------------------
def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise on uint64 (wrapping arithmetic)."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def _bits(values: np.ndarray) -> np.ndarray:
    """A field's values as uint64 words: floats by their bits, the rest by value."""
    v = np.ascontiguousarray(values)
    if v.dtype.kind == "f":
        return v.astype(np.float64).view(np.uint64)
    return v.astype(np.int64).view(np.uint64)


@dataclass
class ItemSteps:
    """The steps of some items as ``design_step_arrays`` gives them: ``arrays`` (rows in
    item order), ``item_ids`` per row's item index, ``starts`` of each item's rows (with
    the end), and ``keys`` (items, systems): each item's type key per system."""

    arrays: dict
    item_ids: np.ndarray
    starts: np.ndarray
    keys: np.ndarray


def item_keys(arrays: dict, systems: int) -> tuple[np.ndarray, np.ndarray]:
    """(items with a step, their rows' starts with the end) and keys (items, systems): a
    64-bit hash of the item's steps through system j's columns (:data:`COMMON`,
    :data:`OWN`) — each step's fields mixed in turn, with the system's index, then the
    steps' hashes summed (each step holds its position, so the sum is of distinct terms)."""
    item = arrays["item"]
    n = len(item)
    starts = np.flatnonzero(np.r_[True, item[1:] != item[:-1]]) if n else np.zeros(0, int)
    h = np.full(n, 0x9E3779B97F4A7C15, dtype=np.uint64)
    for name in COMMON:
        h = _mix(h ^ _bits(arrays[name]))
    keys = np.zeros((len(starts), systems), dtype=np.uint64)
    for j in range(systems):
        hj = _mix(h ^ np.uint64(j + 1))
        for name in OWN:
            hj = _mix(hj ^ _bits(arrays[name][:, j]))
        if n:
            keys[:, j] = np.add.reduceat(hj, starts)
    return item[starts] if n else np.zeros(0, np.int64), np.r_[starts, n].astype(np.int64), keys


def steps_read(study: Study, sig: tuple, item_ids: list[int] | None = None) -> ItemSteps:
    """The steps and type keys of the study's items (of ``item_ids`` only, if given), read
    as the reference recompute reads them."""
    k, depth, ordinals = sig
    rows = study_design_rows(study=study, ordinals=list(ordinals), item_ids=item_ids)
    arrays = design_step_arrays(rows, k, depth)
    index, starts, keys = item_keys(arrays, len(ordinals))
    return ItemSteps(arrays, rows.item_ids[index].astype(np.int64), starts, keys)


@dataclass
class DesignTypes:
    """A study's types: ``key`` (T,) sorted, ``system`` (T,) the column each is of,
    ``count`` (T,) its items, ``first`` (T + 1,) where its steps start in ``steps``
    (each field of :data:`COMMON` and :data:`OWN`, the system's column, concatenated);
    ``answers`` and ``items``: the steps and the items the estimate reads; ``designs``
    (D, 3): per routing design (id; 0: none, the uniform default) its answered and open
    routed queries."""

    key: np.ndarray
    system: np.ndarray
    count: np.ndarray
    first: np.ndarray
    steps: dict
    answers: int
    items: int
    designs: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))

    @classmethod
    def empty(cls) -> DesignTypes:
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                   np.zeros(1, np.int64), {name: np.zeros(0) for name in COMMON + OWN}, 0, 0)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"key": self.key, "system": self.system, "count": self.count,
                "first": self.first, "totals": np.array([self.answers, self.items]),
                "designs": self.designs,
                **{f"steps.{name}": v for name, v in self.steps.items()}}

    @classmethod
    def of_arrays(cls, a) -> DesignTypes:
        answers, items = (int(v) for v in a["totals"])
        return cls(a["key"], a["system"], a["count"], a["first"],
                   {name: a[f"steps.{name}"] for name in COMMON + OWN}, answers, items,
                   a["designs"].reshape(-1, 3))

    def design_counts(self) -> dict[int | None, tuple[int, int]]:
        """{design id (None: the uniform default): (answered, open)} — what
        ``selectors.study_designs`` counts from the queries."""
        return {(int(d) or None): (int(a), int(o)) for d, a, o in self.designs}

    def take(self, keep: np.ndarray) -> DesignTypes:
        """The types ``keep`` (indices, in that order) with their steps."""
        lengths = np.diff(self.first)[keep]
        rows = _ranges(self.first[keep], lengths)
        return replace(self, key=self.key[keep], system=self.system[keep],
                       count=self.count[keep], first=np.r_[0, np.cumsum(lengths)],
                       steps={name: v[rows] for name, v in self.steps.items()})


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The indices start … start + length − 1 of every range, concatenated."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths)
    return np.arange(total) + offsets


def types_of(read: ItemSteps) -> DesignTypes:
    """The types of the items ``read``, each counted once per item."""
    items, systems = read.keys.shape
    if not items or not systems:
        return replace(DesignTypes.empty(), answers=int(read.starts[-1]) if items else 0,
                       items=items)
    flat = read.keys.ravel()
    key, where, count = np.unique(flat, return_index=True, return_counts=True)
    item, system = np.divmod(where, systems)
    lengths = read.starts[item + 1] - read.starts[item]
    rows = _ranges(read.starts[item], lengths)
    column = np.repeat(system, lengths)
    steps = {name: read.arrays[name][rows] for name in COMMON}
    steps.update({name: read.arrays[name][rows, column] for name in OWN})
    return DesignTypes(key, system.astype(np.int64), count.astype(np.int64),
                       np.r_[0, np.cumsum(lengths)].astype(np.int64), steps,
                       int(read.starts[-1]), items)


def types_moved(held: DesignTypes, added: DesignTypes, removed: np.ndarray, steps_removed: int,
                items_removed: int) -> DesignTypes:
    """``held`` plus the types ``added`` less one item per key of ``removed`` (each key as
    often as it occurs). A key taken out more often than held: :class:`Rebuild`."""
    key = np.concatenate([held.key, added.key, removed])
    delta = np.concatenate([held.count, added.count, -np.ones(len(removed), np.int64)])
    distinct, inverse = np.unique(key, return_inverse=True)
    count = np.zeros(len(distinct), np.int64)
    np.add.at(count, inverse, delta)
    if (count < 0).any():
        raise Rebuild("a type of the design statistics would hold fewer than no items",
                      inconsistent=True)
    # every surviving type's steps: from held where it was, else from added
    source = np.full(len(distinct), -1, np.int64)
    source[inverse[len(held.key):len(held.key) + len(added.key)]] = (
        np.arange(len(added.key)) + len(held.key))
    source[inverse[:len(held.key)]] = np.arange(len(held.key))
    keep = np.flatnonzero(count > 0)
    if (source[keep] < 0).any():
        raise Rebuild("an item's old type is not among the design statistics' types",
                      inconsistent=True)
    both = DesignTypes(
        np.concatenate([held.key, added.key]), np.concatenate([held.system, added.system]),
        np.concatenate([held.count, added.count]),
        np.r_[held.first[:-1], added.first + held.first[-1]],
        {name: np.concatenate([held.steps[name], added.steps[name]]) for name in held.steps},
        0, 0)
    out = both.take(source[keep])
    return replace(out, count=count[keep],
                   answers=held.answers + added.answers - steps_removed,
                   items=held.items + added.items - items_removed)


def types_steps(types: DesignTypes, systems: int, depth: int) -> DesignSteps:
    """The types as a stack of one study per system (``DesignSteps`` (S, L), one system
    column each): system j's study holds its types as items, each counted by
    ``count``."""
    order = np.lexsort((types.key, types.system))
    ranked = types.take(order)
    per_system = np.bincount(ranked.system, minlength=systems)
    rank = np.arange(len(ranked.key)) - np.repeat(np.r_[0, np.cumsum(per_system)[:-1]],
                                                  per_system)
    lengths = np.diff(ranked.first)
    row_system = np.repeat(ranked.system, lengths)
    row_item = np.repeat(rank, lengths)
    per_rows = np.bincount(row_system, minlength=systems)
    width = max(int(per_rows.max()) if systems else 0, 1)
    column = np.arange(len(row_system)) - np.repeat(np.r_[0, np.cumsum(per_rows)[:-1]],
                                                    per_rows)
    shape = (systems, width)

    def laid(values, fill=0):
        out = np.full(shape, fill, dtype=np.asarray(values).dtype)
        out[row_system, column] = values
        return out

    s = ranked.steps
    count = np.zeros((systems, max(int(per_system.max()) if systems else 0, 1)))
    count[ranked.system, rank] = ranked.count
    valid = laid(np.ones(len(row_system), bool), False)
    return DesignSteps(
        item=laid(row_item), step=laid(s["step"].astype(np.int64)),
        yes=laid(s["yes"].astype(bool), False), unsure=np.zeros(shape, bool),
        p_asked=laid(s["p_asked"].astype(float), 1.0),
        remaining=laid(s["remaining"].astype(np.int64), 1),
        own=laid(s["own"].astype(bool), False)[..., None],
        p_own=laid(s["p_own"].astype(float), 0.0)[..., None],
        present=laid(s["present"].astype(bool), False)[..., None], valid=valid, depth=depth,
        rest=laid(s["rest"].astype(float), 1.0), inv_total=laid(s["inv_total"].astype(float),
                                                                1.0),
        count=count)


@dataclass(frozen=True)
class KeptDesign:
    """A study's kept types as the recompute reads them (``design_estimates.
    design_payload``'s ``kept``): their ``signature`` (K, depth, ordinals) and ``types``."""

    signature: tuple
    types: DesignTypes

    def steps(self) -> DesignSteps:
        k, depth, ordinals = self.signature
        return types_steps(self.types, len(ordinals), depth)


# --- build, fold, store --------------------------------------------------------------------
def design_counts_read(study_id: int, item_ids: list[int] | None = None
                       ) -> dict[int, np.ndarray]:
    """Per item with a routed query (of ``item_ids`` only, if given): (design id, 0 for
    none; answered; open) per design its queries were drawn under, (d, 3) int64."""
    q = connection.ops.quote_name
    sql = (f"SELECT {q('item_id')}, COALESCE({q('design_id')}, 0), {q('status')} = "
           f"'answered', count(*) FROM {q('annotations_query')} WHERE {q('study_id')} = %s "
           f"AND NOT {q('is_quality_check')}")
    params: list = [study_id]
    chunks = [None] if item_ids is None else [item_ids[i:i + 500]
                                              for i in range(0, len(item_ids), 500)]
    out: dict[int, dict[int, list[int]]] = {}
    with connection.cursor() as cursor:
        for chunk in chunks:
            where = "" if chunk is None else (
                f" AND {q('item_id')} IN ({', '.join(['%s'] * len(chunk))})")
            cursor.execute(f"{sql}{where} GROUP BY 1, 2, 3", params + list(chunk or []))
            for item, design, answered, n in cursor.fetchall():
                slot = out.setdefault(int(item), {}).setdefault(int(design), [0, 0])
                slot[0 if answered else 1] += int(n)
    return {item: np.array([(d, a, o) for d, (a, o) in sorted(by.items())], np.int64)
            for item, by in out.items()}


def _designs_total(per_item) -> dict[int, np.ndarray]:
    """{design id: (answered, open)} summed over the (d, 3) arrays ``per_item``."""
    total: dict[int, np.ndarray] = {}
    for rows in per_item:
        for d, a, o in rows:
            total[int(d)] = total.get(int(d), np.zeros(2, np.int64)) + np.array([a, o])
    return total


def _designs_array(total: dict[int, np.ndarray]) -> np.ndarray:
    rows = [(d, int(c[0]), int(c[1])) for d, c in sorted(total.items()) if c.any()]
    if any(a < 0 or o < 0 for _, a, o in rows):
        raise Rebuild("a design of the design statistics would hold fewer than no queries",
                      inconsistent=True)
    return np.array(rows, np.int64).reshape(-1, 3)


def designs_built(study_id: int, sig: tuple | None) -> DesignTypes | None:
    """Store the types of every item of the study, its queries per design and each item's
    share (``TallyItem``), read in the build's snapshot — or none (``sig`` None)."""
    TallyItem.objects.filter(study_id=study_id).delete()
    if sig is None:
        TallyState.objects.filter(study_id=study_id).update(design=None)
        return None
    read = steps_read(Study.objects.get(pk=study_id), sig)
    counts = design_counts_read(study_id)
    _shares_store(study_id, read, counts)
    types = replace(types_of(read), designs=_designs_array(_designs_total(counts.values())))
    _store(study_id, sig, types)
    return types


def designs_folded(study_id: int, sig: tuple, held: DesignTypes, taken: list[tuple]
                   ) -> DesignTypes:
    """Move the types ``held`` by the items the entries ``taken`` name (module docstring),
    store them and return them."""
    items = sorted({int(e[ITEM]) for e in taken if e[ITEM] is not None})
    if not items:
        return held
    old = list(TallyItem.objects.filter(study_id=study_id, item_id__in=items)
               .values_list("steps", "keys", "designs"))
    typed = [bytes(k) for steps, k, _ in old if steps]
    removed = (np.concatenate([np.frombuffer(k, dtype=np.uint64) for k in typed])
               if typed else np.zeros(0, np.uint64))
    if len(removed) != len(typed) * len(sig[2]):
        raise Rebuild("an item's stored types are not one per system", inconsistent=True)
    read = steps_read(Study.objects.get(pk=study_id), sig, items)
    counts = design_counts_read(study_id, items)
    moved = types_moved(held, types_of(read), removed, sum(s for s, _, _ in old), len(typed))
    taken_out = [np.frombuffer(bytes(b), np.int64).reshape(-1, 3) * (1, -1, -1)
                 for _, _, b in old]  # the old shares' counts, negated
    moved = replace(moved, designs=_designs_array(
        _designs_total([held.designs, *counts.values(), *taken_out])))
    TallyItem.objects.filter(study_id=study_id, item_id__in=items).delete()
    _shares_store(study_id, read, counts)
    _store(study_id, sig, moved)
    return moved


def _shares_store(study_id: int, read: ItemSteps, counts: dict[int, np.ndarray]) -> None:
    """Each item's share: one row per item with a routed query (PostgreSQL: COPY;
    bulk_create took 2.5 s for 20 000)."""
    lengths = np.diff(read.starts)
    typed = {int(i): (int(n), keys.tobytes())
             for i, n, keys in zip(read.item_ids, lengths, read.keys, strict=True)}
    if set(typed) - set(counts):
        raise Rebuild("an item with answered steps but no query", inconsistent=True)
    rows_insert(TallyItem, [
        {"study_id": study_id, "item_id": item, "steps": typed.get(item, (0, b""))[0],
         "keys": typed.get(item, (0, b""))[1], "designs": designs.tobytes()}
        for item, designs in counts.items()])


def _store(study_id: int, sig: tuple, types: DesignTypes) -> None:
    k, depth, ordinals = sig
    buffer = io.BytesIO()
    np.savez(buffer, signature=np.array([k, depth, len(ordinals), *ordinals]),
             **types.arrays())
    TallyState.objects.filter(study_id=study_id).update(design=buffer.getvalue())


def read(stored: bytes | memoryview | None, sig: tuple | None) -> DesignTypes | None:
    """The stored types, or None when none are stored or they have another signature than
    ``sig``."""
    if stored is None or sig is None:
        return None
    with np.load(io.BytesIO(bytes(stored)), allow_pickle=False) as npz:
        k, depth, count, *ordinals = (int(v) for v in npz["signature"])
        if (k, depth, tuple(ordinals[:count])) != sig:
            return None
        return DesignTypes.of_arrays({name: npz[name] for name in npz.files})
