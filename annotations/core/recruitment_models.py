"""Recruitment: public entry links of a study for crowd platforms (Prolific, Amazon Mechanical
Turk, any other), and the participants who came through them
(``core.recruitment``; docs/recruitment.md).

* ``RecruitmentLink`` — one entry link (``/join/<token>/``): its platform, the parameters it
  reads (the platform's, or a generic link's own id parameter), where a participant goes
  back to (completion and screened-out codes; a generic link's URLs), the consent text, an
  optional screening tutorial and quiz, and its limits (participants, tasks per
  participant, minutes).
* ``PaymentBatch``, ``Payment`` — the payments ledger (``core.recruitment.payments``): each
  participant's base pay and bonus, recorded once, in batches exported for Prolific's bulk
  bonus or sent to its API.
* ``Participant`` — one person of a link: the platform's id (``external_id``, unique per
  link: the same id always reaches the same account), the platform's session (Prolific's
  SESSION_ID, MTurk's assignment), their account (``user``: a member of the study in its
  working role) and where they are: consenting, screening, working, completed, screened
  out, returned, timed out."""

from __future__ import annotations

import secrets
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext

from annotations.core.inputs import LONG_TEXT_MAX
from annotations.core.models import Study


def new_link_token() -> str:
    return secrets.token_urlsafe(18)


class RecruitmentLink(models.Model):
    class Platform(models.TextChoices):
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "Amazon Mechanical Turk"
        GENERIC = "generic", "Another platform (generic link)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="recruitment_links")
    platform = models.CharField(max_length=10, choices=Platform.choices)
    name = models.CharField(max_length=120, help_text="For you: e.g. 'Prolific pilot, 20 people'.")
    token = models.CharField(max_length=40, unique=True, default=new_link_token, editable=False)
    active = models.BooleanField(default=True, help_text="Inactive: the link turns everyone away.")
    id_parameter = models.CharField(
        max_length=40, blank=True, default="",
        help_text="Generic links: the query parameter holding the participant's id, e.g. "
                  "'participant' (Prolific: PROLIFIC_PID; MTurk: workerId).")
    completion_code = models.CharField(
        max_length=40, blank=True, default="",
        help_text="The code the platform gave for a completed submission (Prolific: 'Completed "
                  "path' code; generic: put into the completion URL as {code}).")
    screened_out_code = models.CharField(
        max_length=40, blank=True, default="",
        help_text="The code for a participant the screening quiz turned away (Prolific: a "
                  "'screened out' code). Empty: they are shown a page asking them to return "
                  "the study.")
    completion_url = models.URLField(
        max_length=500, blank=True, default="",
        help_text="Generic links: where a participant goes when done (https); {code} and "
                  "{participant} are replaced.")
    screened_out_url = models.URLField(
        max_length=500, blank=True, default="",
        help_text="Generic links: where a screened-out participant goes (https); empty: a "
                  "page asking them to return the study.")
    consent = models.TextField(
        max_length=LONG_TEXT_MAX, blank=True, default="",
        help_text="What participants agree to before they start (plain text; paragraphs "
                  "separated by a blank line). Empty: the platform's text.")
    tutorial = models.TextField(
        max_length=LONG_TEXT_MAX, blank=True, default="",
        help_text="Instructions shown with the screening quiz (plain text).")
    quiz = models.JSONField(
        default=list, blank=True,
        help_text='Screening questions: [{"question": …, "options": [..], "answer": 0-based '
                  'index}]; every answer must be right. Empty: no screening.')
    quiz_attempts = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(5)],
        help_text="Attempts at the screening quiz before a participant is screened out.")
    max_participants = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="Participants the link admits; then it says the study is full. Empty: no limit.")
    max_tasks = models.PositiveIntegerField(
        default=10, validators=[MinValueValidator(1), MaxValueValidator(100_000)],
        help_text="Answers a participant gives; then they are done and sent back.")
    time_limit_minutes = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(24 * 60)],
        help_text="Minutes from consent; then their leases go back and they are timed out. "
                  "Empty: no limit.")
    # pay (``core.recruitment.payments``): the base pay of a completed participant and the
    # bonus rule — per correct answer on an item whose answer is known (quality checks,
    # gold labels), given at least ``bonus_min_checks`` such answers at an accuracy of at
    # least ``bonus_min_accuracy``
    currency = models.CharField(max_length=3, default="GBP",
                                help_text="Three letters (Prolific pays in the study's).")
    base_pay = models.DecimalField(max_digits=8, decimal_places=2, default=Decimal("0.00"),
                                   validators=[MinValueValidator(Decimal("0"))])
    bonus_per_correct = models.DecimalField(
        max_digits=8, decimal_places=2, default=Decimal("0.00"),
        validators=[MinValueValidator(Decimal("0"))],
        help_text="Bonus per correct answer on an item whose answer is known (0: no bonus).")
    bonus_min_checks = models.PositiveIntegerField(
        default=0, help_text="Answers on known items needed before any bonus.")
    bonus_min_accuracy = models.FloatField(
        default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Accuracy on known items needed for the bonus (0–1).")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_platform_display()})"

    @property
    def platform_label(self) -> str:
        """The platform as a participant is told to go back to it."""
        if self.platform == self.Platform.GENERIC:
            return gettext("your recruiting platform")
        return self.get_platform_display()


class Participant(models.Model):
    class Status(models.TextChoices):
        CONSENT = "consent", "Reading the consent"
        SCREENING = "screening", "Taking the screening quiz"
        WORKING = "working", "Working"
        COMPLETED = "completed", "Completed"
        SCREENED_OUT = "screened_out", "Screened out"
        RETURNED = "returned", "Returned the study"
        TIMED_OUT = "timed_out", "Timed out"
        DECLINED = "declined", "Declined consent"

    FINISHED = (Status.COMPLETED, Status.SCREENED_OUT, Status.RETURNED, Status.TIMED_OUT,
                Status.DECLINED)

    link = models.ForeignKey(RecruitmentLink, on_delete=models.CASCADE,
                             related_name="participants")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="participant")
    external_id = models.CharField(max_length=64)
    session_id = models.CharField(max_length=64, blank=True, default="")
    platform_study = models.CharField(max_length=64, blank=True, default="",
                                      help_text="Prolific's STUDY_ID; MTurk's hitId.")
    submit_to = models.CharField(max_length=64, blank=True, default="",
                                 help_text="MTurk: the turkSubmitTo origin (checked).")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.CONSENT)
    quiz_attempts = models.PositiveSmallIntegerField(default=0)
    joined_at = models.DateTimeField(auto_now_add=True)
    consented_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["link", "external_id"],
                                    name="participant_once_per_link"),
            models.UniqueConstraint(fields=["link", "session_id"], condition=~Q(session_id=""),
                                    name="participant_session_once"),
        ]
        indexes = [models.Index(fields=["status", "deadline"], name="participant_deadline")]

    def __str__(self) -> str:
        return f"{self.link.get_platform_display()} {self.external_id}"

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED


class PaymentBatch(models.Model):
    """Payments recorded together: what one "record the payments due" made (its rows are
    fixed: exporting it again gives the same rows), when it was sent to Prolific's API
    (``sent_at``, by the operator's key) or marked paid by hand (``paid_at``)."""

    link = models.ForeignKey(RecruitmentLink, on_delete=models.CASCADE, related_name="batches")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    send_result = models.TextField(blank=True, default="")
    paid_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class Payment(models.Model):
    """One amount owed to a participant (base pay or bonus), recorded once: the next batch
    records only what the rule gives beyond what is already recorded."""

    class Kind(models.TextChoices):
        BASE = "base", "Base pay"
        BONUS = "bonus", "Bonus"

    participant = models.ForeignKey(Participant, on_delete=models.CASCADE,
                                    related_name="payments")
    batch = models.ForeignKey(PaymentBatch, on_delete=models.CASCADE, related_name="payments")
    kind = models.CharField(max_length=5, choices=Kind.choices)
    amount = models.DecimalField(max_digits=10, decimal_places=2,
                                 validators=[MinValueValidator(Decimal("0.01"))])
    currency = models.CharField(max_length=3)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["participant", "kind"], name="payment_participant")]
