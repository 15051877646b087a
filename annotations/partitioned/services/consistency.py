"""The maintained statistics held to the full recompute: a study's estimates from its
folded groups (``services.tallies``) against the same estimates counted from its queries
(``services.estimates.recompute_payload(study, None)``), every number to
:data:`TOLERANCE`. A difference is logged and recorded on the study's ``TallyState``
(/healthz and the dashboard report it), then the groups are rebuilt from the queries — a
mismatch is never fixed without a log line. Run by a beat task and ``manage.py
check_estimates``."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from django.db.models import F, Q
from django.utils import timezone

from annotations.core.models import Study
from annotations.partitioned.models import TallyState
from annotations.partitioned.services.estimates import recompute_payload
from annotations.partitioned.services.tallies import tallies_build, tallies_current

log = logging.getLogger(__name__)

TOLERANCE = 1e-9


@dataclass(frozen=True)
class Check:
    study_id: int
    ok: bool
    difference: float  # the largest |a − b| / max(1, |b|) over the payloads' numbers
    detail: str  # where they differ first ("" when they agree)


def payload_difference(a, b, path: str = "") -> tuple[float, str]:
    """The largest relative difference between two JSON-like payloads and the path of the
    first one past :data:`TOLERANCE` (structure or text differing: inf)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return math.inf, f"{path}: keys {sorted(set(a) ^ set(b))}"
        return _worst(payload_difference(a[key], b[key], f"{path}.{key}") for key in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return math.inf, f"{path}: {len(a)} vs {len(b)} entries"
        return _worst((payload_difference(x, y, f"{path}[{i}]")
                       for i, (x, y) in enumerate(zip(a, b, strict=True))))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        if math.isnan(a) and math.isnan(b) or a == b:
            return 0.0, ""
        diff = abs(a - b) / max(1.0, abs(b))
        return (diff, f"{path}: {a!r} vs {b!r}" if not diff <= TOLERANCE else "")
    return (0.0, "") if a == b else (math.inf, f"{path}: {a!r} vs {b!r}")


def _worst(results) -> tuple[float, str]:
    worst, where = 0.0, ""
    for diff, detail in results:
        if detail and not where:
            where = detail
        worst = max(worst, diff)
    return worst, where


def tallies_check(*, study_id: int, repair: bool = True) -> Check:
    """Compare the study's estimates from its statistics with the full recompute; record
    the result; on a difference, log it and (``repair``) rebuild the statistics."""
    study = Study.objects.get(pk=study_id)
    from_tallies = recompute_payload(study, tallies_current(study_id=study_id))
    reference = recompute_payload(study, None)
    difference, detail = payload_difference(from_tallies, reference)
    ok = not detail
    TallyState.objects.filter(study_id=study_id).update(
        checked_at=timezone.now(), check_ok=ok,
        check_difference=difference if math.isfinite(difference) else None,
        check_detail=detail[:2000])
    if not ok:
        log.error("estimates of study %s: the maintained statistics differ from the full "
                  "recompute (%s); rebuilding them from the queries", study_id, detail)
        if repair:
            tallies_build(study_id=study_id)
    return Check(study_id=study_id, ok=ok, difference=difference, detail=detail)


def tallies_check_all(*, study_ids: list[int] | None = None,
                      repair: bool = True) -> list[Check]:
    """:func:`tallies_check` (with ``repair``) on every partitioned study touched since its
    last check (or on ``study_ids``)."""
    studies = Study.objects.filter(kind=Study.Kind.PARTITIONED)
    if study_ids is not None:
        studies = studies.filter(pk__in=study_ids)
    else:  # those touched since their last check (a fold or a read locks and stamps them)
        studies = studies.filter(Q(tally_state__isnull=True) | Q(tally_state__checked_at=None)
                                 | Q(tally_state__folded_at__gt=F("tally_state__checked_at")))
    return [tallies_check(study_id=pk, repair=repair) for pk in studies.order_by("pk")
            .values_list("pk", flat=True)]


def mismatched_studies() -> list[int]:
    """Studies whose last consistency check found a difference (for /healthz)."""
    return list(TallyState.objects.filter(Q(check_ok=False)).order_by("study_id")
                .values_list("study_id", flat=True))
