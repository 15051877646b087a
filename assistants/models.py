"""AI systems under evaluation and their predictions per item."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models

from annotations.models import Item, Study

MAX_SYSTEMS_PER_STUDY = 63  # one bit each in Query.match_mask / present_mask (signed bigint)


class AISystem(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="ai_systems")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    ordinal = models.PositiveSmallIntegerField(
        editable=False, validators=[MaxValueValidator(MAX_SYSTEMS_PER_STUDY - 1)]
    )
    reference_correct = models.PositiveIntegerField(default=0, editable=False)
    reference_n = models.PositiveIntegerField(
        default=0, editable=False, help_text="Items with a hidden gold label and a prediction."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "AI system"
        ordering = ["study", "ordinal"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="system_unique_name"),
            models.UniqueConstraint(fields=["study", "ordinal"], name="system_unique_ordinal"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.pk is None:
            return
        before = AISystem.objects.filter(pk=self.pk).values_list("study_id", flat=True).first()
        if before is not None and before != self.study_id:
            raise ValidationError({"study": "An AI system cannot move to another study."})


class Prediction(models.Model):
    """A system's answer for an item. ``option`` is the original option index (None when the
    output was missing or unparseable: a wrong answer); ``position`` is where that option is
    shown, i.e. the predicted class."""

    system = models.ForeignKey(AISystem, on_delete=models.CASCADE, related_name="predictions")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="predictions")
    option = models.PositiveSmallIntegerField(null=True, blank=True)
    position = models.PositiveSmallIntegerField(null=True, blank=True)
    raw = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["system", "item"], name="prediction_unique"),
        ]
        indexes = [models.Index(fields=["item", "position"])]

    def clean(self) -> None:
        # The database refuses the pair too (migration assistants 0002): a prediction of
        # one study's system about another study's item would corrupt that study's masks.
        if self.system_id and self.item_id and self.system.study_id != self.item.study_id:
            raise ValidationError({"item": "This item belongs to another study than the "
                                           "AI system."})
        if self.item_id and self.option is not None:
            n = len(self.item.options) or self.item.study.classes.count()
            if self.option >= n:
                raise ValidationError({"option": f"Option {self.option} is outside "
                                                 f"0..{n - 1} (an index of the item's "
                                                 f"options)."})
