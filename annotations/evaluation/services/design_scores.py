"""A candidate's figures on a study whose routing design asked some items mostly about the
AI systems' picks (a targeted design, ``partitioned.services.designs``; docs/
evaluation-service.md, "Routing designs").

There the paper's estimators are valid only on the uniform part of the answers (the items
whose mixture coin chose the uniform component, ``Query.draw_uniform``): the class asked
about an item of the targeted component depends on the routed systems' picks, so a "yes"
is far more likely on a class they picked than 1/K. The candidate is scored instead by
the design-weighted (inverse-probability) estimate of
``estimators.partitioned.design_estimate``, which reads every answer with the probability
its design gave the class asked: the candidate is one more "system" whose pick of item i is
its submitted prediction (the option's position, −1 for a missing one: wrong), and each step
enters with π_j(pick | the classes asked before), recomputed from what the query stores
exactly as the dashboard does for the study's own systems
(``partitioned.services.design_estimates.design_step_arrays``). E[Â] equals the candidate's
accuracy on the scored items whatever the design and whatever the candidate predicts.

Released for such a study (search and final report alike): ``score`` = the design estimate
(in place of ML); with the Ladder off, ``estimates`` keeps comp, IVW and ML **of the uniform
part** of the scored items (n_o, n_c and q_hat counted there) and adds ``design`` (accuracy,
se, the Wilson interval at its effective count, ``approximate``, the answers and items it
read)."""

from __future__ import annotations

import dataclasses

import numpy as np

from annotations.core.models import Study
from annotations.partitioned.selectors import study_design_rows
from annotations.partitioned.services.design_estimates import ANSWER_YES, design_step_arrays
from annotations.partitioned.services.scope_estimates import CONFIDENCE, _clean
from estimators.partitioned.design_estimate import DesignSteps, design_estimate
from estimators.partitioned.likelihood import NO_DATA_ACCURACY, NO_DATA_SE

YES_NO = (0, ANSWER_YES)  # DesignRows.answer codes of the labels (2: "not sure")


@dataclasses.dataclass(frozen=True)
class DesignedLabels:
    """What the service scores on a targeted study: the uniform part's labels (one row per
    label: item id, class k, 'yes', the candidate's position; the paper's estimators read
    these) and the design estimate's cell of the candidate."""

    item: np.ndarray
    k: np.ndarray
    yes: np.ndarray
    position: np.ndarray
    design: dict


def design_cell(study: Study, k: int, item_pks: np.ndarray, positions: np.ndarray,
                ) -> DesignedLabels:
    """The candidate (``positions[i]``: its predicted position for item ``item_pks[i]``,
    −1 missing) scored on those items' answered queries: the design-weighted estimate from
    every answer, and the labels of the uniform part (module docstring). One read of the
    items' queries (``study_design_rows`` with ``item_ids``)."""
    rows = study_design_rows(study=study, ordinals=[], item_ids=item_pks)
    order = np.argsort(item_pks)
    where = np.searchsorted(item_pks[order], rows.item_ids)
    picks = positions[order][where].astype(np.int64)[:, None]
    rows = dataclasses.replace(rows, picks=picks)
    arrays = design_step_arrays(rows, k, depth=min(study.queries_per_item, k))
    answers = len(arrays["item"])
    if answers:
        est = design_estimate(DesignSteps(**arrays), confidence=CONFIDENCE)

        def first(name):
            return float(np.asarray(getattr(est, name), float).ravel()[0])

        cell = {"accuracy": _clean(first("accuracy")), "se": _clean(first("se")),
                "ci_low": _clean(first("ci_low")), "ci_high": _clean(first("ci_high")),
                "approximate": bool(np.asarray(est.approximate).ravel()[0])}
    else:  # every scored item's first answer was "not sure": the no-data convention
        cell = {"accuracy": NO_DATA_ACCURACY, "se": NO_DATA_SE, "ci_low": 0.0,
                "ci_high": 1.0, "approximate": True}
    cell.update(answers=answers, items=int(len(np.unique(arrays["item"]))),
                interval_method="wilson")
    label = rows.uniform & np.isin(rows.answer, YES_NO)
    return DesignedLabels(item=rows.item_ids[rows.item[label]], k=rows.k[label],
                          yes=rows.answer[label] == ANSWER_YES,
                          position=picks[rows.item[label], 0], design=cell)
