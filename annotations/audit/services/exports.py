"""An audit's downloads, written through ``core.exports.rows_write`` (CSV with formulas
defused, or JSONL): the per-datapoint outcomes, every round played, the summary, and the
two files it ran on (commitments, datapoints) as uploaded."""

from __future__ import annotations

from typing import IO

from annotations.audit.models import Audit, AuditFile
from annotations.audit.selectors import outcomes_of
from annotations.core.exports import rows_write

WHATS = ("outcomes", "rounds", "summary", "commitments", "datapoints")
RAW = ("commitments", "datapoints")
OUTCOME_FIELDS = ["item", "success", "label", "final_label", "flipped", "challenge",
                  "criterion", "reason", "rounds_played", "reference"]
ROUND_FIELDS = ["item", "round", "label", "similar", "challenge", "passed", "criterion",
                "reason"]


def _outcomes(audit: Audit):
    for o in outcomes_of(audit).iterator(chunk_size=2000):
        yield {"item": o.item, "success": o.success, "label": o.label,
               "final_label": o.final_label, "flipped": o.flipped, "challenge": o.challenge,
               "criterion": o.criterion, "reason": o.reason, "rounds_played": len(o.rounds),
               "reference": o.reference}


def _rounds(audit: Audit):
    for o in outcomes_of(audit).iterator(chunk_size=2000):
        for r in o.rounds:
            yield {"item": o.item, **r}


def _summary(audit: Audit):
    s = audit.summary or {}
    yield {"audit": audit.pk, "study": audit.study_id, "status": audit.status,
           "rubric": audit.rubric_snapshot.get("name", ""),
           "criteria": [c["name"] for c in audit.rubric_snapshot.get("criteria", [])],
           "evaluator": audit.evaluator_name, "dataset": audit.dataset_name,
           "rounds": audit.rounds, "phi": audit.phi, "seed": audit.seed,
           "n": s.get("n"), "successes": s.get("successes"),
           "success_rate": s.get("success_rate"),
           "interval_low": (s.get("interval") or [None, None])[0],
           "interval_high": (s.get("interval") or [None, None])[1],
           "flips": s.get("flips"), "error_factor": s.get("error_factor"),
           "failures_by_challenge": s.get("failures_by_challenge"),
           "failures_by_criterion": s.get("failures_by_criterion"),
           "kappa": (s.get("kappa") or {}).get("kappa"),
           "kappa_low": (s.get("kappa") or {}).get("lower"),
           "kappa_high": (s.get("kappa") or {}).get("upper"),
           "kappa_pairs": (s.get("kappa") or {}).get("n")}


def audit_export(*, audit: Audit, what: str, out: IO[str], fmt: str) -> int:
    """Write the download ``what`` (``WHATS``; the raw files ignore ``fmt``)."""
    if what in RAW:
        data = AuditFile.objects.filter(audit=audit).values_list(what, flat=True).first()
        text = bytes(data or b"").decode("utf-8", errors="replace")
        out.write(text)
        return text.count("\n")
    if what == "rounds":
        return rows_write(_rounds(audit), out=out, fmt=fmt, fields=ROUND_FIELDS)
    if what == "summary":
        return rows_write(_summary(audit), out=out, fmt=fmt)
    return rows_write(_outcomes(audit), out=out, fmt=fmt, fields=OUTCOME_FIELDS)
