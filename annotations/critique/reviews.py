"""Reads of a critique study's outputs for reviews (``core.reviews``, registered in
``hooks.py``): the annotators' responses and critiques (AI outputs are not reviewed here).
Nothing here reads a question's gold option."""

from __future__ import annotations

from collections import Counter

from django.db.models import Count, QuerySet

from annotations.core.models import Study
from annotations.core.reviews.registry import AnswerView, Disagreement, ItemView
from annotations.critique.models import CritiqueOutput, CritiqueQuestion

DISAGREEMENTS_MAX = 500


def _letter(i: int | None) -> str:
    return "—" if i is None else chr(ord("A") + i) if i < 26 else str(i + 1)


def answers(study: Study) -> QuerySet[CritiqueOutput]:
    return (CritiqueOutput.objects.filter(study=study, author_kind=CritiqueOutput.Author.HUMAN)
            .select_related("question", "author").order_by("-created_at", "-pk"))


def _answer(o: CritiqueOutput) -> str:
    words = f"Final answer {_letter(o.final)}"
    if o.level:
        words = f"{o.get_choice_display()} · {words}"
    if o.confidence is not None:
        words += f" · confidence {o.confidence}/5"
    return words


def views(study: Study, outputs: list[CritiqueOutput]) -> list[AnswerView]:
    return [AnswerView(
        id=o.pk, item_id=o.question_id, item=o.question.external_id, item_text=o.question.text,
        asked="Answer the question" if o.level == 0 else f"Critique (level {o.level})",
        answer=_answer(o), detail=o.reasoning, by=getattr(o.author, "username", ""),
        at=o.created_at) for o in outputs]


def items(study: Study, item_ids: list[int]) -> dict[int, ItemView]:
    return {q.pk: ItemView(id=q.pk, external_id=q.external_id, text=q.text,
                           options=[f"{_letter(i)}. {o}" for i, o in enumerate(q.options)])
            for q in CritiqueQuestion.objects.filter(study=study, pk__in=item_ids)
            .only("pk", "external_id", "text", "options")}


def item_answer_ids(study: Study, item_id: int) -> list[int]:
    return list(CritiqueOutput.objects.filter(study=study, question_id=item_id,
                                              author_kind=CritiqueOutput.Author.HUMAN)
                .order_by("level", "slot").values_list("pk", flat=True))


def disagreements(study: Study) -> list[Disagreement]:
    """Questions whose annotators' outputs of one level vote for different final answers
    (responses, or critiques of the same level choosing differently)."""
    human = CritiqueOutput.objects.filter(study=study, author_kind=CritiqueOutput.Author.HUMAN,
                                          final__isnull=False)
    split = (human.values("question_id", "level").annotate(finals=Count("final", distinct=True))
             .filter(finals__gte=2).order_by("question_id").values_list("question_id", flat=True))
    wanted = list(dict.fromkeys(split))[:DISAGREEMENTS_MAX]
    votes: dict[int, list[tuple[int, int, int]]] = {}
    for q, pk, level, final in (human.filter(question_id__in=wanted).order_by("level", "slot")
                                .values_list("question_id", "pk", "level", "final")):
        votes.setdefault(q, []).append((pk, level, final))
    out = []
    for q in CritiqueQuestion.objects.filter(pk__in=wanted).order_by("pk").only(
            "pk", "external_id", "text"):
        parts = []
        for level in sorted({lv for _, lv, _ in votes[q.pk]}):
            counts = Counter(f for _, lv, f in votes[q.pk] if lv == level)
            if len(counts) > 1:
                parts.append(f"level {level}: " + ", ".join(
                    f"{_letter(f)} ×{n}" for f, n in counts.most_common()))
        out.append(Disagreement(q.pk, q.external_id, q.text, "; ".join(parts),
                                [pk for pk, _, _ in votes[q.pk]]))
    return out
