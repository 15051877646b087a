"""Reads of an assisted study's ratings for reviews (``core.reviews``, registered in
``hooks.py``). Nothing here reads a sentence's gold verdict or the AI rater's verdict."""

from __future__ import annotations

from collections import Counter

from django.db.models import Count, QuerySet

from annotations.assisted.models import Rating, Sentence
from annotations.core.models import Study
from annotations.core.reviews.registry import AnswerView, Disagreement, ItemView

DISAGREEMENTS_MAX = 500


def answers(study: Study) -> QuerySet[Rating]:
    return (Rating.objects.filter(study=study)
            .select_related("sentence", "rater", "arm").order_by("-created_at", "-pk"))


def _answer(r: Rating) -> str:
    words = r.get_label_display()
    if r.confidence is not None:
        words += f" · {r.get_confidence_display().lower()}"
    return words


def views(study: Study, ratings: list[Rating]) -> list[AnswerView]:
    return [AnswerView(
        id=r.pk, item_id=r.sentence_id, item=r.sentence.external_id, item_text=r.sentence.target,
        asked=f"Rate the sentence (arm {r.arm.name})", answer=_answer(r), detail=r.comment,
        by=getattr(r.rater, "username", ""), at=r.created_at) for r in ratings]


def items(study: Study, item_ids: list[int]) -> dict[int, ItemView]:
    return {s.pk: ItemView(id=s.pk, external_id=s.external_id, text=s.target,
                           context=(f"Prompt: {s.prompt}", f"Response: {s.response}"))
            for s in Sentence.objects.filter(study=study, pk__in=item_ids)
            .only("pk", "external_id", "target", "prompt", "response")}


def item_answer_ids(study: Study, item_id: int) -> list[int]:
    return list(Rating.objects.filter(study=study, sentence_id=item_id).order_by("pk")
                .values_list("pk", flat=True))


def disagreements(study: Study) -> list[Disagreement]:
    """Sentences rated by several raters whose ratings are not all the same label."""
    several = (Rating.objects.filter(study=study).values("sentence_id")
               .annotate(labels=Count("label", distinct=True)).filter(labels__gte=2)
               .order_by("sentence_id").values_list("sentence_id", flat=True)
               [:DISAGREEMENTS_MAX])
    ratings: dict[int, list[tuple[int, str]]] = {}
    for sentence_id, pk, label in (Rating.objects.filter(sentence_id__in=list(several))
                                   .order_by("pk").values_list("sentence_id", "pk", "label")):
        ratings.setdefault(sentence_id, []).append((pk, label))
    labels = dict(Rating.Label.choices)
    out = []
    for s in Sentence.objects.filter(pk__in=list(ratings)).order_by("pk").only(
            "pk", "external_id", "target"):
        counts = Counter(label for _, label in ratings[s.pk])
        summary = ", ".join(f"{labels[label]} ×{n}" for label, n in counts.most_common())
        out.append(Disagreement(s.pk, s.external_id, s.target, summary,
                                [pk for pk, _ in ratings[s.pk]]))
    return out
