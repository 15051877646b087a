"""What the critique dashboard shows: rows built from a snapshot's payload
(``services.critique.analysis``), an SVG chart of accuracy per level, and the plain-language
meaning of every column (the tooltips; docs/critique-studies.md uses the same words).

Snapshots only: a request never recomputes. A figure without data is "—" (None), never a
placeholder."""

from __future__ import annotations

from annotations.core import selectors
from annotations.core.charts import headline
from annotations.core.models import Study
from annotations.critique.models import CritiqueSettings
from annotations.critique.services.task_view import level_name
from estimators.critique import MIN_RELIABLE_ANNOTATORS

AUTHOR_LABELS = {"all": "All outputs", "human": "Annotators", "ai": "AI"}

# key: (short label, meaning) — the "i" tooltips of the critique dashboard.
GLOSSARY: dict[str, tuple[str, str]] = {
    "level": ("Level", "0 = responses (an answer with reasoning); 1 = critiques of two "
              "responses; 2 = critiques of two critiques; and so on up to the top level L."),
    "n_outputs": ("Outputs", "How many responses or critiques of this level are in the "
                  "figures (scored: those whose question has a gold answer)."),
    "accuracy": ("Accuracy", "Share of this level's final answers that match the gold answer, "
                 "with its 95 % interval (clustered by question and by annotator: answers to "
                 "one question are not independent, nor are one annotator's answers). An "
                 "unparseable AI answer counts as wrong."),
    "majority": ("Majority @ same effort", "The majority vote of as many outputs of this level "
                 "as cost the same effort as one top-level critique (effort of level l = 2l + 1 "
                 "responses): 7 responses, 5 critiques or 3 critiques of critiques against "
                 "one level-3 critique. Ties are broken by a seeded draw."),
    "naive": ("Naive vote", "The majority of every final answer below this critique in its "
              "chain (no new analysis, just the consensus). A critique should beat it."),
    "gain_naive": ("Gain over naive", "Accuracy of the level minus its naive vote, paired on "
                   "the same critiques, with its 95 % interval (> 0: the critique adds "
                   "something)."),
    "confidence": ("Confidence", "Mean self-rated confidence in the final answer, 1 (a guess) "
                   "to 5 (certain)."),
    "minutes": ("Minutes", "Mean time on task in minutes (from when the task was shown to when "
                "it was submitted)."),
    "vs": ("Compared with", "The level-t critique against the majority of 2(t − j) + 1 outputs "
           "of level j that share its lower levels: the same effort."),
    "gain": ("Gain", "Accuracy of level t minus the effort-matched majority, paired on the "
             "same critiques, with its 95 % interval (> 0 and the interval above 0: the "
             "higher level is better at equal effort)."),
    "incomplete": ("Incomplete", "Critiques whose chain has too few outputs at the voted "
                   "level for an effort-matched vote; left out of the figure."),
    "human_accuracy": ("Human accuracy", "Annotators' accuracy at this level (they critique "
                       "the AI's outputs of the level below)."),
    "ai_accuracy": ("AI accuracy below", "The AI's accuracy one level below, on the same "
                    "questions."),
    "human_ai_gain": ("Human − AI", "Human accuracy at this level minus the AI's one level "
                      "below, on questions where the AI is neither always right nor always "
                      "wrong (the paper's Table 3)."),
    "inputs": ("Inputs", "Whether the two outputs the critique compared were both right, one "
               "right or both wrong."),
    "share": ("Share", "Share of this level's scored critiques with such inputs."),
    "picked_correct": ("Picked the right one", "With one right and one wrong input: share "
                       "of critiques that judged the right input better."),
    "picked_wrong": ("Picked the wrong one", "With one right and one wrong input: share that "
                     "judged the wrong input better."),
    "picked_neither": ("Neither", "Share of critiques that judged neither input better (an "
                       "unparseable AI choice counts here too)."),
    "writer": ("Written by", "Annotators or an AI system, by the study's mode."),
    "planned": ("Planned", "Outputs the tree asks for: questions × outputs per question at "
                "this level."),
    "written": ("Written", "Outputs stored (annotators' answers, or AI outputs)."),
    "pending": ("Waiting", "Tasks ready for an annotator (their inputs exist)."),
    "leased": ("On screen", "Tasks an annotator is working on now (back to the pool when "
               "their time runs out)."),
    "unparseable": ("Unparseable", "AI outputs whose final answer could not be read (stored "
                    "with their text; never guessed)."),
    "completion": ("Completion", "Written ÷ planned."),
    "first_share": ("Chose first", "Among critiques that chose an input: the share choosing "
                    "the one shown first. Inputs are shown in a random order, so about ½ is "
                    "expected; far from it suggests position bias."),
    "p_value": ("p-value", "Exact binomial test of that share against ½."),
}


def _cell(row: dict, key: str) -> dict | None:
    """{value, lower, upper, n} of an interval column, or None without data."""
    value = row.get(key)
    if value is None:
        return None
    return {"value": value, "lower": row.get(f"{key}_lower"), "upper": row.get(f"{key}_upper"),
            "n": row.get(f"{key}_n")}


def level_table(rows: list[dict], top: int) -> list[dict]:
    """The paper's Tables 1–2: per level, accuracy, the majority vote at the top level's
    effort E(2L + 1), the naive vote, confidence and minutes."""
    out = []
    effort = 2 * top + 1
    for row in sorted(rows, key=lambda r: r["level"]):
        level = row["level"]
        out.append({
            "level": level, "name": level_name(level, plural=True),
            "n_outputs": row["n_outputs"], "n_scored": row["n_scored"],
            "n_unparsed": row["n_unparsed"], "accuracy": _cell(row, "accuracy"),
            "majority": _cell(row, f"majority_e{effort}") if level < top
            else _cell(row, "accuracy"),
            "naive": _cell(row, "naive"), "gain_naive": _cell(row, "gain_over_naive"),
            "confidence": _cell(row, "confidence"), "minutes": _cell(row, "minutes")})
    return out


def effort_table(rows: list[dict], top: int) -> list[dict]:
    """Every level t ≥ 1 against the effort-matched majority of each lower level j."""
    by_level = {r["level"]: r for r in rows}
    out = []
    for t in range(1, top + 1):
        target = by_level.get(t)
        for j in range(t):
            row = by_level.get(j)
            if row is None:
                continue
            e = 2 * t + 1
            out.append({
                "target": t, "target_name": level_name(t), "voted": j,
                "voters": 2 * (t - j) + 1, "voted_name": level_name(j, plural=True).lower(),
                "target_accuracy": _cell(target, "accuracy") if target else None,
                "majority": _cell(row, f"majority_e{e}"),
                "gain": _cell(row, f"gain_over_majority_e{e}"),
                "incomplete": row.get(f"majority_e{e}_incomplete") or 0})
    return out


def _pairs(rows: list[dict]) -> list[dict]:
    out = []
    for row in rows:
        out.append({**row, "name": level_name(row["level"], plural=True),
                    "accuracy_cell": _cell(row, "accuracy"),
                    "picked_correct_cell": _cell(row, "picked_correct"),
                    "picked_wrong_cell": _cell(row, "picked_wrong"),
                    "picked_neither_cell": _cell(row, "picked_neither")})
    return out


def _human_ai(rows: list[dict]) -> list[dict]:
    """Table 3: per level, the annotators' accuracy, the AI's at the same level and one
    level below, and the gain over the latter (levels where annotators worked)."""
    by_level = {r["level"]: r for r in rows}
    out = []
    for level, row in sorted(by_level.items()):
        if row.get("human_accuracy") is None:
            continue
        below = by_level.get(level - 1, {})
        out.append({"level": level, "name": level_name(level, plural=True),
                    "n_questions": row["n_questions"],
                    "human": _cell(row, "human_accuracy"), "ai": _cell(row, "ai_accuracy"),
                    "ai_below": _cell(below, "ai_accuracy") if below else None,
                    "gain": _cell(row, "gain"), "confidence": _cell(row, "human_confidence"),
                    "minutes": _cell(row, "human_minutes")})
    return out


# The lowest simulated coverage (in %) of the intervals that stay approximate from
# MIN_RELIABLE_ANNOTATORS annotators on (docs/coverage.md, "Critique: every interval …";
# tests/estimators/critique/test_coverage.py checks the table backs these numbers).
APPROXIMATE_FLOOR = {"means": 89, "input_pairs": 89}


def intervals_unreliable(rows: list[dict]) -> dict | None:
    """Where the intervals cannot keep their promise: levels written by annotators (the
    AI's levels have none) with fewer than ``MIN_RELIABLE_ANNOTATORS`` different
    annotators in the selection. The intervals are clustered by annotator as well as by
    question, and with so few annotators how much they differ cannot be known well enough:
    they covered under 93 % in simulation (docs/coverage.md). Every figure of the tables
    rests on several levels (a vote on a lower level, a critique on its chain), so the
    note is for the tables. None when every annotated level has enough."""
    small = sorted((r["level"], r.get("n_annotators") or 0) for r in rows
                   if 0 < (r.get("n_annotators") or 0) < MIN_RELIABLE_ANNOTATORS)
    if not small:
        return None
    return {"levels": [{"level": lv, "name": level_name(lv, plural=True).lower(),
                        "annotators": n} for lv, n in small],
            "fewest": min(n for _, n in small), "min_annotators": MIN_RELIABLE_ANNOTATORS}


def level_chart(table: list[dict], top: int, *, width: int = 480, margin: int = 16,
                row_height: int = 64) -> dict:
    """Accuracy of each level with its 95 % interval (blue), the majority vote at the same
    effort (orange) and the naive vote (grey), on a 0–1 axis; one row per level, its name
    above it (the SVG scales to a phone's width)."""
    plot_w = width - 2 * margin
    styles = (("accuracy", "Accuracy", "#2f6fb0"), ("majority", "Majority, same effort",
                                                     "#c0572b"),
              ("naive", "Naive vote", "#777777"))

    def x(v):
        return None if v is None else margin + max(0.0, min(1.0, v)) * plot_w

    rows = []
    for i, row in enumerate(table):
        top = 8 + i * row_height
        marks = []
        for j, (key, label, color) in enumerate(styles):
            cell = row.get(key)
            if cell is None or (key == "majority" and row["level"] == top):
                continue
            marks.append({"x": x(cell["value"]), "x_low": x(cell["lower"]),
                          "x_high": x(cell["upper"]), "y": top + 26 + j * 11, "color": color,
                          "title": f"{row['name']} · {label}: {cell['value']:.3f}"
                          + (f" [{cell['lower']:.3f}, {cell['upper']:.3f}]"
                             if cell["lower"] is not None and cell["upper"] is not None
                             else "")})
        rows.append({"name": row["name"], "label_y": top + 13, "marks": marks})
    axis_y = 8 + len(table) * row_height
    return {"width": width, "height": axis_y + 22, "axis_y": axis_y, "rows": rows,
            "ticks": [{"x": margin + t / 10 * plot_w, "label": f"{t / 10:.1f}"}
                      for t in range(0, 11, 2)],
            "legend": [{"label": label, "color": color} for _, label, color in styles]}


def dashboard_context(study: Study, *, domain: str = "", author: str = "all") -> dict:
    """Everything the critique dashboard needs, from the latest snapshot and the recompute
    health; ``domain`` "" = all domains, ``author`` all / human / ai."""
    settings = CritiqueSettings.objects.get(study=study)
    snapshot = selectors.study_latest_snapshot(study=study)
    context: dict = {"study": study, "settings": settings, "snapshot": snapshot,
                     "health": selectors.study_recompute_health(study=study),
                     "domain": domain, "author": author, "authors": [], "domains": []}
    if snapshot is None or snapshot.payload.get("kind") != "critique":
        context["snapshot"] = None
        return context
    payload = snapshot.payload
    top = payload["top_level"]
    authors = payload.get("authors") or []
    if author not in authors:
        author = "all"
    domains = payload.get("domains") or []
    if domain not in domains:
        domain = ""
    want = domain or None

    def pick(rows: list[dict], with_author: bool = True) -> list[dict]:
        return [r for r in rows if r.get("domain") == want
                and (not with_author or r.get("author") == author)]

    levels = pick(payload.get("levels") or [])
    table = level_table(levels, top)
    annotated = any((r.get("n_annotators") or 0) > 0 for r in levels)
    context.update(
        intervals_unreliable=intervals_unreliable(levels),
        approximate=APPROXIMATE_FLOOR if annotated else None,
        payload=payload, author=author, domain=domain, top_level=top,
        authors=[(a, AUTHOR_LABELS.get(a, a)) for a in authors], domains=domains,
        author_label=AUTHOR_LABELS.get(author, author), levels=table,
        effort_label=f"E{2 * top + 1}", efforts=effort_table(levels, top),
        human_ai=_human_ai(pick(payload.get("human_ai") or [], with_author=False)),
        input_pairs=_pairs(pick(payload.get("input_pairs") or [])),
        progress=[{**p, "name": level_name(p["level"], plural=True)}
                  for p in payload.get("progress") or []],
        choices=[{**c, "name": level_name(c["level"], plural=True)}
                 for c in payload.get("choices") or []],
        chart=level_chart(table, top) if table else None,
        headline=headline(
            f"Accuracy per level · {AUTHOR_LABELS.get(author, author)}"
            + (f" · {domain}" if domain else ""),
            [(f"{r['level']} · {r['name']}",
              *((r["accuracy"]["value"], r["accuracy"]["lower"], r["accuracy"]["upper"])
                if r["accuracy"] else (None, None, None))) for r in table]))
    return context


# --- the CSV of every figure and table (core.exports figures; registered in hooks) --------
def _payload_rows(key: str):
    """The snapshot's rows under ``key``, every domain and author (the columns say which),
    with each level's name."""
    def rows(payload: dict, study: Study | None = None) -> list[dict]:
        return [{**({"level_name": level_name(r["level"], plural=True)} if "level" in r
                    else {}), **r} for r in payload.get(key) or []]
    return rows


# name: (title, rows(payload, study))
FIGURES = {
    "progress": ("Progress by level", _payload_rows("progress")),
    "levels": ("Accuracy by level, majority and naive votes, effort-matched gains "
               "(chart and tables)", _payload_rows("levels")),
    "human-ai": ("Annotators against the AI", _payload_rows("human_ai")),
    "input-pairs": ("By the inputs a critique compared", _payload_rows("input_pairs")),
    "choices": ("Position of the chosen input", _payload_rows("choices")),
}


def interval_widths(payload: dict) -> dict[str, float]:
    """Each level's accuracy interval width (all authors, every domain): what a webhook's
    target width is judged on (``core.services.notices``)."""
    return {f"level {row['level']}": row["accuracy_upper"] - row["accuracy_lower"]
            for row in payload.get("levels") or []
            if row.get("author") == "all" and row.get("domain") is None
            and row.get("accuracy_lower") is not None and row.get("accuracy_upper") is not None}
