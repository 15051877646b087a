"""The payments ledger of a recruitment link: what each participant is owed — the base pay
once they completed, and the bonus the link's rule gives — recorded once, in batches that
export as Prolific's bulk-bonus CSV (``<participant id>,<amount>`` per line) and as JSON,
and may be sent to Prolific's API with the operator's key.

Contract:

* **Owed** (:func:`payments_owed`): base pay = ``link.base_pay`` for a completed
  participant; bonus = ``bonus_per_correct`` × their correct answers on items whose answer
  is known (the type's ``Reviewable.worker_answers``: quality checks, gold labels), when
  they gave at least ``bonus_min_checks`` such answers at an accuracy of at least
  ``bonus_min_accuracy``. Answers an exclusion took out earn nothing, and a worker a
  standing exclusion holds earns no bonus.
* **Recorded once** (:func:`payments_record`): under the link's row lock, a new batch
  holds, per participant and kind, what is owed beyond what earlier batches recorded (0:
  nothing). Recording again with nothing new makes no batch; exporting a batch again gives
  the same rows — the same export twice never pays twice. An amount owed that fell (an
  exclusion after a batch) is not taken back: the ledger shows it.
* **Sending** (:func:`batch_send`): only to ``OVERSIGHT_PROLIFIC_API_URL`` with
  ``OVERSIGHT_PROLIFIC_TOKEN`` (the operator's settings; never a URL typed in a page), one
  request per batch, the batch marked sent — a batch is never sent twice."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from annotations.core.errors import DomainError
from annotations.core.exclusion_models import ExcludedAnswer, Exclusion
from annotations.core.models import User
from annotations.core.recruitment_models import (
    Participant,
    Payment,
    PaymentBatch,
    RecruitmentLink,
)
from annotations.core.reviews.registry import reviewable

CENT = Decimal("0.01")


class NothingOwed(DomainError):
    code = "nothing_owed"
    http_status = 409


class NotSendable(DomainError):
    code = "not_sendable"
    http_status = 409


@dataclass(frozen=True)
class Owed:
    """One participant's line of the ledger: their checked answers and correct ones, the
    base pay and bonus owed, and what is already recorded of each."""

    participant: Participant
    checked: int
    correct: int
    base: Decimal
    bonus: Decimal
    base_recorded: Decimal
    bonus_recorded: Decimal

    @property
    def base_due(self) -> Decimal:
        return max(Decimal("0"), self.base - self.base_recorded)

    @property
    def bonus_due(self) -> Decimal:
        return max(Decimal("0"), self.bonus - self.bonus_recorded)


def payments_owed(link: RecruitmentLink) -> list[Owed]:
    """Every participant of the link with what they are owed (module docstring)."""
    study = link.study
    participants = list(link.participants.select_related("user").order_by("joined_at", "pk"))
    data = reviewable(study.kind).worker_answers(study)
    excluded = set(ExcludedAnswer.ids(study, reviewable(study.kind).answer_model)
                   .values_list("answer_id", flat=True))
    held = set(Exclusion.objects.filter(study=study, undone_at=None,
                                        kind=Exclusion.Kind.WORKER)
               .values_list("worker_id", flat=True))
    kept = ~np.isin(data.answer, np.fromiter(excluded, dtype=np.int64, count=len(excluded)))
    known = kept & ~np.isnan(data.correct)
    recorded: dict[tuple[int, str], Decimal] = {
        (row["participant"], row["kind"]): row["total"]
        for row in Payment.objects.filter(participant__link=link)
        .values("participant", "kind").annotate(total=Sum("amount")).order_by()}
    out = []
    for p in participants:
        mine = known & (data.worker == p.user_id)
        checked, correct = int(mine.sum()), int(np.nansum(data.correct[mine]))
        earns = (p.user_id not in held and checked >= link.bonus_min_checks
                 and checked > 0 and correct / checked >= link.bonus_min_accuracy)
        bonus = (link.bonus_per_correct * correct).quantize(CENT, ROUND_HALF_UP) if earns \
            else Decimal("0.00")
        base = link.base_pay if p.status == Participant.Status.COMPLETED else Decimal("0.00")
        out.append(Owed(p, checked, correct, base, bonus,
                        recorded.get((p.pk, Payment.Kind.BASE), Decimal("0.00")),
                        recorded.get((p.pk, Payment.Kind.BONUS), Decimal("0.00"))))
    return out


@transaction.atomic
def payments_record(*, link: RecruitmentLink, by: User) -> PaymentBatch:
    """Record what is owed beyond the earlier batches as a new batch; ``NothingOwed`` when
    nothing is (no empty batch is made)."""
    link = RecruitmentLink.objects.select_for_update().select_related("study").get(pk=link.pk)
    rows = []
    for owed in payments_owed(link):
        for kind, due in ((Payment.Kind.BASE, owed.base_due),
                          (Payment.Kind.BONUS, owed.bonus_due)):
            if due > 0:
                rows.append((owed, kind, due))
    if not rows:
        raise NothingOwed("Nothing is owed beyond what earlier batches recorded.")
    batch = PaymentBatch.objects.create(link=link, created_by=by)
    Payment.objects.bulk_create(Payment(
        participant=owed.participant, batch=batch, kind=kind, amount=due,
        currency=link.currency, detail={"checked": owed.checked, "correct": owed.correct})
        for owed, kind, due in rows)
    return batch


def batch_rows(batch: PaymentBatch) -> list[dict]:
    """The batch's payments as JSON rows (participant id, kind, amount, currency, and the
    checked and correct answers behind a bonus)."""
    return [{"participant": p.participant.external_id, "kind": p.kind,
             "amount": str(p.amount), "currency": p.currency, **p.detail}
            for p in batch.payments.select_related("participant").order_by("pk")]


def prolific_bonus_lines(batch: PaymentBatch) -> str:
    """The batch's bonuses in the form Prolific's bulk bonus takes: ``<id>,<amount>`` per
    line, no header (base pay is paid by approving the submission on Prolific)."""
    totals: dict[str, Decimal] = {}
    for p in batch.payments.select_related("participant").filter(kind=Payment.Kind.BONUS):
        key = p.participant.external_id
        totals[key] = totals.get(key, Decimal("0")) + p.amount
    return "".join(f"{pid},{amount:.2f}\n" for pid, amount in totals.items())


def prolific_sending_configured() -> bool:
    return bool(getattr(settings, "OVERSIGHT_PROLIFIC_TOKEN", ""))


@transaction.atomic
def batch_send(*, batch: PaymentBatch) -> PaymentBatch:
    """Send the batch's bonuses to Prolific's bulk-bonus API with the operator's key (one
    request, with the platform study's id), once. ``NotSendable``: not a Prolific link, no
    key configured, already sent, or no bonus in it."""
    batch = PaymentBatch.objects.select_for_update().select_related("link").get(pk=batch.pk)
    link = batch.link
    if link.platform != RecruitmentLink.Platform.PROLIFIC:
        raise NotSendable("Only a Prolific link's batches go to Prolific.")
    if not prolific_sending_configured():
        raise NotSendable("The operator has not configured a Prolific API key "
                          "(OVERSIGHT_PROLIFIC_TOKEN): download the CSV instead.")
    if batch.sent_at is not None:
        raise NotSendable("This batch was already sent.")
    lines = prolific_bonus_lines(batch)
    if not lines:
        raise NotSendable("This batch holds no bonus.")
    study_ids = set(batch.payments.values_list("participant__platform_study", flat=True))
    body = json.dumps({"study_id": sorted(study_ids)[0], "csv_bonuses": lines}).encode()
    base = settings.OVERSIGHT_PROLIFIC_API_URL.rstrip("/")
    made = _prolific_post(f"{base}/api/v1/submissions/bonus-payments/", body)
    bonus_id = str(made.get("id", ""))
    if not bonus_id.isalnum():
        raise NotSendable("Prolific's answer named no bonus payment; nothing was recorded "
                          "as sent.")
    _prolific_post(f"{base}/api/v1/bulk-bonus-payments/{bonus_id}/pay/", b"{}")
    batch.sent_at = timezone.now()
    batch.send_result = f"Prolific bulk bonus {bonus_id}"
    batch.save(update_fields=["sent_at", "send_result"])
    return batch


ANSWER_MAX = 1 << 20


def _prolific_post(url: str, body: bytes) -> dict:
    """POST to Prolific with the operator's key: no proxy, no redirect, 15 s, at most 1 MB
    read of the answer; ``NotSendable`` unless it answers 2xx."""
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": f"Token {settings.OVERSIGHT_PROLIFIC_TOKEN}",
        "Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    try:
        with opener.open(request, timeout=15) as response:
            status, raw = response.status, response.read(ANSWER_MAX)
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, b""
    except OSError as exc:
        raise NotSendable(f"Prolific could not be reached ({type(exc).__name__}); nothing "
                          "was recorded as sent.") from exc
    if not 200 <= status < 300:
        raise NotSendable(f"Prolific answered {status}; nothing was recorded as sent.")
    try:
        answer = json.loads(raw or b"{}")
    except ValueError:
        answer = {}
    return answer if isinstance(answer, dict) else {}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def batch_mark_paid(*, batch: PaymentBatch) -> PaymentBatch:
    if batch.paid_at is None:
        batch.paid_at = timezone.now()
        batch.save(update_fields=["paid_at"])
    return batch
