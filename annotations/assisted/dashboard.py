"""What the assisted dashboard shows (METHODS.md M2; the paper's Figures 1–3 and results
table): rows and SVG charts from the latest analysis snapshot
(``services/assisted_analysis.py``), the CSV of every figure, and the plain-language
meaning of every column (the same words as docs/manager-assisted.md; a test keeps the two
in step). A request never recomputes."""

from __future__ import annotations

import io

from annotations.core import selectors
from annotations.core.charts import SYSTEM_PALETTE, bar_chart, headline, xy_chart
from annotations.core.exports import rows_write
from annotations.core.models import Study
from annotations.core.words import counted
from estimators.assisted.agreement import MIN_ALPHA_MINORITY
from estimators.assisted.reliance import MIN_RELIABLE_RATERS

RULE_CHOICES = [("individual", "Individual ratings"),
                ("majority", "Majority vote (ties count as Inaccurate)")]
COMPONENT_LABELS = {"search": "search results", "evidence": "evidence",
                    "reasoning": "reasoning", "judgments": "judgments",
                    "confidence": "confidence", "debate": "debate"}
RIGHT, WRONG, HUMANS, AI = "#1f8a4c", "#c0572b", "#2f6fb0", "#13233a"

# key: (short label, plain-language meaning): tooltips and docs/manager-assisted.md.
GLOSSARY: dict[str, tuple[str, str]] = {
    "arm": ("Arm", "A group of raters who all see the same parts of the AI rater's output "
            "(none, for the baseline). Each rater stays in one arm."),
    "baseline": ("Baseline", "The arm that sees no AI output: what the raters do alone."),
    "shows": ("Shows", "The parts of the AI's output this arm's raters see."),
    "raters": ("Raters", "People who rated at least one sentence in this arm."),
    "ratings": ("Ratings", "Sentences rated (skips are not ratings)."),
    "skips": ("Skips", "Sentences a rater handed back to the pool for someone else."),
    "opened": ("Opened a section", "Share of this arm's ratings where the rater expanded at "
               "least one section of the AI's output."),
    "links": ("Followed a link", "Share of ratings where the rater opened an evidence or "
              "search-result link."),
    "accuracy": ("Accuracy", "Share of ratings that match the sentence's gold label "
                 "(\"can't assess\" counts as wrong)."),
    "ai_right": ("When the AI was right", "The raters' accuracy on sentences the AI judged "
                 "correctly."),
    "ai_wrong": ("When the AI was wrong", "The raters' accuracy on sentences the AI judged "
                 "wrongly: the test of over-reliance."),
    "over_reliance": ("Over-reliance", "How much lower this arm's accuracy is than the "
                      "baseline's when the AI was wrong. Above 0: the AI's output misled "
                      "raters."),
    "under_reliance": ("Under-reliance", "How many more errors this arm makes than the "
                       "baseline when the AI was right. Above 0: raters ignored good "
                       "advice."),
    "effect": ("Effect (log-odds)", "How much the arm changes the odds that a rating is "
               "right, against the baseline on the same sentences (a logistic regression "
               "with a random intercept per sentence). Above 0: more often right."),
    "odds_ratio": ("Odds ratio", "e^effect: the factor on the odds of a right rating. "
                   "1 = no change; 1.5 = half as likely again."),
    "p_value": ("p", "How often an effect this far from 0 would arise by chance if the arm "
                "changed nothing. Below 0.05 is marked."),
    "sentence_spread": ("Sentence spread τ", "How much sentences differ in difficulty (the "
                        "random intercept's standard deviation, log-odds)."),
    "agreement_ai": ("Agrees with the AI", "Share of ratings whose verdict (Accurate or not) "
                     "equals the AI's."),
    "helpfulness": ("Helpfulness", "Raters' own rating of the AI's help: 0 not at all, 1 "
                    "somewhat, 2 extremely helpful (mean)."),
    "time": ("Time", "Mean time on a sentence, in seconds. Its 95 % interval (in the CSV) "
             "is approximate: a few raters rarely include the slowest, so when raters' "
             "speeds differ a lot it is too narrow."),
    "threshold": ("Threshold T", "Sentences on which the AI's confidence is at or below T "
                  "go to humans; the AI's verdict is kept for the rest."),
    "human_share": ("Share to humans", "The share of sentences sent to humans at this "
                    "threshold: the human workload."),
    "hybrid_accuracy": ("Hybrid accuracy", "Share of all sentences labelled correctly when "
                        "humans take those at or below the threshold and the AI the rest."),
    "budget": ("Budget", "The largest share of sentences that may go to humans."),
    "as_good": ("Thresholds as good", "The smallest and largest threshold whose accuracy is "
                "not significantly below the best one's. It holds the best threshold for "
                "sentences like these at least 95 % of the time; a wide range means the curve "
                "is flat there and the exact threshold matters little."),
    "sentence_interval": ("Interval over sentences", "A 95 % interval over sentences: how "
                          "accurate these raters and this AI would be on new sentences from "
                          "the same source. It does not include how much other raters would "
                          "differ."),
    "held_out": ("Held-out accuracy", "The best threshold is chosen on half of the "
                 "sentences and its accuracy measured on the other half, so it is not "
                 "flattered by the choice."),
    "gain": ("Gain over AI", "Accuracy minus the AI's accuracy alone on the same sentences; "
             "an interval above 0 means combining beats the AI alone."),
    "band": ("Confidence band", "A range of the AI's confidence; each band goes to the "
             "source (an arm, or the AI) most accurate on it."),
    "source": ("Source", "Who labels a band's sentences: the AI, or an arm's raters."),
    "confidence": ("AI confidence", "Share of the AI rater's samples agreeing with its most "
                   "common verdict."),
    "ai_accuracy_bin": ("AI accuracy", "Share of the sentences in this confidence range "
                        "that the AI got right. A well-calibrated AI is as accurate as it is "
                        "confident."),
    "ece": ("ECE", "Expected calibration error: the average gap between the AI's confidence "
            "and its accuracy, weighted by sentences. 0 is perfect."),
    "alpha": ("Krippendorff's α", "Agreement between raters of the same sentence beyond "
              "chance: 1 perfect, 0 no better than chance."),
    "agreement_label": ("Same label as the AI", "Share of ratings with exactly the AI's "
                        "label on the five-way scale."),
    "protocol": ("Who labels", "AI alone, one arm's raters alone, or hybridized (that arm "
                 "at or below the threshold, the AI above)."),
    "interval": ("95 % interval", "The range that holds the true value 95 % of the time "
                 "(clustered by rater, or over sentences)."),
    "rule": ("Human label", "Individual ratings (each rating counts) or the majority vote "
             "of a sentence's ratings (ties count as Inaccurate)."),
    "sentences": ("Sentences", "Sentences with a gold label and an AI rating: the ones "
                  "every accuracy is measured on."),
    "stale": ("stale", "The figures do not include every rating: the last recompute "
              "failed, or ratings have waited more than a minute for one."),
}


def _shows(components: list[str]) -> str:
    return ", ".join(COMPONENT_LABELS.get(c, c) for c in components) or "nothing (no AI)"


POOLED_COLOR = "#7a5c2e"


def _colors(payload: dict) -> dict[str, str]:
    names = [a["key"] for a in payload.get("arms", [])]
    palette = [c for c in SYSTEM_PALETTE if c != "#555555"]  # grey is the human share
    return {"All arms": POOLED_COLOR,
            **{n: palette[i % len(palette)] for i, n in enumerate(names)}}


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def curves_chart(rule_figures: dict, colors: dict[str, str]) -> dict | None:
    """Figure 1: hybrid accuracy against the threshold, one line per arm (and pooled), with
    95 % bars, and the share sent to humans (dashed)."""
    curves = rule_figures.get("curves") or []
    if not curves:
        return None
    thresholds = [r["threshold"] for c in curves for r in c["rows"]
                  if r["threshold"] is not None]
    x0 = max(0.0, round(min(thresholds, default=0.5) - 0.05, 2))
    series = []
    for c in curves:
        points = [{"x": r["threshold"], "y": r["hybrid_accuracy"], "low": r["lower"],
                   "high": r["upper"],
                   "title": f"{c['source']}, T = {r['threshold']:.2f}: accuracy "
                            f"{_fmt(r['hybrid_accuracy'])} [{_fmt(r['lower'])}, "
                            f"{_fmt(r['upper'])}], {100 * r['human_share']:.0f} % to humans"}
                  for r in c["rows"] if r["threshold"] is not None]
        series.append({"name": c["source"], "color": colors.get(c["source"], "#555"),
                       "points": points})
    longest = max(curves, key=lambda c: len(c["rows"]))
    series.append({"name": "Share sent to humans", "color": "#98a2b3", "dashed": True,
                   "markers": False,
                   "points": [{"x": r["threshold"], "y": r["human_share"],
                               "title": f"T = {r['threshold']:.2f}: "
                                        f"{100 * r['human_share']:.0f} % to humans"}
                              for r in longest["rows"] if r["threshold"] is not None]})
    ai = curves[0].get("ai_accuracy")
    if ai is not None:
        series.append({"name": f"AI alone ({ai:.2f})", "color": AI, "dashed": True,
                       "markers": False,
                       "points": [{"x": x0, "y": ai, "title": f"AI alone: {ai:.3f}"},
                                  {"x": 1.0, "y": ai, "title": f"AI alone: {ai:.3f}"}]})
    return xy_chart(series, x_label="threshold T (AI confidence) →",
                    y_label="accuracy / share", x_range=(x0, 1.0), x_format="{:.2f}")


def reliance_chart(reliance: dict | None) -> dict | None:
    """Figure 2: per arm, the raters' accuracy when the AI was right and when it was wrong,
    with rater-clustered 95 % intervals."""
    if not reliance:
        return None
    groups = []
    for r in reliance["rows"]:
        bars = []
        for key, label, color in (("accuracy_ai_right", "AI right", RIGHT),
                                  ("accuracy_ai_wrong", "AI wrong", WRONG)):
            v = r.get(key)
            bars.append({"value": v, "low": r.get(f"{key}_lower"),
                         "high": r.get(f"{key}_upper"), "color": color,
                         "title": f"{r['arm']}, {label}: {_fmt(v)} "
                                  f"[{_fmt(r.get(f'{key}_lower'))}, "
                                  f"{_fmt(r.get(f'{key}_upper'))}]"})
        groups.append({"name": f"{r['arm']} ({counted(r['n_ratings'], 'rating')})", "bars": bars})
    return bar_chart(groups, x_label="raters' accuracy →",
                     legend=[{"label": "when the AI was right", "color": RIGHT},
                             {"label": "when the AI was wrong", "color": WRONG}])


def reliance_unreliable(reliance: dict | None) -> dict | None:
    """Where the reliance intervals are unreliable: arms with fewer than
    ``MIN_RELIABLE_RATERS`` raters (the size from which they cover at least 93 %,
    docs/coverage.md) — their own intervals, and, when the baseline is that small, every
    comparison with it. None when every arm has enough raters."""
    if not reliance:
        return None
    small = [r["arm"] for r in reliance["rows"] if (r.get("n_raters") or 0) < MIN_RELIABLE_RATERS]
    if not small:
        return None
    return {"arms": small, "min_raters": MIN_RELIABLE_RATERS,
            "baseline": reliance.get("baseline") in small}


def agreement_unreliable(agreement: list[dict] | None) -> dict | None:
    """Where α's interval cannot keep its promise: rows with fewer than
    ``MIN_ALPHA_MINORITY`` ratings outside the most common verdict, or no disagreement
    (``estimators.assisted.agreement``; docs/coverage.md). None when there is none (and
    for snapshots computed before the rule, which carry no ``interval_reliable``)."""
    rows = [a for a in agreement or []  # (α shown, with or without an interval found)
            if a.get("interval_reliable") is False and a.get("alpha") is not None]
    if not rows:
        return None
    return {"sources": [a["source"] for a in rows], "min_minority": MIN_ALPHA_MINORITY}


def few_raters(payload: dict) -> list[str]:
    """Arms with ratings but fewer than ``MIN_RELIABLE_RATERS`` raters: their sentence
    intervals (curves, results rows) hold these few raters fixed (docs/coverage.md
    "Assisted: hybridization, intervals over sentences")."""
    return [a["key"] for a in payload.get("arms", [])
            if a.get("n_ratings") and (a.get("n_raters") or 0) < MIN_RELIABLE_RATERS]


def calibration_chart(calibration: dict | None, rule: str) -> dict | None:
    """Figure 3: the AI's accuracy against its confidence (reliability diagram, Blaker's
    95 % bars) and the humans' accuracy on the same sentences; the diagonal is perfect
    calibration."""
    if not calibration or not calibration.get("rows"):
        return None
    ai = [{"x": r["mean_confidence"], "y": r["accuracy"], "low": r["accuracy_lower"],
           "high": r["accuracy_upper"],
           "title": f"AI confidence {r['mean_confidence']:.2f} "
                    f"({counted(r['n'], 'sentence')}): "
                    f"AI accuracy {_fmt(r['accuracy'])}"} for r in calibration["rows"]]
    series = [{"name": "AI accuracy", "color": AI, "points": ai}]
    humans = (calibration.get("humans") or {}).get(rule)
    if humans:
        series.append({"name": "Human accuracy (all arms)", "color": HUMANS, "points": [
            {"x": r["mean_confidence"], "y": r["accuracy"],
             "title": f"AI confidence {r['mean_confidence']:.2f}: humans "
                      f"{_fmt(r['accuracy'])}"} for r in humans]})
    x0 = max(0.0, round(min(r["mean_confidence"] for r in calibration["rows"]) - 0.05, 2))
    return xy_chart(series, x_label="AI confidence →", y_label="accuracy",
                    x_range=(x0, 1.0), diagonal=True, x_format="{:.2f}")


def _held_out_rows(rows: list[dict]) -> list[dict]:
    """The held-out table without repeats: per source, budgets that choose the same
    threshold (the budget does not bind) are one row, "≤ 100 % … 30 %"."""
    out: list[dict] = []
    for row in rows:  # per source, budgets in decreasing order
        last = out[-1] if out else None
        if (last is not None and last["source"] == row["source"]
                and last["threshold"] == row["threshold"]):
            last["budget_low"] = row["budget"]
            continue
        out.append({**row, "budget_low": row["budget"]})
    return out


def _band_rows(bands: dict | None) -> list[dict]:
    if not bands:
        return []
    held = bands.get("held_out") or []
    return [{**row, "held_out_accuracy": held[j]["accuracy"] if j < len(held) else None,
             "held_out_n": held[j]["n_items"] if j < len(held) else None}
            for j, row in enumerate(bands.get("calibration") or [])]


def assisted_dashboard_context(study: Study, rule: str = "individual") -> dict:
    """Everything the assisted dashboard template needs (latest snapshot, recompute
    health, the chosen human-label rule)."""
    rules = dict(RULE_CHOICES)
    rule = rule if rule in rules else "individual"
    snapshot = selectors.study_latest_snapshot(study=study)
    health = selectors.study_recompute_health(study=study)
    context: dict = {"study": study, "snapshot": snapshot, "health": health, "rule": rule,
                     "rule_label": rules[rule], "rule_choices": RULE_CHOICES,
                     "figures": FIGURES}
    if snapshot is None or snapshot.payload.get("kind") != "assisted":
        return context
    payload = snapshot.payload
    colors = _colors(payload)
    figures = (payload.get("rules") or {}).get(rule) or {}
    context.update(
        payload=payload, figures_rule=figures,
        arms=[{**a, "shows": _shows(a["components"]), "color": colors.get(a["key"])}
              for a in payload.get("arms", [])],
        curves_chart=curves_chart(figures, colors),
        reliance_chart=reliance_chart(payload.get("reliance")),
        reliance_unreliable=reliance_unreliable(payload.get("reliance")),
        agreement_unreliable=agreement_unreliable(payload.get("agreement")),
        few_raters=few_raters(payload), min_raters=MIN_RELIABLE_RATERS,
        calibration_chart=calibration_chart(payload.get("calibration"), rule),
        curves=figures.get("curves", []),
        band_rows=_band_rows(figures.get("bands")),
        held_out=_held_out_rows(figures.get("held_out") or []),
        headline=headline("Raters' accuracy per arm",
                          [(r["arm"], r.get("accuracy"), r.get("accuracy_lower"),
                            r.get("accuracy_upper"))
                           for r in (payload.get("reliance") or {}).get("rows", [])]),
    )
    return context


# --- CSV downloads -----------------------------------------------------------------------
def _rows_curves(payload: dict, study: Study | None = None) -> list[dict]:
    return [{"rule": rule, "source": c["source"], **row}
            for rule, fig in (payload.get("rules") or {}).items()
            for c in fig.get("curves", []) for row in c["rows"]]


def _rows_held_out(payload: dict, study: Study | None = None) -> list[dict]:
    return [{"rule": rule, **row} for rule, fig in (payload.get("rules") or {}).items()
            for row in fig.get("held_out", [])]


def _rows_results(payload: dict, study: Study | None = None) -> list[dict]:
    return [{"rule": rule, "threshold_source": fig["overall"]["threshold_source"], **row}
            for rule, fig in (payload.get("rules") or {}).items() if fig.get("overall")
            for row in fig["overall"]["rows"]]


def _rows_bands(payload: dict, study: Study | None = None) -> list[dict]:
    out = []
    for rule, fig in (payload.get("rules") or {}).items():
        bands = fig.get("bands")
        if not bands:
            continue
        for part in ("calibration", "held_out"):
            out += [{"rule": rule, "items": part, **row} for row in bands.get(part) or []]
    return out


def _rows_calibration(payload: dict, study: Study | None = None) -> list[dict]:
    cal = payload.get("calibration") or {}
    rows = [{"who": "ai", "rule": "", **r} for r in cal.get("rows", [])]
    for rule, humans in (cal.get("humans") or {}).items():
        rows += [{"who": "humans (all arms)", "rule": rule, **r} for r in humans]
    return rows


def _rows_reliance(payload: dict, study: Study | None = None) -> list[dict]:
    return list((payload.get("reliance") or {}).get("rows", []))


def _rows_regression(payload: dict, study: Study | None = None) -> list[dict]:
    fit = payload.get("regression") or {}
    return [{**row, "baseline": fit.get("baseline"), "tau": fit.get("tau"),
             "converged": fit.get("converged")} for row in fit.get("rows", [])]


def _rows_agreement(payload: dict, study: Study | None = None) -> list[dict]:
    return list(payload.get("agreement") or [])


def _rows_arms(payload: dict, study: Study | None = None) -> list[dict]:
    return [{**a, "components": " ".join(a["components"])} for a in payload.get("arms", [])]


# name: (title, rows(payload, study)): core.exports figures (registered in hooks)
FIGURES = {
    "curves": ("Accuracy against the threshold (Figure 1)", _rows_curves),
    "held-out": ("Best threshold on held-out sentences", _rows_held_out),
    "bands": ("Confidence bands", _rows_bands),
    "reliance": ("Reliance per arm (Figure 2)", _rows_reliance),
    "regression": ("Mixed-effects regression of accuracy on arm", _rows_regression),
    "calibration": ("AI calibration (Figure 3)", _rows_calibration),
    "results": ("Results table", _rows_results),
    "agreement": ("Agreement", _rows_agreement),
    "arms": ("Arms", _rows_arms),
}


def figure_csv(payload: dict, name: str) -> str:
    """The figure ``name``'s data as CSV (``core.exports.rows_write``: a header of every key
    in first-seen order, empty cells for undefined values, formulas defused)."""
    out = io.StringIO()
    rows_write(FIGURES[name][1](payload), out=out)
    return out.getvalue()
