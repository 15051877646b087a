"""The counts a partitioned study's estimates read, from its maintained statistics
(``models.TallyGroup``, folded by ``services.tallies``) instead of its queries: the same
values, and the same types, as the row selectors they stand for
(``selectors.study_label_counts`` / ``_banded``, ``study_class_progress``,
``study_first_query_answers``, ``study_rejected_answers``), in time that depends on the
number of groups (strata × classes × answers × the few flags of ``TallyKey``), not of
answers. Inside ``selectors.uniform_part_only`` the estimators' counts are of the uniform
part, as the row selectors' are."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db import connection
from django.db.models import Count

from annotations.core.models import ItemFlag, Study
from annotations.partitioned.models import Query, TallyKey
from annotations.partitioned.selectors import (
    BandCounts,
    ClassProgress,
    LabelCounts,
    _uniform_part,
    counts_of_codes,
    study_class_progress_shell,
)
from estimators.partitioned.moment_sums import MomentSums

ANSWERS = (Query.Answer.YES, Query.Answer.NO, Query.Answer.UNSURE)
SYSTEMS = 64  # ordinals fit a BigInteger mask
CODES = 32


@dataclass(frozen=True)
class Tallies:
    """A study's folded statistics: ``keys[g]`` a ``TallyKey`` tuple (``TallyKey.KEY``
    order), ``n[g]`` its queries, ``codes[g, s, c]`` how many of them carry code c for the
    system of ordinal s (code 0 included); ``moments``: with several queries per item, the
    clustered variance's sums per part ("all", "uniform": ``services.tally_moments``);
    ``design``: with a targeted design, the design-weighted estimate's kept types
    (``services.tally_designs.KeptDesign``)."""

    keys: list[tuple]
    n: np.ndarray
    codes: np.ndarray
    moments: dict[str, MomentSums] | None = None
    design: object | None = None  # services.tally_designs.KeptDesign (a targeted design)

    def moment_sums(self) -> MomentSums | None:
        """The clustered variance's sums the estimates read now: of the uniform part inside
        ``uniform_part_only``, else of every label (None: not kept)."""
        if self.moments is None:
            return None
        return self.moments["uniform" if _uniform_part.get() else "all"]

    @classmethod
    def of_rows(cls, rows: list[tuple], moments: dict[str, MomentSums] | None = None,
                design: object | None = None) -> Tallies:
        """From (*key, n, codes JSON) rows (``TallyGroup``)."""
        codes = np.zeros((len(rows), SYSTEMS, CODES), dtype=np.int64)
        for g, (*_, n, stored) in enumerate(rows):
            for ordinal, by_code in stored.items():
                for code, count in by_code.items():
                    codes[g, int(ordinal), int(code)] = count
            codes[g, :, 0] = n - codes[g, :, 1:].sum(axis=1)
        return cls(keys=[tuple(r[:len(TallyKey.KEY)]) for r in rows],
                   n=np.array([r[len(TallyKey.KEY)] for r in rows], dtype=np.int64),
                   codes=codes, moments=moments, design=design)

    def _where(self, **conditions) -> np.ndarray:
        """Groups whose key fields equal ``conditions`` (a tuple value: any of them)."""
        index = {name: i for i, name in enumerate(TallyKey.KEY)}
        keep = np.ones(len(self.keys), dtype=bool)
        for name, wanted in conditions.items():
            values = wanted if isinstance(wanted, tuple) else (wanted,)
            keep &= np.array([key[index[name]] in values for key in self.keys], dtype=bool)
        return keep

    def _estimated(self) -> np.ndarray:
        """Answered groups the estimates count: not rejected, not withdrawn (and of the
        uniform part inside ``uniform_part_only``) — ``selectors.estimated_queries``."""
        more = {"uniform": True} if _uniform_part.get() else {}
        return self._where(state=ANSWERS, rejected=False, withdrawn=False, **more)

    def label_counts(self, ordinals: list[int], banded: list[int] | None = None,
                     n_bands: int = 0) -> tuple[LabelCounts, BandCounts | None]:
        """``selectors.study_label_counts`` (``banded`` None) or ``_banded`` (groups by
        (stratum, k, answer) in that order)."""
        keep = np.flatnonzero(self._estimated())
        by = {}
        for g in keep:
            stratum, k, answer = self.keys[g][0], self.keys[g][1], self.keys[g][2]
            by.setdefault((stratum, k, answer), []).append(g)
        groups = sorted(by)
        n = np.array([self.n[by[key]].sum() for key in groups], dtype=float)
        tally = (np.stack([self.codes[by[key]].sum(axis=0) for key in groups], axis=1)
                 if groups else np.zeros((SYSTEMS, 0, CODES)))[ordinals].astype(float)
        columns = [ordinals.index(o) for o in banded or []]
        match, present, band_n, band_m, band_p = counts_of_codes(tally, columns, n_bands)
        if not (connection.vendor == "postgresql" and banded is not None):
            # the memory layout of the row selector's arrays on this database: numpy's sums
            # over them round by it in the last bit, and the figures are to be identical
            match, present = np.ascontiguousarray(match), np.ascontiguousarray(present)
        counts = LabelCounts(strata=np.array([key[0] for key in groups], dtype=object),
                             k=np.array([key[1] for key in groups], dtype=int),
                             answer=np.array([key[2] for key in groups], dtype=object),
                             n=n, match=match, present=present)
        bands = (BandCounts(n=band_n, match=band_m, present=band_p)
                 if banded is not None else None)
        return counts, bands

    def _by_class_answer(self, keep: np.ndarray) -> dict[int, dict[str, int]]:
        out: dict[int, dict[str, int]] = {}
        for g in np.flatnonzero(keep):
            k, answer = self.keys[g][1], self.keys[g][2]
            out.setdefault(k, {})
            out[k][answer] = out[k].get(answer, 0) + int(self.n[g])
        return out

    def first_query_answers(self) -> dict[int, dict[str, int]]:
        """``selectors.study_first_query_answers``."""
        return self._by_class_answer(self._estimated() & self._where(first=True))

    def rejected_answers(self) -> dict[int, dict[str, int]]:
        """``selectors.study_rejected_answers``."""
        return self._by_class_answer(self._where(state=ANSWERS, rejected=True,
                                                 withdrawn=False))

    def answers(self, **conditions) -> int:
        """Answered queries whose key fields equal ``conditions``."""
        return int(self.n[self._where(state=ANSWERS, **conditions)].sum())

    def estimated_answers(self) -> int:
        """``selectors.estimated_queries`` over the answered routed queries, counted."""
        return int(self.n[self._estimated()].sum())

    def class_progress(self, study: Study) -> list[ClassProgress]:
        """``selectors.study_class_progress``: answers (rejected ones included) and open
        queries of items not withdrawn, from the statistics; of the open ones, the leased
        (few: an index range) read from the queries; specialists from the members; skips
        (hand-backs) from the statistics."""
        classes = study_class_progress_shell(study=study)
        live = self._where(withdrawn=False)
        for g in np.flatnonzero(live):
            _, k, state = self.keys[g][:3]
            cp = classes.get(k)
            if cp is None:
                continue
            if state in ANSWERS:
                setattr(cp, state, getattr(cp, state) + int(self.n[g]))
            elif state == "open":
                cp.pending += int(self.n[g])
        for g in np.flatnonzero(self._where(state="skip")):
            cp = classes.get(self.keys[g][1])
            if cp is not None:
                cp.skipped += int(self.n[g])
        leased = (Query.objects.filter(study=study, status=Query.Status.LEASED,
                                       is_quality_check=False)
                  .exclude(item_id__in=ItemFlag.withdrawn_ids(study))
                  .values("k").annotate(n=Count("id")).values_list("k", "n").order_by())
        for k, n in leased:
            cp = classes.get(k)
            if cp is not None:
                cp.leased += n
                cp.pending -= n
        return [classes[i] for i in sorted(classes)]
