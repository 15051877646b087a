"""Evaluate a candidate's predictions on a partitioned study's labels (issue 20).

The figures are the estimator engine's on the submitted items' labels, by the dashboard's
own path: the labels the recompute reads (``partitioned.selectors.study_label_rows``), each
scored as the query masks would score a stored prediction (position = the option's place in
the item's shuffled order; a text naming no option is a missing prediction), summed by
``scope_estimates.system_counts`` and estimated by ``scope_estimates._estimates_for`` (item
clustered with several queries per item), at the study's interval setting.

Protection (docs/evaluation-service.md): a rejected call names only offending entries of the
request and releases nothing; the minimum batch counts *evaluated* items; a daily budget of
accepted calls per token; with the Ladder on (the default) only the Ladder's score is
released; holdout items are never scored except by a token's final report.

A study whose routing design asked some items mostly about its AI systems' picks (targeted
answers) scores the candidate by the design-weighted estimate instead of ML, and computes the
paper's figures on the uniform part of the answers (``services.design_scores``); the
refusals, the minimum batch (counted in items with a 'yes'/'no' answer, as everywhere), the
budget, the Ladder and the holdout are the same."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np
from django.db import transaction

from annotations.core.errors import DomainError
from annotations.core.models import Study
from annotations.core.services.notices import study_notice
from annotations.core.services.records import option_text
from annotations.evaluation.models import EvaluationCall, EvaluationSettings, EvaluationToken
from annotations.evaluation.selectors import budget_used
from annotations.evaluation.services.design_scores import design_cell
from annotations.partitioned.models import Query
from annotations.partitioned.selectors import (
    ItemLabels,
    LabelCounts,
    study_has_targeted_answers,
    study_submitted_items,
)
from annotations.partitioned.services.scope_estimates import (
    CONFIDENCE,
    _clean,
    _estimates_for,
    _method_cells,
    label_clusters,
    system_counts,
)
from estimators.evaluation.ladder import ladder_release

MAX_LISTED = 50  # offending entries listed in one rejection
SCORE_METHOD = "ml"  # the fitness score: the ML estimate (uses both kinds of label)
# on a study with targeted answers: the design-weighted estimate (services.design_scores)
DESIGN_SCORE_METHOD = "design"
RELEASED_METHODS = ("comp", "ivw", "ml")


_ABSENT = object()


class EvaluationRejected(DomainError):
    """A refused call: ``errors`` lists the offending request entries (``entry`` index,
    ``item`` as sent, ``field``, ``problem``) — never anything about the study's labels."""

    code = "evaluation_rejected"

    def __init__(self, message: str, *, errors: list[dict] | None = None,
                 code: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.errors = errors or []
        if code:
            self.code = code
        self.http_status = status

    def as_dict(self) -> dict:  # type: ignore[override]
        body: dict = {"code": self.code, "detail": self.message}
        if self.errors:
            body["errors"] = self.errors[:MAX_LISTED]
            if len(self.errors) > MAX_LISTED:
                body["more_errors"] = len(self.errors) - MAX_LISTED
        return body


@dataclass
class Submission:
    candidate: str
    item_ids: list[str] = field(default_factory=list)
    # per entry: ("text", str | None) or ("index", int)
    given: list[tuple[str, object]] = field(default_factory=list)


def holdout_mask(item_ids: np.ndarray, seed: int, share: float) -> np.ndarray:
    """Whether each item (database id) is held out: splitmix64 of (id, study seed) mapped to
    [0, 1) below ``share`` — deterministic, independent of the labels and of the order."""
    if share <= 0:
        return np.zeros(len(item_ids), dtype=bool)
    with np.errstate(over="ignore"):
        z = item_ids.astype(np.uint64) + np.uint64(seed % (1 << 64)) * np.uint64(
            0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53) < share


def submission_parse(body, max_batch: int) -> Submission:
    """The request body checked entry by entry; every problem is listed (entry index and
    the item as sent), then refused at once."""
    if not isinstance(body, dict):
        raise EvaluationRejected("The body must be a JSON object with candidate and "
                                 "predictions.")
    unknown = sorted(set(body) - {"candidate", "predictions"})
    problems: list[dict] = [{"entry": None, "item": None, "field": name,
                             "problem": "unknown field"} for name in unknown]
    candidate = body.get("candidate")
    if not isinstance(candidate, str) or not candidate.strip() or len(candidate) > 200:
        problems.append({"entry": None, "item": None, "field": "candidate",
                         "problem": "a name of 1 to 200 characters is needed"})
    predictions = body.get("predictions")
    if not isinstance(predictions, list):
        problems.append({"entry": None, "item": None, "field": "predictions",
                         "problem": "a list of {item, prediction | index} is needed"})
        raise EvaluationRejected("The request is malformed.", errors=problems)
    if not predictions:
        raise EvaluationRejected("No predictions: the list is empty.", errors=problems,
                                 code="empty")
    if len(predictions) > max_batch:
        raise EvaluationRejected(
            f"{len(predictions)} predictions: this token accepts at most {max_batch} per "
            "call.", code="too_large", status=413)
    sub = Submission(candidate=candidate.strip() if isinstance(candidate, str) else "")
    first: dict[str, int] = {}
    ids, givens = sub.item_ids, sub.given
    for i, entry in enumerate(predictions):
        # the common shapes first ({"item": text, "index": int | "prediction": text}); any
        # other entry takes the full checks below
        if type(entry) is dict and len(entry) == 2:
            item = entry.get("item")
            if type(item) is str and item and item == item.strip() and item not in first:
                value = entry.get("index", _ABSENT)
                if type(value) is int:
                    first[item] = i
                    ids.append(item)
                    givens.append(("index", value))
                    continue
                value = entry.get("prediction", _ABSENT)
                if type(value) is str:
                    first[item] = i
                    ids.append(item)
                    givens.append(("text", value.strip()))
                    continue
        if not isinstance(entry, dict):
            problems.append({"entry": i, "item": None, "field": None,
                             "problem": "an object {item, prediction | index} is needed"})
            continue
        item = entry.get("item")
        shown = item if isinstance(item, str | int) and not isinstance(item, bool) else None
        extra = sorted(set(entry) - {"item", "prediction", "index"})
        if extra:
            problems.append({"entry": i, "item": shown, "field": extra[0],
                             "problem": "unknown field"})
        if shown is None or not str(item).strip():
            problems.append({"entry": i, "item": None, "field": "item",
                             "problem": "an item id (text or whole number) is needed"})
            continue
        item_id = str(item).strip()
        if item_id in first:
            problems.append({"entry": i, "item": shown, "field": "item",
                             "problem": f"duplicate of entry {first[item_id]}"})
            continue
        first[item_id] = i
        has_text, has_index = "prediction" in entry, "index" in entry
        if has_text == has_index:
            problems.append({"entry": i, "item": shown, "field": "prediction",
                             "problem": "give prediction (option text) or index, one of them"})
            continue
        if has_index:
            value = entry["index"]
            if not isinstance(value, int) or isinstance(value, bool):
                problems.append({"entry": i, "item": shown, "field": "index",
                                 "problem": "a whole number is needed"})
                continue
            given: tuple[str, object] = ("index", value)
        else:
            value = entry["prediction"]
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, str | int | float)):
                problems.append({"entry": i, "item": shown, "field": "prediction",
                                 "problem": "option text (or null for no answer) is needed"})
                continue
            given = ("text", None if value is None else option_text(value))
        sub.item_ids.append(item_id)
        sub.given.append(given)
    if problems:
        raise EvaluationRejected("Some entries are invalid; nothing was evaluated.",
                                 errors=problems)
    return sub


def _positions(study: Study, sub: Submission, items: dict[str, tuple[int, str, str]]
               ) -> tuple[np.ndarray, np.ndarray]:
    """The submitted items' database ids and predicted positions (−1: missing, as the
    masks score a prediction naming no option) from ``items`` (external id → database id,
    options and option order as JSON text); unknown ids and bad indexes refused."""
    class_names = list(study.classes.order_by("index").values_list("name", flat=True))
    problems: list[dict] = []
    orders: dict[str, dict[int, int]] = {}  # option_order text → {option: position}
    pks = np.empty(len(sub.item_ids), dtype=np.int64)
    positions = np.full(len(sub.item_ids), -1, dtype=np.int64)
    for i, (item_id, (how, value)) in enumerate(zip(sub.item_ids, sub.given, strict=True)):
        found = items.get(item_id)
        if found is None:
            problems.append({"entry": i, "item": item_id, "field": "item",
                             "problem": "no item of this study has this id"})
            continue
        pk, options_json, order_json = found
        order = orders.get(order_json)
        if order is None:
            order = orders[order_json] = {o: p for p, o in enumerate(json.loads(order_json))}
        pks[i] = pk
        if how == "index":
            # an item's order lists each of its options once; without options: the classes
            n_options = len(order) if options_json not in ("[]", "null") else len(class_names)
            if not 0 <= value < n_options:  # an int: submission_parse refused the rest
                problems.append({"entry": i, "item": item_id, "field": "index",
                                 "problem": f"{value} is outside 0..{n_options - 1}"})
                continue
            option = value
        else:
            options = json.loads(options_json) or class_names
            option = options.index(value) if value and value in options else None
        if option is not None and option in order:
            positions[i] = order[option]
    if problems:
        raise EvaluationRejected("Some entries are invalid; nothing was evaluated.",
                                 errors=problems)
    return pks, positions


def engine_figures(study: Study, k: int, item: np.ndarray, label_k: np.ndarray,
                   yes: np.ndarray, position: np.ndarray) -> dict:
    """Every released method's cell for one candidate from its labels (one row per label:
    item id, class k, 'yes', and the candidate's predicted position of that item, −1 for
    missing), by the recompute's own path."""
    match = (position == label_k).astype(np.int8)[:, None]
    present = (position >= 0).astype(np.int8)[:, None]
    group = label_k * 2 + (~yes).astype(np.int64)
    n_groups = 2 * k
    n = np.bincount(group, minlength=n_groups).astype(float)
    counts = LabelCounts(
        strata=np.array([""] * n_groups, dtype=object),
        k=np.repeat(np.arange(k), 2),
        answer=np.array([Query.Answer.YES, Query.Answer.NO] * k, dtype=object),
        n=n,
        match=np.bincount(group, weights=match[:, 0], minlength=n_groups)[:, None],
        present=np.bincount(group, weights=present[:, 0], minlength=n_groups)[:, None])
    totals = {name: arr.sum(axis=0) for name, arr in system_counts(counts, k).items()}
    clusters = None
    if study.queries_per_item > 1:
        items, index = np.unique(item, return_inverse=True)
        clusters = label_clusters(ItemLabels(
            item=index.ravel(), n_items=len(items),
            item_strata=np.array([""] * len(items), dtype=object), k=label_k, yes=yes,
            match=match, present=present), k)
    per_method = _estimates_for(totals, k, study.interval_method, clusters,
                                methods=RELEASED_METHODS)
    n_o, n_c = float(totals["n_ord"][0]), float(totals["n_comp"][0])
    cells = _method_cells(per_method, 0, n_o, n_c, k)
    s_c = float(totals["s_comp"][0])
    return {"n_o": _clean(n_o), "n_c": _clean(n_c),
            "q_hat": _clean(s_c / n_c) if n_c > 0 else None, "cells": cells}


def _released_estimates(figures: dict, study: Study) -> dict:
    def pick(cell, *names):
        return None if cell is None else {name: cell.get(name) for name in names}

    cells = figures["cells"]
    comp = pick(cells["comp"], "accuracy", "accuracy_clipped", "se", "ci_low", "ci_high",
                "bound")
    if comp is not None:
        comp["raw"] = comp.pop("accuracy")
        comp["clipped"] = comp.pop("accuracy_clipped")
    return {
        "n_o": figures["n_o"], "n_c": figures["n_c"], "q_hat": figures["q_hat"],
        "comp": comp,
        "ivw": pick(cells["ivw"], "accuracy", "se", "ci_low", "ci_high", "bound", "weight"),
        "ml": pick(cells["ml"], "accuracy", "se", "ci_low", "ci_high"),
        "confidence": CONFIDENCE, "interval_method": study.interval_method,
    }


def _budget(token: EvaluationToken, used: int) -> dict:
    return {"daily": token.daily_budget, "used": used,
            "left": max(0, token.daily_budget - used)}


def evaluation_submit(*, token: EvaluationToken, study_id: int, body,
                      kind: str = EvaluationCall.Kind.SEARCH) -> dict:
    """Evaluate the candidate in ``body`` with ``token`` on study ``study_id``; returns the
    released figures (also logged). Every refusal raises :class:`EvaluationRejected` after
    logging the rejected call (its reason, nothing released) in the same transaction as
    the token's lock, so concurrent calls see it in the budget: a refusal below the minimum
    batch spends one evaluation of the day's budget (``selectors.BUDGET_SPENT``), the
    others spend none and say nothing about the study's items."""
    started = time.perf_counter()
    candidate = body.get("candidate", "") if isinstance(body, dict) else ""
    n_items = len(body.get("predictions") or []) if isinstance(body, dict) and isinstance(
        body.get("predictions"), list) else 0
    with transaction.atomic():
        token = EvaluationToken.objects.select_for_update().get(pk=token.pk)  # one at a time
        try:
            with transaction.atomic():
                return _evaluate(token, study_id, body, kind, started)
        except EvaluationRejected as exc:
            rejected = exc
            call_rejected_log(token=token, kind=kind, candidate=candidate, n_items=n_items,
                              reason=f"{exc.code}: {exc.message}", started=started)
    raise rejected


def call_rejected_log(*, token: EvaluationToken, kind: str, candidate, n_items: int,
                      reason: str, started: float | None = None) -> EvaluationCall:
    """Log a refused call of ``token`` (also those refused before the service ran: too many
    a minute, an unreadable body): its reason, nothing released."""
    return EvaluationCall.objects.create(
        token=token, study_id=token.study_id, kind=kind,
        candidate=str(candidate)[:200] if isinstance(candidate, str) else "",
        n_items=n_items, accepted=False, reason=reason[:2000],
        duration_ms=None if started is None else (time.perf_counter() - started) * 1000)


def _evaluate(token: EvaluationToken, study_id: int, body, kind: str, started: float) -> dict:
    if token.revoked:
        raise EvaluationRejected("This evaluation token was revoked.", code="revoked",
                                 status=403)
    if token.study_id != study_id:
        raise EvaluationRejected(f"This evaluation token is not valid for study {study_id}.",
                                 code="wrong_study", status=403)
    study = token.study
    sub = submission_parse(body, token.max_batch)
    final = kind == EvaluationCall.Kind.FINAL
    used = budget_used(token)
    if final:
        finals = token.calls.filter(accepted=True, kind=EvaluationCall.Kind.FINAL)
        if finals.filter(candidate=sub.candidate).exists():
            raise EvaluationRejected(f"Candidate '{sub.candidate}' already has its final "
                                     "report.", code="final_done", status=409)
        if finals.count() >= token.final_reports:
            raise EvaluationRejected(
                f"This token's final reports ({token.final_reports}) are spent.",
                code="final_spent", status=429)
    # a final report spends none when it is made, but needs one left: refused below the
    # minimum batch it spends one, like any refusal that says something about the items
    if used >= token.daily_budget:
        raise EvaluationRejected(
            f"This token's daily budget ({token.daily_budget} evaluations) is spent; it "
            "renews at 00:00 UTC.", code="budget_spent", status=429)
    submitted_items = study_submitted_items(study=study, external_ids=sub.item_ids)
    pks, positions = _positions(study, sub, submitted_items.items)
    settings, _ = EvaluationSettings.objects.get_or_create(study=study)
    item, label_k, yes = submitted_items.item, submitted_items.k, submitted_items.yes
    held = holdout_mask(item, study.seed, settings.holdout_share)
    scored = held if final else ~held
    order = np.argsort(pks)
    sorted_pks = pks[order]
    where = np.searchsorted(sorted_pks, item)
    where = np.minimum(where, len(sorted_pks) - 1)
    submitted = (sorted_pks[where] == item) & scored
    item, label_k, yes = item[submitted], label_k[submitted], yes[submitted]
    position = positions[order][where[submitted]]
    n_used = len(np.unique(item))
    # the minimum holds for final reports too: one held-out item alone would be its label
    # The refusal names no count (one item at a time, "0 of 1" or "1 of 1" would tell which
    # items are labelled and held out) and spends one evaluation of the day's budget, as an
    # accepted call does: what it tells (fewer than the minimum) is never free.
    if n_used < token.min_batch:
        scope = "held-out items with an answered query" if final else (
            "items with an answered query, outside the holdout")
        raise EvaluationRejected(
            f"Too few of the submitted items can be evaluated: this token needs at least "
            f"{token.min_batch} {scope}. Nothing was evaluated; the call counts as one "
            "evaluation of today's budget. Submit more items.", code="below_min_batch")
    k = study.classes.count()
    designed = None
    if study_has_targeted_answers(study=study):
        # a targeted design asked mostly the routed systems' picks: the design-weighted
        # estimate scores the candidate, the paper's figures read the uniform part
        scored_pks, first = np.unique(item, return_index=True)
        designed = design_cell(study, k, scored_pks, position[first])
        item, label_k, yes, position = (designed.item, designed.k, designed.yes,
                                        designed.position)
    figures = engine_figures(study, k, item, label_k, yes, position)
    score = (designed.design["accuracy"] if designed is not None
             else figures["cells"][SCORE_METHOD]["accuracy"])
    released: dict = {
        "candidate": sub.candidate, "kind": kind, "items_submitted": len(pks),
        "items_used": n_used, "items_not_evaluated": len(pks) - n_used,
    }
    if designed is not None:
        released["score_method"] = DESIGN_SCORE_METHOD
    if token.ladder and not final:
        step = ladder_release(token.ladder_best, score, token.ladder_margin)
        token.ladder_best = step.best
        token.save(update_fields=["ladder_best"])
        released.update(score=step.score, estimates=None,
                        ladder={"margin": token.ladder_margin, "improved": step.improved})
    else:
        estimates = _released_estimates(figures, study)
        if designed is not None:
            estimates["design"] = designed.design
        released.update(score=score, estimates=estimates, ladder=None)
    released["budget"] = _budget(token, used + (0 if final else 1))
    call = EvaluationCall.objects.create(
        token=token, study=study, kind=kind, candidate=sub.candidate, n_items=len(pks),
        n_used=n_used, accepted=True, score=score, released=released,
        duration_ms=(time.perf_counter() - started) * 1000)
    if final:  # what the token's holder was released, no more
        study_notice(study.pk, "evaluation.final_report", {
            "call": call.pk, "token": token.name, "candidate": sub.candidate,
            "score": released["score"], "items_used": n_used})
    return released
