"""Exclusions: a researcher's rule that takes answers out of a study's estimates and default
exports, with its reason and trail, and the answers each rule takes out.

* ``Exclusion`` — the rule: every answer of a worker, answers before or after a time (of
  one worker, or of everybody), or answers given faster than a threshold (of one worker or
  of everybody). Rules stand: an answer recorded later that a rule matches is taken out in
  its own transaction (``core.services.exclusions.exclusions_catch``). Undoing a rule keeps
  the row (who, when, why) and puts its answers back unless another rule still holds them.
  Rows are never deleted; every change is also a ``StudyEvent``.
* ``ExcludedAnswer`` — one row per excluded answer (the answer is the row ``answer_id`` of
  the table ``answer_type``, as for ``AnswerReview``), naming the first standing rule that
  holds it and its worker. One row per answer, so "excluded" is one index probe; the
  partitioned statistics' triggers move a query when its row comes or goes (migration 0041).

What every estimate reads is :func:`answers_kept` / :func:`answers_kept_sql`: the answers
neither rejected by a review nor excluded."""

from __future__ import annotations

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import Q

from annotations.core.models import AnswerReview, Study


class Exclusion(models.Model):
    """A rule taking answers out (module docstring). ``worker`` is required for ``worker``,
    optional for the others (empty: every worker's answers); ``at`` bounds ``before`` (answers
    given before it) and ``after`` (at or after it); ``faster_than_ms``: answers whose time
    on task is below it (an answer without a time is never matched). ``answers`` is how
    many answers the rule took out when it was made, ``released`` how many leases it ended.
    ``applying``: its answers are being taken out (or, once undone, put back) by a job —
    a rule over more answers than ``OVERSIGHT_EXCLUSION_INLINE_MAX``."""

    class Kind(models.TextChoices):
        WORKER = "worker", "Every answer of a worker"
        BEFORE = "before", "Answers before a time"
        AFTER = "after", "Answers from a time on"
        FASTER = "faster", "Answers faster than a threshold"

    REASON_MAX = 2000

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="exclusions")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    worker = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True,
                               blank=True, related_name="+")
    at = models.DateTimeField(null=True, blank=True)
    faster_than_ms = models.PositiveIntegerField(null=True, blank=True)
    reason = models.TextField(max_length=REASON_MAX)
    answers = models.PositiveIntegerField(default=0)
    released = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    undone_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                  null=True, blank=True, related_name="+")
    undone_at = models.DateTimeField(null=True, blank=True)
    undo_reason = models.TextField(max_length=REASON_MAX, blank=True, default="")
    applying = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="exclusion_has_reason"),
            models.CheckConstraint(
                condition=(Q(kind="worker", worker__isnull=False)
                           | Q(kind__in=("before", "after"), at__isnull=False)
                           | Q(kind="faster", faster_than_ms__gt=0)),
                name="exclusion_kind_has_bound"),
        ]
        indexes = [models.Index(fields=["study", "undone_at"], name="exclusion_study_live")]

    def __str__(self) -> str:
        return self.describe()

    def describe(self) -> str:
        """The rule in words, e.g. "answers of ann faster than 2.0 s"."""
        who = f"of {self.worker}" if self.worker_id else "of every worker"
        if self.kind == self.Kind.WORKER:
            return f"every answer {who}"
        if self.kind == self.Kind.FASTER:
            return f"answers {who} faster than {self.faster_than_ms / 1000:g} s"
        word = "before" if self.kind == self.Kind.BEFORE else "from"
        return f"answers {who} {word} {self.at:%Y-%m-%d %H:%M:%S} UTC"

    @property
    def standing(self) -> bool:
        return self.undone_at is None


class ExcludedAnswer(models.Model):
    """One excluded answer (module docstring): ``exclusion`` is the first standing rule that
    holds it, ``worker`` the answer's author."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    answer_type = models.ForeignKey(ContentType, on_delete=models.CASCADE, related_name="+")
    answer_id = models.PositiveBigIntegerField()
    exclusion = models.ForeignKey(Exclusion, on_delete=models.CASCADE,
                                  related_name="excluded_answers")
    worker = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True,
                               blank=True, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["answer_type", "answer_id"],
                                    name="excluded_answer_once"),
        ]
        indexes = [models.Index(fields=["study", "answer_type"], name="excluded_answer_study")]

    @classmethod
    def ids(cls, study: Study | int, model: type[models.Model]) -> models.QuerySet:
        """The ids of the study's excluded answers of ``model`` (a subquery for ``…__in``)."""
        return (cls.objects.filter(study=study,
                                   answer_type=ContentType.objects.get_for_model(model))
                .values("answer_id"))


def answers_kept(answers: models.QuerySet, study: Study | int) -> models.QuerySet:
    """``answers`` (a queryset of the study type's answer model) less those every estimate
    leaves out: rejected by a review (``AnswerReview``) or excluded (``ExcludedAnswer``)."""
    model = answers.model
    return (answers.exclude(pk__in=AnswerReview.rejected_ids(study, model))
            .exclude(pk__in=ExcludedAnswer.ids(study, model)))


def answers_left_out(study: Study | int, model: type[models.Model]) -> Q:
    """The condition on ``model``'s rows that :func:`answers_kept` removes."""
    return (Q(pk__in=AnswerReview.rejected_ids(study, model))
            | Q(pk__in=ExcludedAnswer.ids(study, model)))


def answers_kept_sql(model: type[models.Model], study_column: str, id_column: str) -> str:
    """:func:`answers_kept` as a SQL condition on a row of ``model`` whose study and id are
    the columns given, for raw statements; it takes no parameters."""
    type_id = int(ContentType.objects.get_for_model(model).pk)
    return (AnswerReview.not_rejected_sql(model, study_column, id_column)
            + f" AND NOT EXISTS (SELECT 1 FROM {ExcludedAnswer._meta.db_table} xa WHERE "
              f"xa.answer_type_id = {type_id} AND xa.answer_id = {id_column})")
