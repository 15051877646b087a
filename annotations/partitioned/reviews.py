"""Reads of a partitioned study's labels for reviews (``core.reviews``, registered in
``hooks.py``): a label is an answered routed query (quality checks are not the study's
labels). Nothing here reads gold options or AI predictions."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from annotations.core.models import Item, Study
from annotations.core.reviews.registry import AnswerView, Disagreement, ItemView
from annotations.core.selectors import study_classes
from annotations.partitioned.models import Query

DISAGREEMENTS_MAX = 500


def answers(study: Study) -> QuerySet[Query]:
    return (Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                 is_quality_check=False)
            .select_related("item", "answered_by").order_by("-answered_at", "-pk"))


def _asked(names: dict[int, str], k: int) -> str:
    return f"Is it “{names.get(k, k)}”?"


def views(study: Study, queries: list[Query]) -> list[AnswerView]:
    names = {c.index: c.name for c in study_classes(study=study)}
    return [AnswerView(
        id=q.pk, item_id=q.item_id, item=q.item.external_id, item_text=q.item.text,
        asked=_asked(names, q.k), answer=q.get_answer_display(), detail="",
        by=getattr(q.answered_by, "username", ""), at=q.answered_at) for q in queries]


def items(study: Study, item_ids: list[int]) -> dict[int, ItemView]:
    names = [c.name for c in study_classes(study=study)]
    return {i.pk: ItemView(id=i.pk, external_id=i.external_id, text=i.text,
                           # in the order shown, each with the class it stands for
                           options=[f"{name}: {option}" for name, option in
                                    zip(names, i.displayed_options(names), strict=False)]
                           if i.options else ())
            for i in Item.objects.filter(study=study, pk__in=item_ids)}


def item_answer_ids(study: Study, item_id: int) -> list[int]:
    return list(Query.objects.filter(study=study, item_id=item_id, is_quality_check=False,
                                     status=Query.Status.ANSWERED)
                .order_by("sequence").values_list("pk", flat=True))


def disagreements(study: Study) -> list[Disagreement]:
    """Items with several answered queries that cannot all be right: more than one 'yes'
    (each query asks another class), a 'not sure' beside other answers, or 'no' to every
    class of the study (one of them must fit). One query per item never disagrees."""
    k = len(study_classes(study=study))
    rows = list(Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                     is_quality_check=False)
                .values("item_id").annotate(
                    n=Count("pk"), yes=Count("pk", filter=Q(answer=Query.Answer.YES)),
                    no=Count("pk", filter=Q(answer=Query.Answer.NO)),
                    unsure=Count("pk", filter=Q(answer=Query.Answer.UNSURE)))
                .filter(n__gte=2).order_by("item_id"))
    bad = [r for r in rows if r["yes"] > 1 or r["unsure"] or (k and r["no"] >= k)]
    bad = bad[:DISAGREEMENTS_MAX]
    shown = {i.pk: i for i in Item.objects.filter(pk__in=[r["item_id"] for r in bad])
             .only("pk", "external_id", "text")}
    ids: dict[int, list[int]] = {}
    for item_id, pk in (Query.objects.filter(item_id__in=list(shown), is_quality_check=False,
                                             status=Query.Status.ANSWERED)
                        .order_by("sequence").values_list("item_id", "pk")):
        ids.setdefault(item_id, []).append(pk)
    out = []
    for r in bad:
        parts = [f"{label} ×{r[key]}" for key, label in
                 (("yes", "Yes"), ("no", "No"), ("unsure", "Not sure")) if r[key]]
        item = shown[r["item_id"]]
        out.append(Disagreement(item.pk, item.external_id, item.text, ", ".join(parts),
                                ids.get(item.pk, [])))
    return out
