"""The trust gate of an assisted study (issue 19; docs/audit.md "Trust gates"): routing by
the AI's confidence (threshold or bands) only after an audit of the AI rater succeeded on at
least the study's minimum share of datapoints — and, beside the audit, the AI rater's
agreement with the study's own human ratings of the same items.

* ``routing_gate_check`` — called by the services that turn routing by confidence on
  (``routing.assisted_study_open``, ``routing.routing_update``): with a gate set and the
  routing not ``all``, refuses (``InvalidStudy``, field ``routing``) when the gate's AI
  system has no finished audit, or when its latest finished audit's success rate is below
  the minimum — the message names the audit, its rate with its exact 95 % interval, and the
  minimum. Routing to everyone (``all``) is never gated. The gate compares the success
  rate itself (the share of datapoints, as the researcher sets the minimum), not the
  interval's lower end; the page shows both.
* ``ai_rater_audit`` — what the dashboard and the AI system's page show: the latest audit
  (rate, interval, link) and the gate's verdict.
* ``human_agreement`` — Cohen's κ (``estimators.nodata.kappa``) of the audit's evaluator
  labels with the study's human ratings of the same sentences (the audit's item = the
  sentence's external id). A human label is binary as the audit's are: 1 = accurate,
  0 = inaccurate, unsupported or disputed ("doesn't require attribution" and "can't assess"
  are left out); each sentence's label is the majority of its ratings in the unassisted
  (baseline) arms — the assisted arms saw the AI's output, so their agreement with it would
  be inflated — and a tie leaves the sentence out.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from annotations.assisted.models import Arm, AssistedSettings, Rating
from annotations.audit.models import Audit, AuditOutcome
from annotations.audit.selectors import latest_audit
from annotations.core.errors import InvalidStudy
from annotations.core.exclusion_models import answers_kept
from annotations.core.models import Study
from annotations.core.words import counted
from assistants.models import AISystem
from assistants.systems import AI_RATER_NAME
from estimators.nodata.kappa import MIN_KAPPA_MINORITY, cohen_kappa

HUMAN_BINARY = {Rating.Label.ACCURATE: 1, Rating.Label.INACCURATE: 0,
                Rating.Label.UNSUPPORTED: 0, Rating.Label.DISPUTED: 0}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def audit_rate(audit: Audit) -> tuple[float | None, float | None, float | None]:
    """(success rate, lower, upper) of a finished audit (its stored summary)."""
    s = audit.summary or {}
    lo, hi = s.get("interval") or (None, None)
    return s.get("success_rate"), lo, hi


def routing_gate_check(*, study: Study, settings: AssistedSettings) -> None:
    """Refuse routing by confidence the gate does not allow (module docstring)."""
    if settings.routing == AssistedSettings.Routing.ALL or settings.gate_min_success is None:
        return
    minimum = settings.gate_min_success
    system = settings.gate_system
    if system is None:
        raise InvalidStudy("Routing by AI confidence is gated, but the gate names no AI "
                           "system: choose the audited AI system.", field="routing")
    audit = latest_audit(ai_system_id=system.pk)
    if audit is None:
        raise InvalidStudy(
            f"Routing by AI confidence needs an audit of {system.name} with a success rate "
            f"of at least {_pct(minimum)}, and {system.name} has no finished audit: run one "
            f"(Audits, /studies/{study.pk}/audits/) or route every sentence to the raters.",
            field="routing")
    rate, lo, hi = audit_rate(audit)
    if rate is None or rate < minimum:
        raise InvalidStudy(
            f"Routing by AI confidence needs an audit of {system.name} with a success rate "
            f"of at least {_pct(minimum)}; its latest audit (#{audit.pk}) succeeded on "
            f"{_pct(rate)} (95 % interval {_pct(lo)}–{_pct(hi)}, {audit.successes} of "
            f"{counted(audit.total, 'datapoint')}).", field="routing")


def human_labels(study: Study) -> dict[str, int]:
    """{sentence external id: 0/1}: the majority of the baseline arms' binary ratings
    (module docstring); ties and sentences without such a rating are left out, and so
    are rejected ratings (reviews) and excluded ones."""
    baseline = [a.pk for a in Arm.objects.filter(study=study) if a.is_baseline]
    votes: dict[str, Counter] = defaultdict(Counter)
    for external_id, label in (answers_kept(Rating.objects.filter(
                                   study=study, arm_id__in=baseline,
                                   label__in=list(HUMAN_BINARY)), study)
                               .values_list("sentence__external_id", "label")):
        votes[external_id][HUMAN_BINARY[label]] += 1
    out = {}
    for external_id, count in votes.items():
        if count[0] != count[1]:
            out[external_id] = int(count[1] > count[0])
    return out


def human_agreement(*, study: Study, audit: Audit) -> dict | None:
    """κ of the audit's evaluator labels (before any flip) with the study's human labels of
    the same items (``kappa.as_dict()``), or None when no audited item has one."""
    humans = human_labels(study)
    if not humans:
        return None
    pairs = [(label, humans[item]) for item, label in
             AuditOutcome.objects.filter(audit=audit, item__in=list(humans))
             .values_list("item", "label") if label is not None]
    if not pairs:
        return None
    return cohen_kappa([a for a, _ in pairs], [b for _, b in pairs]).as_dict()


def ai_rater_audit(study: Study) -> dict | None:
    """The latest audit of the gate's AI system (without a gate: of the study's AI rater
    system) for a page: the audit, its rate and interval as text, κ with the study's human
    ratings (formatted; absent without such ratings), the gate's minimum and whether the
    audit meets it. None when there is neither such an audit nor a gate."""
    settings = AssistedSettings.objects.filter(study=study).select_related("gate_system").first()
    minimum = settings.gate_min_success if settings else None
    system = settings.gate_system if settings and settings.gate_system_id else None
    if system is None:
        system = AISystem.objects.filter(study=study, name=AI_RATER_NAME).first()
    audit = latest_audit(ai_system_id=system.pk if system else None)
    if audit is None and minimum is None:
        return None
    out: dict = {"minimum": None if minimum is None else _pct(minimum),
                 "system": system.name if system else "", "audit": audit}
    if audit is None:
        return out
    rate, lo, hi = audit_rate(audit)
    out.update(rate=_pct(rate), lo=_pct(lo), hi=_pct(hi),
               passes=None if minimum is None else (rate is not None and rate >= minimum))
    kappa = human_agreement(study=study, audit=audit)
    if kappa is not None:
        def f(x):
            return "—" if x is None else f"{x:.3f}"
        out["kappa"] = {"value": f(kappa["kappa"]), "lo": f(kappa["lower"]),
                        "hi": f(kappa["upper"]), "n": kappa["n"],
                        # too few minority labels: no interval keeps its promise
                        "unreliable": kappa["lower"] is not None
                        and not kappa["interval_reliable"],
                        "minority": kappa["n_minority"], "min_minority": MIN_KAPPA_MINORITY}
    return out

