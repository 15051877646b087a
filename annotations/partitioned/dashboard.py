"""What the managers' dashboard shows: the rows it renders from a snapshot's payload and the
plain-language meaning of every column and flag (the same words as docs/manager.md).

Snapshots of every age render: keys added later (``yes_share``, ``skipped``…) may be
absent, and an estimate without the labels it needs is "no data" — never the 0.5 that
older snapshots stored for it."""

from __future__ import annotations

from annotations.core import selectors
from annotations.core.charts import (
    SYSTEM_PALETTE,
    convergence_chart,
    headline,
    interval_chart,
    xy_chart,
)
from annotations.core.models import Study
from annotations.partitioned.selectors import quality_check_summary, study_consistency_failure
from estimators.partitioned.design_estimate import APPROXIMATE_EVENTS, MAX_SHARE
from estimators.partitioned.intervals import APPROXIMATE_BELOW, APPROXIMATE_COVERAGE

ESTIMATOR_CHOICES = [
    ("ml", "Maximum likelihood"), ("ivw", "IVW (plug-in weights)"),
    ("ivw_pilot", "IVW (closed-form weight)"), ("ivw_fixed", "IVW (w = 0.5)"),
    ("ord", "Ordinary only"), ("comp", "Complementary only"),
]

# key: (short label, plain-language meaning). Shown as tooltips / "i" popovers and listed
# in docs/manager.md (a test keeps the two in step).
GLOSSARY: dict[str, tuple[str, str]] = {
    "system": ("AI system", "The AI model or workflow whose answers are being checked."),
    "counts": ("n ord / n comp", "How many labels inform this system's estimate: ordinary "
               "labels (a specialist said \"yes, it is class k\") and complementary labels "
               "(\"no, it is not class k\"). With several questions per item, effective counts."),
    "ord": ("Â ord", "Accuracy from the \"yes\" answers only: among items whose class a "
            "specialist confirmed, the share the AI system got right."),
    "comp": ("Â comp (raw)", "Accuracy from the \"no\" answers only. Unbiased, so with few "
             "labels it can fall below 0 or above 1; not available with 2 classes."),
    "ivw": ("IVW", "The ordinary and complementary estimates averaged, each weighted by how "
            "precise it is (inverse-variance weighting)."),
    "ml": ("ML ± SE", "Maximum likelihood: both kinds of label combined, the estimate to "
           "read first. ± SE is its standard error (about 1/4 of the interval's width)."),
    "interval": ("95 % interval", "The range that contains the true accuracy 95 % of the "
                 "time. Narrower with more labels. Marked \"≈ approximate\" where it rests "
                 "on so few events that this cannot hold exactly (the note below says why)."),
    "gold": ("Gold subset", "Accuracy on the items whose correct answer the researcher "
             "imported (a validation check; n = how many such items)."),
    "labels_needed": ("Labels to target", "How many more \"no\" answers bring the ML "
                      "interval down to the study's target width. \"—\" when there is no "
                      "data to compute it yet; \"reached\" when the target is met."),
    "estimate": ("Estimate ± SE", "The chosen estimator's accuracy and standard error."),
    "bound": ("Finite-sample bound (±)", "A half-width guaranteed at any sample size (not "
              "just on average): wider than the interval, and only for some estimators. "
              "\"not valid\" when its weight came from the same data."),
    "ipw": ("IPW-corrected ML", "ML after giving each class's answers the weight 1 / (its "
            "completion rate): read it when the completion-imbalance warning shows."),
    "stratified": ("Stratified ML", "ML per stratum (a group of items the researcher "
                   "defined), combined with each stratum's share of all items."),
    "flags": ("Flags", "Warnings about this system's estimate, e.g. too few labels for the "
              "finite-sample guarantee to say much; the design effect shows how much "
              "asking several questions per item widens the interval."),
    "few_labels_for_guarantee": ("too few labels for the guarantee", "The finite-sample "
                                 "bound is wider than ±0.1: it guarantees little yet."),
    "class": ("Class", "The answer option (or category) a pool of specialists is asked "
              "about: \"is the answer class k?\"."),
    "specialists": ("Specialists", "Members answering this class's questions."),
    "yes": ("Ordinary (yes)", "Questions answered \"yes, it is this class\"."),
    "no": ("Complementary (no)", "Questions answered \"no, it is not this class\"."),
    "unsure": ("Not sure", "Questions answered \"not sure\": left out of every estimate."),
    "skipped": ("Skipped", "Questions a specialist handed back to the pool for another "
                "specialist."),
    "skip_rate": ("Skip rate", "Share of the questions handed to this class's specialists "
                  "that were skipped."),
    "pending": ("Pending", "Questions routed to this class, waiting for a specialist."),
    "leased": ("Leased", "Questions on a specialist's screen right now."),
    "completion": ("Completion", "Answered ÷ routed questions of this class. Classes much "
                   "slower than others bias the estimates (see IPW)."),
    "abstention": ("Abstention", "Share of this class's answers that were \"not sure\"."),
    "yes_share": ("Share of \"yes\"", "Among answered questions (\"not sure\" left out), the "
                  "share answered \"yes\". Because each item's class is drawn at random, it "
                  "should be 1/K; a significant difference means abstentions or routing "
                  "depend on the true answer, which biases the estimates."),
    "answered": ("Answered", "Questions of this class answered \"yes\" or \"no\" (\"not sure\" "
                 "left out)."),
    "specialist": ("Specialist", "One specialist's quality-check answers."),
    "expected": ("Expected", "1/K: the share of \"yes\" answers when routing is uniform."),
    "p_value": ("p-value", "Binomial test of the share against 1/K: the smaller it is, the less "
                "likely the difference is chance. A flag marks a significant departure."),
    "no_data": ("no data", "This estimator needs labels this system does not have yet (e.g. "
                "complementary with 2 classes or no \"no\" answers): nothing is estimated."),
    "stale": ("stale", "The figures do not include every answer: the last recompute failed, "
              "or answers have waited more than a minute for one."),
    "design_estimate": ("Every answer, weighted by its design", "The accuracy estimate "
                        "from every answer, each weighted by 1 / the probability its "
                        "routing design gave the class asked: unbiased under any mix of "
                        "designs, with its 95 % interval and standard error."),
    "uniform_answers": ("Uniform design would need", "How many answers a uniform design "
                        "(every class equally often, one question per item) would need for "
                        "the same standard error, and how many answers the study's designs "
                        "saved (\"more than uniform\" when they cost answers, as for a "
                        "system the design does not route on)."),
    "uniform_part": ("Uniform part", "Answers to items asked as under the uniform design "
                     "(a random share ε of a targeted design's items, and every item of a "
                     "uniform design): the paper's estimators and the checks read only "
                     "these."),
    "correct": ("Correct", "Quality checks (items with a known answer) answered right."),
    "wrong": ("Wrong", "Quality checks answered wrong."),
    "qc_accuracy": ("Accuracy", "Correct ÷ (correct + wrong) on quality checks."),
    "band": ("Confidence band", "A range of the AI system's own stated confidence. Unless "
             "the researcher fixed the edges, each band holds about a third of the system's "
             "items."),
    "band_items": ("Items", "How many of the study's items the system gave a confidence "
                   "in this band, and their share of all its items with a confidence."),
    "mean_confidence": ("Mean confidence", "The system's average stated confidence in this "
                        "band. A well-calibrated system is about as accurate as it is "
                        "confident."),
    "band_accuracy": ("Accuracy in band", "The chosen estimator's accuracy on this band's "
                      "items, from the specialists' answers alone (no gold label), with its "
                      "95 % interval."),
    "threshold": ("To humans if confidence ≤", "Items on which the AI's confidence is at "
                  "or below this value would go to humans instead of the AI."),
    "human_share": ("Share to humans", "The share of the system's items (with a confidence) "
                    "that would go to humans at this threshold."),
    "kept_accuracy": ("AI accuracy on the rest", "The estimated accuracy the AI keeps on the "
                      "items above the threshold, with its 95 % interval. If it rises as "
                      "more goes to humans, the AI's confidence tells its right answers from "
                      "its wrong ones."),
}


def _has_data(system: dict, method: str) -> bool:
    """Whether ``method`` has the labels it needs for this system (older snapshots stored
    0.5 where it had none)."""
    counts = system.get("counts") or {}
    n_ord = counts.get("n_ord") or 0
    n_comp = counts.get("n_comp") or 0
    if method == "ord":
        return n_ord > 0
    if method == "comp":
        return n_comp > 0
    return n_ord + n_comp > 0


def estimate_cell(system: dict, method: str, k: int | None = None) -> dict | None:
    """The system's ``method`` estimate, or None where there is no data for it."""
    if method == "comp" and k == 2:
        return None
    est = (system.get("estimates") or {}).get(method)
    if not est or est.get("accuracy") is None or not _has_data(system, method):
        return None
    return est


def _stratum_cell(stratum: dict, method: str, k: int | None) -> dict | None:
    if "estimates" in stratum:
        est = (stratum.get("estimates") or {}).get(method)
    else:  # the oldest snapshots: ML only, flat
        est = stratum if method == "ml" else None
    counts = {"n_ord": stratum.get("n_ord"), "n_comp": stratum.get("n_comp")}
    if "n_ord" not in stratum:
        counts = {"n_ord": 1, "n_comp": 1}  # unknown: trust the estimate's own None
    return estimate_cell({"counts": counts, "estimates": {method: est}}, method, k)


def _without_placeholders(systems: list[dict], k: int | None) -> list[dict]:
    """The systems with every no-data estimate set to None (for the charts)."""
    return [{**s, "estimates": {m: estimate_cell(s, m, k) for m in (s.get("estimates") or {})}}
            for s in systems]


def _band_cell(cell: dict, method: str, k: int | None) -> dict | None:
    return estimate_cell({"counts": cell.get("counts"), "estimates": cell.get("estimates")},
                         method, k)


def band_context(systems: list[dict], method: str, k: int | None) -> dict | None:
    """Per system with confidence bands: its band rows and curve points with the chosen
    estimator's cell (None without data), and the curve chart — the AI's accuracy on the
    items it keeps against the share sent to humans, one colour per system."""
    banded = [s for s in systems if s.get("bands")]
    if not banded:
        return None
    tables, series = [], []
    for i, s in enumerate(banded):
        bands = s["bands"]
        rows = [{**r, "cell": _band_cell(r, method, k)} for r in bands["rows"]]
        curve = [{**p, "cell": _band_cell(p, method, k)} for p in bands["curve"]]
        tables.append({"name": s["name"], "rows": rows, "curve": curve,
                       "n_items": bands.get("n_items")})
        points = []
        for p in curve:
            cell = p["cell"]
            where = ("everything to the AI" if p["threshold"] is None
                     else f"confidence ≤ {p['threshold']:.2f} to humans")
            title = (f"{s['name']}, {where}: AI accuracy on the rest "
                     + (f"{cell['accuracy']:.3f} [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]"
                        if cell else "no data"))
            points.append({"x": p["human_share"], "y": cell["accuracy"] if cell else None,
                           "low": cell["ci_low"] if cell else None,
                           "high": cell["ci_high"] if cell else None, "title": title})
        series.append({"name": s["name"], "color": SYSTEM_PALETTE[i % len(SYSTEM_PALETTE)],
                       "points": points})
    chart = xy_chart(series, x_label="share of items sent to humans →",
                     y_label="AI accuracy on the items it keeps")
    return {"tables": tables, "chart": chart}


def _headline_values(cell: dict | None) -> tuple:
    if cell is None:
        return (None, None, None, False)
    return (cell["accuracy"], cell.get("ci_low"), cell.get("ci_high"),
            bool(cell.get("approximate")))


def design_context(payload: dict) -> dict:
    """The dashboard's Routing design section: per system the design-weighted estimate and
    the answers a uniform design would have needed for its standard error (saved = that
    less the answers given; negative when the uniform design would have needed fewer, as
    for a system the design does not route on), and the study's designs."""
    design = payload["design"]
    rows = []
    for s in payload.get("systems") or []:
        cell = s.get("design")
        need = (cell or {}).get("uniform_answers")
        saved = (need - design["answers"]) if need else None
        rows.append({"name": s["name"], "cell": cell, "uniform_answers": need,
                     "saved": saved, "saved_more": -saved if saved is not None else None})
    return {"rows": rows, "designs": design["designs"], "answers": design["answers"],
            "approximate": [r["name"] for r in rows if (r["cell"] or {}).get("approximate")],
            "flag_events": APPROXIMATE_EVENTS, "flag_share": round(100 * MAX_SHARE),
            "items": design["items"],
            "uniform_part": (payload.get("uniform_part") or {}).get("answers")}


def approximate_note(context: dict) -> dict | None:
    """The note under the dashboard's tables when an interval it shows is approximate
    (``estimators.partitioned.intervals.approximate``: it rests on fewer than
    ``APPROXIMATE_BELOW`` events of a kind), naming the AI systems concerned, with the
    coverage such intervals have on the grids of docs/coverage.md. None when no shown
    interval is approximate."""
    shown: dict[str, list] = {}
    for row in context.get("systems", []):
        shown.setdefault(row["system"]["name"], []).extend(row["cells"].values())
    by_stratum = len((context.get("payload") or {}).get("strata") or []) > 1  # shown then
    for row in context.get("chosen", []):
        system = row["system"]
        shown.setdefault(system["name"], []).extend(
            [row["est"], system.get("ipw"), system.get("stratified"),
             *(cell for _, cell in row["strata"] if by_stratum)])
    for table in (context.get("bands") or {}).get("tables", []):
        shown.setdefault(table["name"], []).extend(
            [r["cell"] for r in table["rows"]] + [p["cell"] for p in table["curve"]])
    names = [name for name, cells in shown.items()
             if any(cell and cell.get("approximate") for cell in cells)]
    if not names:
        return None
    low, high = APPROXIMATE_COVERAGE
    study = context.get("study")
    return {"below": APPROXIMATE_BELOW, "low": low, "high": high, "systems": names,
            "several": bool(study and study.queries_per_item > 1)}


def dashboard_context(study: Study, method: str = "ml") -> dict:
    """Everything the dashboard template needs, from the latest snapshot and the recompute
    health."""
    snapshot = selectors.study_latest_snapshot(study=study)
    methods = dict(ESTIMATOR_CHOICES)
    method = method if method in methods else "ml"
    health = selectors.study_recompute_health(study=study)
    context: dict = {"study": study, "snapshot": snapshot, "method": method,
                     "method_label": methods[method], "choices": ESTIMATOR_CHOICES,
                     "health": health,
                     "consistency": study_consistency_failure(study=study)}
    if snapshot is not None:
        payload = snapshot.payload
        k = payload.get("k")
        systems = payload.get("systems") or []
        context["payload"] = payload
        context["systems"] = [
            {"system": s, "cells": {m: estimate_cell(s, m, k) for m, _ in ESTIMATOR_CHOICES}}
            for s in systems
        ]
        context["side_by_side"] = [
            {"name": s["name"],
             "cells": [(label, estimate_cell(s, m, k)) for m, label in ESTIMATOR_CHOICES]}
            for s in systems
        ]
        context["chosen"] = [
            {"system": s, "est": estimate_cell(s, method, k),
             "strata": [(h, _stratum_cell(v, method, k))
                        for h, v in (s.get("strata") or {}).items()]}
            for s in systems
        ]
        context["headline"] = headline(
            "Estimated accuracy (maximum likelihood)",
            [(s["name"], *_headline_values(estimate_cell(s, "ml", k))) for s in systems])
        if payload.get("design"):
            context["design"] = design_context(payload)
            context["headline"] = headline(
                "Estimated accuracy (every answer, weighted by its routing design)",
                [(s["name"], *_headline_values(s.get("design"))) for s in systems])
        if payload.get("allocation"):
            context["allocation"] = {**payload["allocation"],
                                     "percent": round(100 * payload["allocation"]["ratio"])}
            context["headline"] = headline(
                "Estimated accuracy (strata weighted by their items: answers were allocated "
                "across strata)",
                [(s["name"], *_headline_values(s.get("stratified"))) for s in systems])
        context["bands"] = band_context(systems, method, k)
        context["yes_share"] = payload.get("yes_share")
        context["has_skips"] = any("skipped" in c for c in payload.get("classes", []))
        context["interval_chart"] = interval_chart(_without_placeholders(systems, k))
        context["approximate_note"] = approximate_note(context)
        history = selectors.study_snapshot_history(study=study)
        context["convergence_chart"] = convergence_chart(
            [(s.n_answered, _without_placeholders(s.payload.get("systems") or [],
                                                  s.payload.get("k")))
             for s in history]
        )
    qc_users, qc_classes = quality_check_summary(study=study)
    context.update(qc_users=qc_users, qc_classes=qc_classes)
    return context


# --- the CSV of every figure and table (core.exports figures; registered in hooks) --------
def _cell_values(cell: dict | None) -> dict:
    cell = cell or {}
    return {"accuracy": cell.get("accuracy"), "se": cell.get("se"),
            "ci_low": cell.get("ci_low"), "ci_high": cell.get("ci_high")}


def _rows_estimates(payload: dict, study: Study | None = None) -> list[dict]:
    """The interval chart and the estimates tables: every system × estimator (empty cells
    where there is no data), with its counts, gold-subset accuracy and labels to target."""
    k = payload.get("k")
    rows = []
    for s in payload.get("systems") or []:
        counts, ref = s.get("counts") or {}, s.get("reference") or {}
        for method, label in ESTIMATOR_CHOICES:
            cell = estimate_cell(s, method, k)
            rows.append({"system": s["name"], "estimator": label, **_cell_values(cell),
                         "bound": (cell or {}).get("bound"),
                         "bound_valid": (cell or {}).get("bound_valid"),
                         "n_ord": counts.get("n_ord"), "n_comp": counts.get("n_comp"),
                         "gold_accuracy": ref.get("accuracy"), "gold_n": ref.get("n"),
                         "labels_needed": s.get("labels_needed")})
    return rows


def _rows_design(payload: dict, study: Study | None = None) -> list[dict]:
    """The design-weighted estimates (empty for a study that only routed uniformly)."""
    if not payload.get("design"):
        return []
    return [{"system": row["name"], **_cell_values(row["cell"]),
             "uniform_answers": row["uniform_answers"], "answers": payload["design"]["answers"]}
            for row in design_context(payload)["rows"]]


def _rows_corrections(payload: dict, study: Study | None = None) -> list[dict]:
    """The corrections table: IPW-corrected and stratified ML, flags, design effect."""
    rows = []
    for s in payload.get("systems") or []:
        ipw, strat = s.get("ipw") or {}, s.get("stratified") or {}
        rows.append({"system": s["name"], "ipw_accuracy": ipw.get("accuracy"),
                     "ipw_ci_low": ipw.get("ci_low"), "ipw_ci_high": ipw.get("ci_high"),
                     "stratified_accuracy": strat.get("accuracy"),
                     "stratified_ci_low": strat.get("ci_low"),
                     "stratified_ci_high": strat.get("ci_high"),
                     "flags": " ".join(s.get("flags") or []),
                     "design_effect": s.get("design_effect")})
    return rows


def _rows_strata(payload: dict, study: Study | None = None) -> list[dict]:
    k = payload.get("k")
    return [{"system": s["name"], "stratum": h, "estimator": label,
             **_cell_values(_stratum_cell(v, method, k))}
            for s in payload.get("systems") or [] for h, v in (s.get("strata") or {}).items()
            for method, label in ESTIMATOR_CHOICES]


def _rows_convergence(payload: dict, study: Study) -> list[dict]:
    """The convergence chart: each snapshot's ML estimate of each system."""
    rows = []
    for snap in selectors.study_snapshot_history(study=study):
        k = snap.payload.get("k")
        for s in snap.payload.get("systems") or []:
            rows.append({"answered": snap.n_answered, "computed_at": snap.computed_at.isoformat(),
                         "system": s["name"], **_cell_values(estimate_cell(s, "ml", k))})
    return rows


def _rows_bands(payload: dict, study: Study | None = None) -> list[dict]:
    """The confidence-band tables and curve: per system, band or threshold, estimator."""
    k = payload.get("k")
    rows = []
    for s in payload.get("systems") or []:
        bands = s.get("bands") or {}
        for r in bands.get("rows") or []:
            counts = r.get("counts") or {}
            for method, label in ESTIMATOR_CHOICES:
                rows.append({"system": s["name"], "part": "band", "band": r.get("label"),
                             "n_items": r.get("n_items"), "share": r.get("share"),
                             "mean_confidence": r.get("mean_confidence"),
                             "n_ord": counts.get("n_ord"), "n_comp": counts.get("n_comp"),
                             "estimator": label, **_cell_values(_band_cell(r, method, k))})
        for p in bands.get("curve") or []:
            for method, label in ESTIMATOR_CHOICES:
                rows.append({"system": s["name"], "part": "curve",
                             "threshold": p.get("threshold"),
                             "human_share": p.get("human_share"), "estimator": label,
                             **_cell_values(_band_cell(p, method, k))})
    return rows


def _rows_yes_share(payload: dict, study: Study | None = None) -> list[dict]:
    share = payload.get("yes_share") or {}
    if not share:
        return []
    overall = {"class": "(all classes)", "yes": share.get("yes"),
               "answered": share.get("answered"), "share": share.get("share"),
               "expected": share.get("expected"), "p_value": share.get("p_value"),
               "flag": share.get("flag")}
    return [overall] + [{"class": c.get("name"), "yes": c.get("yes"),
                         "answered": c.get("answered"), "share": c.get("share"),
                         "expected": share.get("expected"), "p_value": c.get("p_value"),
                         "flag": c.get("flag")} for c in share.get("classes") or []]


def _rows_classes(payload: dict, study: Study | None = None) -> list[dict]:
    return [{"class": c.get("name"), **{key: v for key, v in c.items() if key != "name"}}
            for c in payload.get("classes") or []]


def _rows_quality_checks(payload: dict, study: Study) -> list[dict]:
    per_user, per_class = quality_check_summary(study=study)
    return ([{"per": "class", "class": r.label, "specialist": "", "correct": r.correct,
              "wrong": r.wrong, "unsure": r.unsure, "accuracy": r.accuracy}
             for r in per_class]
            + [{"per": "specialist", "class": r.extra.get("class", ""), "specialist": r.label,
                "correct": r.correct, "wrong": r.wrong, "unsure": r.unsure,
                "accuracy": r.accuracy} for r in per_user])


# name: (title, rows(payload, study))
FIGURES = {
    "estimates": ("Estimated accuracy, every estimator (chart and tables)", _rows_estimates),
    "design": ("Every answer, weighted by its routing design", _rows_design),
    "corrections": ("Corrections: IPW, stratified, flags", _rows_corrections),
    "convergence": ("Convergence of the ML estimate", _rows_convergence),
    "bands": ("Accuracy by the AI's own confidence", _rows_bands),
    "yes-share": ("Share of \"yes\" answers", _rows_yes_share),
    "classes": ("Labels by class", _rows_classes),
    "strata": ("Accuracy by stratum", _rows_strata),
    "quality-checks": ("Quality checks", _rows_quality_checks),
}


def interval_widths(payload: dict) -> dict[str, float]:
    """Each AI system's accuracy interval width (the ML estimate's, as the dashboard shows
    it): what a webhook's target width is judged on (``core.services.notices``)."""
    widths = {}
    for system in payload.get("systems") or []:
        ml = (system.get("estimates") or {}).get("ml") or {}
        if ml.get("ci_low") is not None and ml.get("ci_high") is not None:
            widths[system["name"]] = ml["ci_high"] - ml["ci_low"]
    return widths
