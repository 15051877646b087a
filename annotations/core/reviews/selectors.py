"""Reads of reviews: who may review a study, its answers with their review, one answer in
context, the items whose answers disagree, the flag queue with each item in context, and
how many answers are rejected (the dashboards' count)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.contenttypes.models import ContentType
from django.db.models import Count, Value

from annotations.core.errors import DomainError
from annotations.core.exclusion_models import ExcludedAnswer
from annotations.core.models import AnswerReview, ItemFlag, Study, StudyMembership, User
from annotations.core.reviews.registry import AnswerView, Disagreement, ItemView, reviewable
from annotations.core.selectors import FlagCounts, study_for_roles, user_roles

Role = StudyMembership.Role
REVIEW_ROLES = (Role.REVIEWER, Role.RESEARCHER)


class UnknownAnswer(DomainError):
    """The answer is not one of the study's reviewable answers (or does not exist: the
    same answer, so ids of other studies cannot be probed)."""

    code = "unknown_answer"
    http_status = 404


class UnknownItem(DomainError):
    code = "unknown_item"
    http_status = 404


def review_study(*, user: User, study_id: int) -> Study:
    """The study when ``user`` reviews it (reviewer or researcher; superusers count as
    researchers): 404 when it does not exist, NotPermitted (403) otherwise."""
    return study_for_roles(user=user, study_id=study_id, roles=REVIEW_ROLES, refusal=(
        "Only the study's reviewers and researchers review its answers."))[0]


def may_resolve_flags(*, user: User, study: Study) -> bool:
    """Flags are resolved by researchers (``flag_resolve``); reviewers read them."""
    return Role.RESEARCHER in user_roles(user=user, study=study)


@dataclass(frozen=True)
class ReviewedAnswer:
    """An answer with its review: ``state`` "" (not reviewed), accepted, rejected or undone
    (a rejection taken back), ``reason``, who reviewed it and when."""

    answer: AnswerView
    state: str = ""
    reason: str = ""
    reviewed_by: str = ""
    reviewed_at: object = None

    @property
    def rejected(self) -> bool:
        return self.state == AnswerReview.State.REJECTED


def _answer_type(study: Study) -> ContentType:
    return ContentType.objects.get_for_model(reviewable(study.kind).answer_model)


def _with_reviews(study: Study, views: list[AnswerView]) -> list[ReviewedAnswer]:
    reviews = {r.answer_id: r for r in AnswerReview.objects.filter(
        study=study, answer_type=_answer_type(study), answer_id__in=[v.id for v in views])
        .select_related("reviewed_by")}
    out = []
    for view in views:
        r = reviews.get(view.id)
        out.append(ReviewedAnswer(view) if r is None else ReviewedAnswer(
            view, r.state, r.reason, getattr(r.reviewed_by, "username", ""), r.reviewed_at))
    return out


REVIEW_FILTERS = ("all", "unreviewed", "accepted", "rejected")


def study_answers(*, study: Study, state: str = "all", offset: int = 0, limit: int = 50
                  ) -> tuple[list[ReviewedAnswer], int]:
    """One page of the study's reviewable answers, newest first, with their reviews, and how
    many there are. ``state``: all, unreviewed (no review, or a rejection undone), accepted
    or rejected."""
    kind = reviewable(study.kind)
    answers = kind.answers(study)
    reviews = AnswerReview.objects.filter(study=study, answer_type=_answer_type(study))
    if state in ("accepted", "rejected"):
        answers = answers.filter(pk__in=reviews.filter(state=state).values("answer_id"))
    elif state == "unreviewed":
        answers = answers.exclude(pk__in=reviews.exclude(state=AnswerReview.State.UNDONE)
                                  .values("answer_id"))
    total = answers.count()
    page = list(answers[offset:offset + limit])
    return _with_reviews(study, kind.views(study, page)), total


def study_answer(*, study: Study, answer_id: int) -> ReviewedAnswer:
    """One reviewable answer of the study with its review; UnknownAnswer otherwise."""
    kind = reviewable(study.kind)
    found = list(kind.answers(study).filter(pk=answer_id)[:1]) if answer_id < 2**63 else []
    if not found:
        raise UnknownAnswer(f"No answer {answer_id} to review in this study.", field="answer")
    return _with_reviews(study, kind.views(study, found))[0]


@dataclass(frozen=True)
class ItemInContext:
    """An item as its labellers saw it, its answers with their reviews and its flags."""

    item: ItemView
    answers: list[ReviewedAnswer]
    flags: list[ItemFlag] = field(default_factory=list)

    @property
    def open_flags(self) -> list[ItemFlag]:
        return [f for f in self.flags if f.resolution == ItemFlag.Resolution.OPEN]

    @property
    def withdrawn(self) -> bool:
        return any(f.resolution == ItemFlag.Resolution.WITHDRAWN for f in self.flags)


def item_in_context(*, study: Study, item_id: int) -> ItemInContext:
    """The item ``item_id`` of the study with its answers and flags (who flagged it, why,
    their note); UnknownItem when it is not the study's."""
    kind = reviewable(study.kind)
    item = kind.items(study, [item_id]).get(item_id) if 0 < item_id < 2**63 else None
    if item is None:
        raise UnknownItem(f"No item {item_id} in this study.", field="item")
    ids = kind.item_answer_ids(study, item_id)
    order = {pk: i for i, pk in enumerate(ids)}
    answers = sorted(kind.answers(study).filter(pk__in=ids), key=lambda a: order[a.pk])
    flags = list(ItemFlag.objects.filter(study=study, item_id=item_id).select_related("user")
                 .order_by("-updated_at", "-id"))
    return ItemInContext(item, _with_reviews(study, kind.views(study, answers)), flags)


def study_disagreements(*, study: Study) -> list[Disagreement]:
    """The study's items whose answers disagree (each type's rule), withdrawn items left
    out."""
    withdrawn = set(ItemFlag.withdrawn_ids(study).values_list("item_id", flat=True))
    return [d for d in reviewable(study.kind).disagreements(study)
            if d.item_id not in withdrawn]


@dataclass(frozen=True)
class FlaggedItem:
    """A row of the flag queue: the item, its flags (open ones first) and their count."""

    item: ItemView | None
    item_id: int
    flags: list[ItemFlag]

    @property
    def state(self) -> str:
        states = {f.resolution for f in self.flags}
        if ItemFlag.Resolution.OPEN in states:
            return "open"
        if ItemFlag.Resolution.WITHDRAWN in states:
            return ItemFlag.Resolution.WITHDRAWN
        return self.flags[0].resolution if self.flags else ""


def flag_queue(*, study: Study, state: str = "open") -> list[FlaggedItem]:
    """The study's flagged items, one row per item (newest flag first): ``state`` "open"
    (items with an open flag) or "resolved" (the others); each with its flags (reason,
    note, who) and its item as the labellers saw it — a bounded number of queries."""
    flags = list(ItemFlag.objects.filter(study=study).select_related("user")
                 .order_by("-updated_at", "-id"))
    by_item: dict[int, list[ItemFlag]] = {}
    for f in flags:
        by_item.setdefault(f.item_id, []).append(f)
    open_items = {i for i, fs in by_item.items()
                  if any(f.resolution == ItemFlag.Resolution.OPEN for f in fs)}
    wanted = [i for i in by_item if (i in open_items) == (state == "open")]
    items = reviewable(study.kind).items(study, wanted)
    return [FlaggedItem(items.get(i), i, by_item[i]) for i in wanted]


def study_review_counts(*, study: Study) -> dict[str, int]:
    """{accepted, rejected, undone}: the study's answers by review (the dashboards say how
    many answers were rejected and left out of the estimates)."""
    rows = dict(AnswerReview.objects.filter(study=study).values_list("state")
                .annotate(n=Count("pk")).values_list("state", "n").order_by())
    return {state: rows.get(state, 0) for state in AnswerReview.State.values}


def study_left_out_counts(*, study: Study) -> tuple[FlagCounts, int, int]:
    """What the dashboards say the estimates include or leave out, in one query: items by
    the state of their flags (as ``core.selectors.study_flag_counts``), the answers
    rejected by reviewers and the answers excluded (``core.exclusion_models``)."""
    flags = (ItemFlag.objects.filter(study=study, resolution__in=[
        ItemFlag.Resolution.OPEN, ItemFlag.Resolution.WITHDRAWN])
        .values("resolution").annotate(n=Count("item_id", distinct=True))
        .values_list("resolution", "n").order_by())
    rejected = (AnswerReview.objects.filter(study=study, state=AnswerReview.State.REJECTED)
                .values("state").annotate(n=Count("pk")).values_list("state", "n").order_by())
    excluded = (ExcludedAnswer.objects.filter(study=study).annotate(what=Value("excluded"))
                .values("what").annotate(n=Count("pk")).values_list("what", "n").order_by())
    rows = dict(flags.union(rejected, excluded, all=True))
    return (FlagCounts(open=rows.get(ItemFlag.Resolution.OPEN, 0),
                       withdrawn=rows.get(ItemFlag.Resolution.WITHDRAWN, 0)),
            rows.get(AnswerReview.State.REJECTED, 0), rows.get("excluded", 0))
