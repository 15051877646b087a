"""The paper's section 3.3 in miniature (docs/evaluation-example.md), offline on a generated
task where search pays: scikit-learn's ``make_classification`` (:data:`TASK`: 5 classes,
40 features of which 6 informative and 2 redundant, two clusters per class), on which the
default baseline (logistic regression on every feature) is clearly beaten by the best
candidates of the search space (non-linear models on a few selected features).

Per seed the task's samples are split into a training set (the candidates fit on it), a
pool of 3 000 study items and a test set. A random search proposes candidate classifiers
(model family, feature selection, hyper-parameters); every search starts from the default
baseline. For each routing design (uniform; targeted with ε = 0.2 on the predictions of
:data:`ROUTED`, three fixed baseline classifiers imported as the study's AI systems before it
opens) a partitioned study of the pool is routed by the platform and every routed query
"is it class k?" answered truthfully (:func:`_answers_truthful`). For each answer budget N
the search scores the default and each candidate only through the evaluation service
(``evaluation_submit`` with a fresh default-policy token: the Ladder with margin 0.02, the
minimum batch, a 20 % holdout), submitting the first N items, and keeps the last candidate
whose released score improved; the holdout scores it once (final report; refused, as any
call, when the holdout has fewer items than the minimum batch). Compared on the test set:
that choice, the same search guided by the gold labels of the same N items, and the
default baseline. Each study is deleted afterwards."""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass

import numpy as np
from django.utils import timezone

from annotations.core.models import Item, Study
from annotations.core.services.bulk import rows_update
from annotations.core.services.studies import study_create, study_open
from annotations.evaluation.models import EvaluationSettings
from annotations.evaluation.services.evaluate import (
    EvaluationRejected,
    evaluation_submit,
    holdout_mask,
)
from annotations.evaluation.services.tokens import token_create
from annotations.partitioned.models import Query
from annotations.partitioned.services.designs import routing_design_set
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.predictions import predictions_import

K = 5
CLASSES = [f"class {c}" for c in range(K)]
TASK = {"n_samples": 6000, "n_features": 40, "n_informative": 6, "n_redundant": 2,
        "n_classes": K, "n_clusters_per_class": 2, "class_sep": 1.0, "random_state": 0}
TRAIN, POOL = 1500, 3000  # samples per seed; the rest (1 500) is the test set
BUDGETS = (150, 300, 1000, 3000)  # answers: the search submits the pool's first N items
DESIGNS = ("uniform", "targeted")
EPSILON = 0.2
DEFAULT = "default: logreg C=1, feat=all"
ROUTED = (DEFAULT, "baseline: naive bayes, feat=all", "baseline: knn k=10, feat=all")


@dataclass(frozen=True)
class Candidate:
    name: str
    items: np.ndarray  # its predicted class of each pool item
    test: np.ndarray  # of each test sample


@dataclass(frozen=True)
class Seeded:
    """One seed's split and its trained candidates: ``candidates[0]`` is the default
    baseline; ``routed`` the baselines imported as the targeted studies' AI systems."""

    seed: int
    y_items: np.ndarray
    y_test: np.ndarray
    candidates: list[Candidate]
    routed: list[Candidate]


@dataclass(frozen=True)
class SearchResult:
    seed: int
    design: str
    answers: int
    candidates: int  # submitted, the default included
    chosen_service: str
    chosen_gold: str
    test_service: float  # test accuracy of the service-guided choice
    test_gold: float  # of the choice by the gold labels of the same items
    test_default: float  # of the default baseline
    moves: int  # the Ladder's improvements over the search
    final_report: float | None  # the service's holdout estimate of its choice
    held_out: int  # of the N items: those in the holdout (a final report needs min_batch)
    seconds: float


def _model(family: str, rng: np.random.Generator):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    if family == "logreg":
        c = float(10 ** rng.uniform(-3, 1))
        return LogisticRegression(C=c, max_iter=500), f"logreg C={c:.3g}"
    if family == "knn":
        k = int(rng.integers(1, 40))
        return KNeighborsClassifier(n_neighbors=k), f"knn k={k}"
    if family == "svc":
        gamma = float(10 ** rng.uniform(-3, 0))
        return SVC(gamma=gamma), f"svc gamma={gamma:.2g}"
    if family == "forest":
        depth = int(rng.integers(2, 16))
        return (RandomForestClassifier(n_estimators=60, max_depth=depth,
                                       random_state=int(rng.integers(1 << 30))),
                f"forest depth={depth}")
    if family == "tree":
        depth = int(rng.integers(1, 14))
        return DecisionTreeClassifier(max_depth=depth, random_state=0), f"tree depth={depth}"
    return GaussianNB(), "naive bayes"


def _pipeline(model, features: int):
    from sklearn.feature_selection import SelectKBest, f_classif
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    steps = [StandardScaler()] + ([SelectKBest(f_classif, k=features)] if features else [])
    return make_pipeline(*steps, model)


def _candidate(rng: np.random.Generator):
    """A random (name, scikit-learn pipeline) from the search space."""
    features = int(rng.choice([0, 5, 10, 20]))
    family = str(rng.choice(["logreg", "knn", "svc", "forest", "tree", "bayes"]))
    model, name = _model(family, rng)
    return f"{name}, feat={features or 'all'}", _pipeline(model, features)


def _baselines():
    """The default baseline first, then the other fixed baselines the targeted design
    follows (:data:`ROUTED` names them)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier

    models = [LogisticRegression(max_iter=1000), GaussianNB(), KNeighborsClassifier(10)]
    return [(name, _pipeline(model, 0)) for name, model in zip(ROUTED, models, strict=True)]


def seeded(seed: int, n_candidates: int = 16) -> Seeded:
    """The seed's split of :data:`TASK` and its candidates, each fitted once and its
    predictions kept (every study of the seed scores the same predictions)."""
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    x, y = make_classification(**TASK)
    x_train, x_rest, y_train, y_rest = train_test_split(x, y, train_size=TRAIN,
                                                        random_state=seed, stratify=y)
    x_items, x_test, y_items, y_test = train_test_split(x_rest, y_rest, train_size=POOL,
                                                        random_state=seed, stratify=y_rest)

    def fitted(name, model):
        model.fit(x_train, y_train)
        return Candidate(name, model.predict(x_items), model.predict(x_test))

    baselines = [fitted(name, model) for name, model in _baselines()]
    rng = np.random.default_rng(seed)
    searched = [fitted(*_candidate(rng)) for _ in range(n_candidates)]
    return Seeded(seed=seed, y_items=y_items, y_test=y_test,
                  candidates=[baselines[0], *searched], routed=baselines)


def _jsonl(rows) -> io.StringIO:
    return io.StringIO("\n".join(map(json.dumps, rows)))


def _study(run: Seeded, design: str) -> tuple[Study, list[str]]:
    """A partitioned study of the pool's items (their classes as gold), the routed
    baselines' predictions imported as its AI systems, routed under ``design`` by the
    platform (``study_open``), every routed query answered truthfully
    (:func:`_answers_truthful`)."""
    study = study_create(name=f"search example {run.seed} {design} {time.time_ns()}",
                         classes=CLASSES, shuffle_options=False, seed=run.seed + 1)
    ids = [f"s{run.seed}-{i}" for i in range(len(run.y_items))]
    items_import(study=study, source=_jsonl(
        {"id": item, "text": f"sample {item}", "options": CLASSES, "gold_index": int(y)}
        for item, y in zip(ids, run.y_items, strict=True)), name="items.jsonl", fmt="jsonl")
    predictions_import(study=study, source=_jsonl(
        {"item_id": item, "system": c.name, "prediction_index": int(p)}
        for c in run.routed for item, p in zip(ids, c.items, strict=True)),
        name="predictions.jsonl", fmt="jsonl")
    if design != "uniform":
        routing_design_set(study=study, kind=design, epsilon=EPSILON)
    study_open(study=study)
    _answers_truthful(study)
    return study, ids


def _answers_truthful(study: Study) -> int:
    """Answer every pending routed query as a specialist who knows the item's class:
    "yes" where the class asked is the gold option's position, else "no" — what
    ``study_simulate`` answers with no error (``simulation.simulated_answer``), written in
    one bulk update instead of 3 000 leases and submissions (50 ms each on this machine).
    One query per item: no follow-up is routed."""
    now = timezone.now()
    rows = [(pk, Query.Status.ANSWERED,
             Query.Answer.YES if order.index(gold) == k else Query.Answer.NO, now)
            for pk, k, gold, order in Query.objects.filter(
                study=study, is_quality_check=False, status=Query.Status.PENDING)
            .values_list("pk", "k", "item__gold_option", "item__option_order")]
    return rows_update(Query, ["status", "answer", "answered_at"], rows)


def _study_delete(study: Study) -> None:
    Query.objects.filter(study=study).delete()  # Query.design protects its design
    study.delete()


def search(run: Seeded, study: Study, ids: list[str], n_items: int) -> SearchResult:
    """One search of ``run``'s candidates scored on the first ``n_items`` of ``study``
    (each with one answered query; the items are in random order, so the first N are a
    random subset independent of the answers): a fresh default-policy token, the default
    first, then the candidates; the final report of the last that moved the Ladder."""
    started = time.perf_counter()
    design = "targeted" if Query.objects.filter(study=study, draw_uniform=False).exists() \
        else "uniform"
    # one more than the candidates: the final report needs one evaluation left
    token, _ = token_create(study=study, name=f"search {n_items}",
                            daily_budget=len(run.candidates) + 1)

    def body(c: Candidate) -> dict:
        return {"candidate": c.name, "predictions": [
            {"item": i, "index": int(p)} for i, p in zip(ids[:n_items], c.items[:n_items],
                                                         strict=True)]}

    chosen = None
    moves = 0
    for c in run.candidates:
        released = evaluation_submit(token=token, study_id=study.pk, body=body(c))
        if released["ladder"]["improved"]:
            chosen, moves = c, moves + 1
    try:
        final = evaluation_submit(token=token, study_id=study.pk, kind="final",
                                  body=body(chosen))["score"]
    except EvaluationRejected as exc:  # a small search's holdout is below the minimum
        if exc.code != "below_min_batch":
            raise
        final = None
    pks = np.fromiter(Item.objects.filter(study=study, external_id__in=ids[:n_items])
                      .values_list("pk", flat=True), dtype=np.int64)
    held_out = int(holdout_mask(pks, study.seed, EvaluationSettings.objects.get(
        study=study).holdout_share).sum())
    gold = max(run.candidates, key=lambda c: np.mean(c.items[:n_items]
                                                     == run.y_items[:n_items]))

    def test(c: Candidate) -> float:
        return float(np.mean(c.test == run.y_test))

    return SearchResult(
        seed=run.seed, design=design, answers=n_items, candidates=len(run.candidates),
        chosen_service=chosen.name, chosen_gold=gold.name, test_service=test(chosen),
        test_gold=test(gold), test_default=test(run.candidates[0]), moves=moves,
        final_report=final, held_out=held_out, seconds=time.perf_counter() - started)


def run_seed(seed: int, n_candidates: int = 16, budgets=BUDGETS, designs=DESIGNS
             ) -> list[SearchResult]:
    """Per design, one study of the pool (every item answered once, 20 % held out) and a
    search at each answer budget N: the candidates submit the first N items."""
    run = seeded(seed, n_candidates)
    results = []
    for design in designs:
        study, ids = _study(run, design)
        try:
            EvaluationSettings.objects.update_or_create(study=study,
                                                        defaults={"holdout_share": 0.2})
            results += [search(run, study, ids, n) for n in budgets]
        finally:
            _study_delete(study)
    return results


def _mean_se(values) -> str:
    v = np.asarray(values, float)
    se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
    return f"{v.mean():.3f}" + (f" ± {se:.3f}" if np.isfinite(se) else "")


def markdown(results: list[SearchResult]) -> str:
    """The docs tables: the summary per design and answer budget (mean ± standard error
    over seeds), then every search."""
    lines = ["| design | answers | service-guided (test) | gold-guided, same items (test) | "
             "default baseline (test) | service beat default | service = gold's choice | "
             "Ladder moves |", "|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r.design, r.answers) for r in results},
                  key=lambda dk: (DESIGNS.index(dk[0]) if dk[0] in DESIGNS else 9, dk[1]))
    for design, answers in keys:
        rs = [r for r in results if (r.design, r.answers) == (design, answers)]
        beat = sum(r.test_service > r.test_default for r in rs)
        same = sum(r.chosen_service == r.chosen_gold for r in rs)
        lines.append(
            f"| {design} | {answers} | {_mean_se([r.test_service for r in rs])} | "
            f"{_mean_se([r.test_gold for r in rs])} | {_mean_se([r.test_default for r in rs])} "
            f"| {beat} of {len(rs)} | {same} of {len(rs)} | "
            f"{np.mean([r.moves for r in rs]):.1f} |")
    lines += ["", "| seed | design | answers | service-guided choice | test | "
              "gold-guided choice | test | default | final report (holdout) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r.seed, DESIGNS.index(r.design)
                                            if r.design in DESIGNS else 9, r.answers)):
        final = f"{r.final_report:.3f}" if r.final_report is not None else "—"
        lines.append(f"| {r.seed} | {r.design} | {r.answers} | {r.chosen_service} | "
                     f"{r.test_service:.3f} | {r.chosen_gold} | {r.test_gold:.3f} | "
                     f"{r.test_default:.3f} | {final} |")
    return "\n".join(lines) + "\n"


def svg(results: list[SearchResult]) -> str:
    """A dot plot per design and answer budget of the mean test accuracies (no plotting
    library needed): service-guided, gold-guided and default."""
    keys = sorted({(r.design, r.answers) for r in results},
                  key=lambda dk: (DESIGNS.index(dk[0]) if dk[0] in DESIGNS else 9, dk[1]))
    rows = []
    for key in keys:
        rs = [r for r in results if (r.design, r.answers) == key]
        rows.append((f"{key[0]}, {key[1]}", *(float(np.mean([getattr(r, f) for r in rs]))
                                              for f in ("test_service", "test_gold",
                                                        "test_default"))))
    width, height, left, top = 480, 60 + 36 * len(rows), 120, 30
    values = [v for row in rows for v in row[1:]]
    lo, hi = min(values) - 0.02, max(values) + 0.01

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - left - 20)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="4" y="14">mean test accuracy ({lo:.2f}–{hi:.2f}): '
             '● service-guided ◆ gold-guided ▲ default</text>']
    for i, (label, service, gold, default) in enumerate(rows):
        yy = top + 20 + 36 * i
        parts.append(f'<text x="4" y="{yy + 4}">{label}</text>'
                     f'<line x1="{left}" x2="{width - 20}" y1="{yy}" y2="{yy}" stroke="#ccc"/>'
                     f'<circle cx="{x(service):.1f}" cy="{yy}" r="5" fill="#1f6feb"/>'
                     f'<rect x="{x(gold) - 4:.1f}" y="{yy - 4}" width="8" height="8" '
                     f'transform="rotate(45 {x(gold):.1f} {yy})" fill="#d97706"/>'
                     f'<path d="M{x(default):.1f},{yy - 5} l5,9 h-10 z" fill="#555"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
