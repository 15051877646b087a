"""The clustered variance's maintained sums of a study with several queries per item
(``TallyState.moments``): the :class:`~estimators.partitioned.moment_sums.MomentSums` of its
labels — every answered 'yes'/'no' query not rejected and of an item not withdrawn — and of
its uniform part's, kept by the fold of ``services.tallies`` beside the counts.

Contract of a fold (:func:`moments_folded`): the entries it takes out of the log and the
current labels of the items they touch are read in one snapshot (PostgreSQL: one statement,
the ``DELETE … RETURNING`` and the labels' read side by side; SQLite: under the fold's write
lock). An item's labels before the entries are its current labels less the entries added
(+1) plus those taken away (−1), as multisets; the sums move by the touched items' sums now
less their sums before — integers, so a fold leaves exactly the sums a build from the
queries gives (:func:`moments_built`; the consistency check compares the estimates). A
touched item whose labels before would hold a negative count, or an entry with no item
(logged before migration 0037), makes the fold rebuild instead (:class:`Rebuild`).

The sums' **signature** — K, the systems' ordinals and which are banded — is stored with
them; a fold that finds another (a system added, bands set) rebuilds."""

from __future__ import annotations

import io
from collections import Counter
from contextlib import nullcontext

import numpy as np
from django.db import connection

from annotations.core.models import Study, StudyClass
from annotations.partitioned.models import Query, TallyKey, TallyState
from annotations.partitioned.selectors import (
    CODE_COLUMNS,
    item_labels_of,
    study_item_labels,
    uniform_part_only,
)
from annotations.partitioned.services.scope_estimates import labels_moment_sums
from assistants.models import AISystem
from estimators.partitioned.moment_sums import MomentSums

PARTS = ("all", "uniform")
LABEL_STATES = (Query.Answer.YES, Query.Answer.NO)


class Rebuild(Exception):
    """The kept sums cannot be moved by this fold: rebuild them from the queries
    (``inconsistent``: because the log and the queries disagree — logged as a warning)."""

    def __init__(self, why: str, *, inconsistent: bool = False):
        super().__init__(why)
        self.inconsistent = inconsistent


def signature(study_id: int) -> tuple | None:
    """(K, ordinals, banded ordinals) of the sums the study keeps, or None when it keeps
    none (one query per item, or no AI system)."""
    if Study.objects.filter(pk=study_id).values_list("queries_per_item", flat=True).first() \
            in (None, 1):
        return None
    systems = list(AISystem.objects.filter(study_id=study_id).order_by("ordinal")
                   .values_list("ordinal", "band_edges"))
    if not systems:
        return None
    return (StudyClass.objects.filter(study_id=study_id).count(),
            tuple(o for o, _ in systems), tuple(o for o, edges in systems if edges))


# --- the labels' rows ----------------------------------------------------------------------
# A row — of the log or of a query — in the log's layout: TallyKey.KEY (stratum, k, state,
# first, uniform, neyman, rejected, withdrawn), sign, selectors.CODE_COLUMNS (present, match,
# band bit planes 0–2), item_id.
SIGN, CODES, ITEM = len(TallyKey.KEY), len(TallyKey.KEY) + 1, len(TallyKey.KEY) + 6


def label_select(flags: list[str]) -> str:
    """The SELECT list of a query's row in the log's layout, with the key's flag
    expressions ``flags`` (``services.tallies._flag_sql``) and sign 1."""
    q = connection.ops.quote_name
    t = Query._meta.db_table
    bits = [f"COALESCE({t}.{q(c)}, 0)" for c in CODE_COLUMNS]
    return ", ".join([f"{t}.{q('stratum')}", f"{t}.{q('k')}", f"{t}.{q('answer')}", *flags,
                      "1", *bits, f"{t}.{q('item_id')}"])


def labels_where() -> str:
    """The labels among a study's queries (its id the one parameter): FROM … WHERE."""
    q = connection.ops.quote_name
    t = Query._meta.db_table
    return (f"FROM {t} WHERE {t}.{q('study_id')} = %s AND NOT {t}.{q('is_quality_check')} "
            f"AND {t}.{q('status')} = 'answered' AND {t}.{q('answer')} IN ('yes', 'no')")


def _label(row) -> tuple:
    """What a row says of a label: item, stratum, k, state, uniform, rejected, withdrawn,
    then the five code columns (Python types: SQLite gives 0/1 for booleans)."""
    return (int(row[ITEM]), row[0], int(row[1]), row[2], bool(row[4]), bool(row[6]),
            bool(row[7]), *(int(b) for b in row[CODES:CODES + 5]))


def sums_of(labels: list[tuple], sig: tuple) -> dict[str, MomentSums]:
    """Per part (:data:`PARTS`) the sums of ``labels`` (:func:`_label` tuples) — the
    counted ones: not rejected, item not withdrawn, of the uniform part for "uniform" —
    through the reference recompute's own conversion (``selectors.item_labels_of``,
    ``scope_estimates.labels_moment_sums``)."""
    k, ordinals, banded = sig
    columns = [ordinals.index(o) for o in banded] or None
    out = {}
    for part in PARTS:
        kept = [r for r in labels if not r[5] and not r[6] and (r[4] or part == "all")]
        names = sorted({r[1] for r in kept})
        index = {h: i for i, h in enumerate(names)}
        # LabelRows' columns: item, k, yes, match, present, band planes (CODE_COLUMNS has
        # present before match)
        data = np.array([(r[0], r[2], r[3] == Query.Answer.YES, r[8], r[7], *r[9:])
                         for r in kept], dtype=np.int64).reshape(-1, 8)
        item_labels = item_labels_of(names, np.array([index[r[1]] for r in kept], np.intp),
                                     data, ordinals=list(ordinals), bands=bool(banded))
        out[part] = labels_moment_sums(item_labels, k, columns)
    return out


# --- build, fold, store --------------------------------------------------------------------
def moments_built(study_id: int, sig: tuple | None) -> None:
    """Store the sums of every label of the study, read as the reference recompute reads
    them (``selectors.study_item_labels``: one binary COPY on PostgreSQL) in the build's
    snapshot — or none (``sig`` None)."""
    if sig is None:
        TallyState.objects.filter(study_id=study_id).update(moments=None)
        return
    k, ordinals, banded = sig
    study = Study.objects.get(pk=study_id)
    columns = [ordinals.index(o) for o in banded] or None
    sums = {}
    for part in PARTS:
        if part == "uniform" and not Query.objects.filter(
                study_id=study_id, draw_uniform=False, is_quality_check=False).exists():
            sums[part] = sums["all"]  # no targeted draw: the uniform part is every label
            continue
        with uniform_part_only() if part == "uniform" else nullcontext():
            labels = study_item_labels(study=study, ordinals=list(ordinals),
                                       bands=bool(banded))
        sums[part] = labels_moment_sums(labels, k, columns)
    _store(study_id, sig, sums)


def moments_folded(study_id: int, sig: tuple, held: dict[str, MomentSums],
                   taken: list[tuple], rows: list[tuple]) -> dict[str, MomentSums]:
    """Move the sums ``held`` by the entries ``taken`` given the touched items' current
    rows ``rows`` (both in the log's layout; module docstring), store them and return
    them."""
    changed = [e for e in taken if e[2] in LABEL_STATES]
    if not changed:
        return held
    if any(e[ITEM] is None for e in changed):
        raise Rebuild("an entry without its item (logged before the sums were kept)")
    now = [_label(r) for r in rows]
    before = Counter(now)
    for entry in changed:
        before[_label(entry)] -= int(entry[SIGN])
    if any(count < 0 for count in before.values()):
        raise Rebuild("a touched item's labels before the entries would be negative",
                      inconsistent=True)
    was = [label for label, count in before.items() for _ in range(count)]
    new, old = sums_of(now, sig), sums_of(was, sig)
    moved = {part: held[part].plus(new[part]).plus(old[part], -1) for part in PARTS}
    _store(study_id, sig, moved)
    return moved


def touched(taken: list[tuple]) -> list[int]:
    """The items whose labels the entries ``taken`` may move."""
    return sorted({e[ITEM] for e in taken if e[2] in LABEL_STATES and e[ITEM] is not None})


def _store(study_id: int, sig: tuple, sums: dict[str, MomentSums]) -> None:
    k, ordinals, banded = sig
    arrays = {"signature": np.array([k, len(ordinals), *ordinals, len(banded), *banded])}
    for part, held in sums.items():
        arrays.update({f"{part}.{name}": value for name, value in held.arrays().items()})
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    TallyState.objects.filter(study_id=study_id).update(moments=buffer.getvalue())


def _signature_of(stored: np.ndarray) -> tuple:
    values = [int(v) for v in stored]
    k, j = values[0], values[1]
    ordinals = tuple(values[2:2 + j])
    return k, ordinals, tuple(values[3 + j:3 + j + values[2 + j]])


def read(stored: bytes | memoryview | None, sig: tuple | None) -> dict[str, MomentSums] | None:
    """The stored sums per part, or None when none are stored or they have another
    signature than ``sig``."""
    if stored is None or sig is None:
        return None
    with np.load(io.BytesIO(bytes(stored)), allow_pickle=False) as npz:
        if _signature_of(npz["signature"]) != sig:
            return None
        return {part: MomentSums.of_arrays({name.split(".", 1)[1]: npz[name]
                                             for name in npz.files
                                             if name.startswith(part + ".")})
                for part in PARTS}
