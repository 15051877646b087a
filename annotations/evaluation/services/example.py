"""The paper's section 3.3 in miniature (issue 20; docs/evaluation-example.md), offline on
scikit-learn's digits (1 797 real 8×8 handwritten digits, 10 classes).

Per seed the digits are split into a training set (the candidates fit on it), a study's
items and a test set. A partitioned study is made of the items; simulated specialists who
know each digit's class answer its routed query "is it class k?" truthfully
(``partitioned.services.simulation.study_simulate``: the real routing and answer path). A
random search proposes candidate classifiers (model family, features, hyper-parameters),
scores each only through the evaluation service (``evaluation_submit`` with a default-policy
token: the Ladder, the minimum batch, the holdout) and keeps the one whose released score was
the last to improve; its holdout is scored once by the final report. Compared on the test
set: that choice, the same search guided by the items' gold labels, and the default baseline
(logistic regression on raw pixels). The study is deleted afterwards."""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass

import numpy as np

from annotations.core.models import Study
from annotations.core.services.studies import study_create, study_open
from annotations.evaluation.models import EvaluationSettings
from annotations.evaluation.services.evaluate import evaluation_submit
from annotations.evaluation.services.tokens import token_create
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.simulation import study_simulate

CLASSES = [str(d) for d in range(10)]


@dataclass(frozen=True)
class SeedResult:
    seed: int
    candidates: int
    chosen_service: str
    chosen_gold: str
    test_service: float  # test accuracy of the service-guided choice
    test_gold: float  # of the gold-guided choice
    test_default: float  # of the default baseline
    final_report: float | None  # the service's holdout estimate (ML) of its choice
    seconds: float


def _candidate(rng: np.random.Generator):
    """A random (name, scikit-learn pipeline) from the search space."""
    from sklearn.decomposition import PCA
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    pca = int(rng.choice([0, 8, 16, 32]))
    family = str(rng.choice(["logreg", "knn", "svc", "forest", "tree", "bayes"]))
    if family == "logreg":
        c = float(10 ** rng.uniform(-3, 1))
        model, name = LogisticRegression(C=c, max_iter=300), f"logreg C={c:.3g}"
    elif family == "knn":
        k = int(rng.integers(1, 30))
        model, name = KNeighborsClassifier(n_neighbors=k), f"knn k={k}"
    elif family == "svc":
        gamma = float(10 ** rng.uniform(-4, -1))
        model, name = SVC(C=1.0, gamma=gamma), f"svc gamma={gamma:.2g}"
    elif family == "forest":
        depth = int(rng.integers(2, 12))
        model = RandomForestClassifier(n_estimators=40, max_depth=depth,
                                       random_state=int(rng.integers(1 << 30)))
        name = f"forest depth={depth}"
    elif family == "tree":
        depth = int(rng.integers(1, 12))
        model = DecisionTreeClassifier(max_depth=depth, random_state=0)
        name = f"tree depth={depth}"
    else:
        model, name = GaussianNB(), "naive bayes"
    steps = [StandardScaler()] + ([PCA(n_components=pca, random_state=0)] if pca else [])
    return f"{name}, pca={pca or 'none'}", make_pipeline(*steps, model)


def _study(seed: int, images: np.ndarray, labels: np.ndarray) -> tuple[Study, list[str]]:
    """A partitioned study of ``images`` (their classes as gold) with every routed query
    answered by truthful simulated specialists."""
    study = study_create(name=f"digits example seed {seed} {time.time_ns()}", classes=CLASSES,
                         shuffle_options=False, seed=seed + 1)
    ids = [f"d{seed}-{i}" for i in range(len(images))]
    items = [{"id": item, "text": f"8×8 digit image {item}", "options": CLASSES,
              "gold_index": int(y)} for item, y in zip(ids, labels, strict=True)]
    items_import(study=study, source=io.StringIO("\n".join(map(json.dumps, items))),
                 name="digits.jsonl", fmt="jsonl")
    study_open(study=study)
    study_simulate(study=study, seed=seed, recompute_every=0)
    return study, ids


def run_seed(seed: int, n_candidates: int = 16) -> SeedResult:
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    started = time.perf_counter()
    x, y = load_digits(return_X_y=True)
    x_train, x_rest, y_train, y_rest = train_test_split(x, y, train_size=0.3, random_state=seed,
                                                        stratify=y)
    x_items, x_test, y_items, y_test = train_test_split(x_rest, y_rest, train_size=4 / 7,
                                                        random_state=seed, stratify=y_rest)
    study, ids = _study(seed, x_items, y_items)
    try:
        EvaluationSettings.objects.update_or_create(study=study,
                                                    defaults={"holdout_share": 0.2})
        # one more than the candidates: the final report needs one evaluation left
        token, _ = token_create(study=study, name="digits search",
                                daily_budget=n_candidates + 1)
        rng = np.random.default_rng(seed)
        chosen_service = chosen_gold = None
        best_gold = -1.0
        for _ in range(n_candidates):
            name, model = _candidate(rng)
            model.fit(x_train, y_train)
            predicted = model.predict(x_items)
            released = evaluation_submit(token=token, study_id=study.pk, body={
                "candidate": name, "predictions": [{"item": i, "index": int(p)}
                                                   for i, p in zip(ids, predicted, strict=True)]})
            if released["ladder"]["improved"]:
                chosen_service = (name, model, predicted)
            gold = float(np.mean(predicted == y_items))
            if gold > best_gold:
                best_gold, chosen_gold = gold, (name, model)
        final = evaluation_submit(token=token, study_id=study.pk, kind="final", body={
            "candidate": chosen_service[0], "predictions": [
                {"item": i, "index": int(p)} for i, p in zip(ids, chosen_service[2],
                                                             strict=True)]})
        default = LogisticRegression(max_iter=1000).fit(x_train, y_train)
        return SeedResult(
            seed=seed, candidates=n_candidates, chosen_service=chosen_service[0],
            chosen_gold=chosen_gold[0],
            test_service=float(np.mean(chosen_service[1].predict(x_test) == y_test)),
            test_gold=float(np.mean(chosen_gold[1].predict(x_test) == y_test)),
            test_default=float(np.mean(default.predict(x_test) == y_test)),
            final_report=final["estimates"]["ml"]["accuracy"] if final["estimates"] else None,
            seconds=time.perf_counter() - started)
    finally:
        study.delete()


def markdown(results: list[SeedResult]) -> str:
    """The docs table: per seed and the mean."""
    lines = ["| seed | service-guided choice | test acc. | gold-guided choice | test acc. | "
             "default baseline | final report (holdout, ML) |", "|---|---|---|---|---|---|---|"]
    for r in results:
        final = f"{r.final_report:.3f}" if r.final_report is not None else "—"
        lines.append(f"| {r.seed} | {r.chosen_service} | {r.test_service:.3f} | "
                     f"{r.chosen_gold} | {r.test_gold:.3f} | {r.test_default:.3f} | {final} |")
    mean = {f: float(np.mean([getattr(r, f) for r in results]))
            for f in ("test_service", "test_gold", "test_default")}
    lines.append(f"| mean | | **{mean['test_service']:.3f}** | | **{mean['test_gold']:.3f}** | "
                 f"**{mean['test_default']:.3f}** | |")
    return "\n".join(lines) + "\n"


def svg(results: list[SeedResult]) -> str:
    """A dot plot of the three test accuracies per seed (no plotting library needed)."""
    width, height, left, top = 420, 60 + 36 * len(results), 70, 30
    lo = min(min(r.test_service, r.test_gold, r.test_default) for r in results) - 0.02
    hi = max(max(r.test_service, r.test_gold, r.test_default) for r in results) + 0.01

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - left - 20)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<text x="{left}" y="14">test accuracy ({lo:.2f}–{hi:.2f}): '
             '● service-guided ◆ gold-guided ▲ default</text>']
    for i, r in enumerate(results):
        yy = top + 20 + 36 * i
        parts.append(f'<text x="4" y="{yy + 4}">seed {r.seed}</text>'
                     f'<line x1="{left}" x2="{width - 20}" y1="{yy}" y2="{yy}" stroke="#ccc"/>'
                     f'<circle cx="{x(r.test_service):.1f}" cy="{yy}" r="5" fill="#1f6feb"/>'
                     f'<rect x="{x(r.test_gold) - 4:.1f}" y="{yy - 4}" width="8" height="8" '
                     f'transform="rotate(45 {x(r.test_gold):.1f} {yy})" fill="#d97706"/>'
                     f'<path d="M{x(r.test_default):.1f},{yy - 5} l5,9 h-10 z" fill="#555"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
