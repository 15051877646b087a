"""Writes of reviews: accept or reject one answer of any study type with a reason, and undo
a rejection. A change that moves an answer in or out of the estimates (reject, undo, or
accepting a rejected answer) recomputes the study through the usual trigger
(``study_recompute_schedule`` on commit); every change is a ``StudyEvent`` in the same
transaction. Who: the study's reviewers and researchers (``selectors.review_study``)."""

from __future__ import annotations

from functools import partial

from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.utils import timezone

from annotations.core.errors import DomainError
from annotations.core.events import study_event_kind_register
from annotations.core.models import AnswerReview, Study, User
from annotations.core.reviews.registry import reviewable
from annotations.core.reviews.selectors import review_study, study_answer
from annotations.core.services.recompute import study_recompute_schedule
from annotations.core.services.studies import study_event_record

ACCEPTED = study_event_kind_register("answer_accepted", "Answer accepted")
REJECTED = study_event_kind_register("answer_rejected", "Answer rejected")
RESTORED = study_event_kind_register("answer_restored", "Answer rejection undone")


class InvalidReview(DomainError):
    code = "invalid_review"


class NothingToUndo(DomainError):
    code = "nothing_to_undo"
    http_status = 409


def _reason(reason: str, *, required: bool) -> str:
    reason = (reason or "").strip()
    if required and not reason:
        raise InvalidReview("Say why the answer is rejected.", field="reason")
    if len(reason) > AnswerReview.REASON_MAX:
        raise InvalidReview(f"The reason has {len(reason)} characters; at most "
                            f"{AnswerReview.REASON_MAX}.", field="reason")
    return reason


def _locked(study: Study, answer_id: int) -> tuple[ContentType, AnswerReview | None]:
    answer_type = ContentType.objects.get_for_model(reviewable(study.kind).answer_model)
    review = (AnswerReview.objects.select_for_update()
              .filter(answer_type=answer_type, answer_id=answer_id).first())
    return answer_type, review


def _recompute(study: Study) -> None:
    transaction.on_commit(partial(study_recompute_schedule, study.pk))


@transaction.atomic
def answer_review(*, study: Study, answer_id: int, accept: bool, reason: str = "",
                  by: User) -> AnswerReview:
    """Accept (``accept``) or reject answer ``answer_id`` of ``study`` with a ``reason``
    (required to reject; at most 2 000 characters), by ``by``, a reviewer or researcher of
    the study. A second review of the same answer replaces the first. A rejected answer
    leaves the estimates (kept, with its reason); accepting a rejected one brings it back.

    Refusals: NotPermitted (not a reviewer or researcher), UnknownAnswer (not one of the
    study's reviewable answers: 404, the same for another study's), InvalidReview."""
    review_study(user=by, study_id=study.pk)
    study_answer(study=study, answer_id=answer_id)
    reason = _reason(reason, required=not accept)
    answer_type, review = _locked(study, answer_id)
    state = AnswerReview.State.ACCEPTED if accept else AnswerReview.State.REJECTED
    was_rejected = review is not None and review.state == AnswerReview.State.REJECTED
    now = timezone.now()
    if review is None:
        review = AnswerReview.objects.create(
            study=study, answer_type=answer_type, answer_id=answer_id, state=state,
            reason=reason, reviewed_by=by, reviewed_at=now)
    else:
        review.state, review.reason, review.reviewed_by, review.reviewed_at = (
            state, reason, by, now)
        review.undone_by = review.undone_at = None
        review.save(update_fields=["state", "reason", "reviewed_by", "reviewed_at",
                                   "undone_by", "undone_at"])
    study_event_record(study=study, kind=ACCEPTED if accept else REJECTED, by=by,
                       detail={"answer": answer_id, "type": answer_type.model,
                               "reason": reason})
    if was_rejected != (state == AnswerReview.State.REJECTED):
        _recompute(study)
    return review


@transaction.atomic
def answer_rejection_undo(*, study: Study, answer_id: int, by: User) -> AnswerReview:
    """Take back the rejection of answer ``answer_id`` of ``study``: the answer is in the
    estimates again (recomputed); the review keeps its reason and who rejected it, with
    who undid it and when (state "undone"). NothingToUndo (409) when the answer is not
    rejected; the other refusals as :func:`answer_review`."""
    review_study(user=by, study_id=study.pk)
    study_answer(study=study, answer_id=answer_id)
    answer_type, review = _locked(study, answer_id)
    if review is None or review.state != AnswerReview.State.REJECTED:
        raise NothingToUndo("This answer is not rejected: there is nothing to undo.")
    review.state, review.undone_by, review.undone_at = (AnswerReview.State.UNDONE, by,
                                                        timezone.now())
    review.save(update_fields=["state", "undone_by", "undone_at"])
    study_event_record(study=study, kind=RESTORED, by=by,
                       detail={"answer": answer_id, "type": answer_type.model})
    _recompute(study)
    return review


def answer_reviews_forget(*, study: Study, answer_model, answer_ids: list[int]) -> int:
    """Delete the reviews of answers taken back by their labeller (a study type's undo that
    reuses the answer's row for the next answer: partitioned queries), in the caller's
    transaction, so that a later answer of the same row starts unreviewed. Returns how many
    were deleted."""
    answer_type = ContentType.objects.get_for_model(answer_model)
    deleted, _ = AnswerReview.objects.filter(study=study, answer_type=answer_type,
                                             answer_id__in=answer_ids).delete()
    return deleted
