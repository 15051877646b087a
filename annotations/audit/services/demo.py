"""The demo's audits: two AI raters of the demo study audited on the paper's out-of-phenomenon
data (``estimators.nodata.synthetic``, its 498 test strings, their labels given as people's):
one that passes (its similar datapoints share the datapoint's criteria: the paper's oracle
generator) and one that fails (uniformly random strings, random labels). Created once."""

from __future__ import annotations

import json

import numpy as np

from annotations.audit.models import Audit, Criterion, Rubric
from annotations.audit.services.runs import audit_run, audit_start
from annotations.core.models import Study
from estimators.nodata.synthetic import OOP_RUBRIC, load, universe

RUBRIC_NAME = "Demo: the paper's out-of-phenomenon rubric"
RATERS = (("AI rater A (shows its reasons)", "honest"), ("AI rater B (guesses)", "liar"))
ROUNDS, PHI, SEED = 3, 0.5, 19


def _commitments(data: list[str], kind: str, rng: np.random.Generator) -> bytes:
    pool = universe()
    by_code: dict[tuple[int, ...], list[str]] = {}
    for s in pool:
        by_code.setdefault(OOP_RUBRIC.encode(s), []).append(s)
    lines = []
    for i, x in enumerate(data):
        truth = OOP_RUBRIC.label(x)
        for k in range(1, ROUNDS + 1):
            if kind == "honest":  # right 90 % of the time; x′ with x's criteria
                label = truth if rng.random() < 0.9 else 1 - truth
                bucket = by_code[OOP_RUBRIC.encode(x)]
                similar = bucket[int(rng.integers(len(bucket)))]
            else:
                label = int(rng.integers(2))
                similar = pool[int(rng.integers(len(pool)))]
            lines.append(json.dumps({"item": f"s{i}", "round": k, "label": label,
                                     "similar": similar}))
    return ("\n".join(lines) + "\n").encode()


def audit_demo_seed(study: Study) -> list[Audit]:
    """The demo study's two audits (module docstring), run here; none when it has audits."""
    if Audit.objects.filter(study=study).exists():
        return []
    rubric, made = Rubric.objects.get_or_create(
        study=study, name=RUBRIC_NAME, defaults={"aggregator": Rubric.Aggregator.MAJORITY})
    if made:
        for i, (name, kind, text) in enumerate((("contains_111", "contains", "111"),
                                                ("ends_with_1", "regex", "1$"),
                                                ("contains_110001", "contains", "110001"))):
            Criterion.objects.create(rubric=rubric, position=i, name=name, kind=kind, text=text)
    rows = load("oop", "test")
    data = [x for x, _ in rows]
    datapoints = "".join(json.dumps({"item": f"s{i}", "datapoint": x, "reference": y}) + "\n"
                         for i, (x, y) in enumerate(rows)).encode()
    rng = np.random.default_rng(SEED)
    audits = []
    for name, kind in RATERS:
        audit = audit_start(study=study, rubric=rubric,
                            commitments=_commitments(data, kind, rng),
                            commitments_name=f"{name}.jsonl", datapoints=datapoints,
                            datapoints_name="the paper's out-of-phenomenon test strings",
                            rounds=ROUNDS, phi=PHI, seed=SEED, enqueue=False)
        audit_run(audit_id=audit.pk)
        audit.refresh_from_db()
        audits.append(audit)
    return audits
