"""Evaluation tokens: created and revoked by a study's researchers, stored as a SHA-256
digest (the token is shown once, at creation), looked up by digest."""

from __future__ import annotations

import hashlib
import secrets

from django.db import transaction
from django.utils import timezone

from annotations.core.errors import DomainError
from annotations.core.models import Study
from annotations.evaluation.models import EvaluationSettings, EvaluationToken

TOKEN_PREFIX = "ev_"


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(*, study: Study, name: str, created_by=None, **policy
                 ) -> tuple[EvaluationToken, str]:
    """A new token of ``study`` (partitioned only) with ``policy`` fields overriding the
    defaults; returns it and the raw token, which is never stored."""
    if study.kind != Study.Kind.PARTITIONED:
        raise DomainError("Evaluation tokens need a partitioned study.", field="study")
    token = EvaluationToken(study=study, name=name, **policy)
    return token, token_issue(token=token, created_by=created_by)


def token_issue(*, token: EvaluationToken, created_by=None) -> str:
    """Save the new (unsaved) ``token`` with a fresh secret and return the secret — the
    only time it exists in clear (the admin's add form shows it once)."""
    if token.study.kind != Study.Kind.PARTITIONED:
        raise DomainError("Evaluation tokens need a partitioned study.", field="study")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token.prefix, token.digest, token.created_by = raw[:10], token_digest(raw), created_by
    with transaction.atomic():
        EvaluationSettings.objects.get_or_create(study=token.study)
        token.save()
    return raw


def token_revoke(*, token: EvaluationToken) -> EvaluationToken:
    """Revoke ``token`` (idempotent): every later call with it is refused."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def token_lookup(raw: str) -> EvaluationToken | None:
    """The token whose digest matches ``raw`` (revoked ones included: they are refused, and
    logged, by the evaluation), or None."""
    if not raw or len(raw) > 200:
        return None
    return EvaluationToken.objects.select_related("study").filter(
        digest=token_digest(raw)).first()
