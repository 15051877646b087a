"""Celery tasks of the AI side: take ids, re-fetch, call one service; safe to run twice."""

from __future__ import annotations

from celery import shared_task

from annotations.assisted.services.ai import SAMPLE_TASK

SAMPLING_RETRIES = 3
SAMPLING_BACKOFF_SECONDS = 30


@shared_task(name=SAMPLE_TASK, bind=True, max_retries=SAMPLING_RETRIES, acks_late=True)
def sample_sentence_task(self, sampling_id: int) -> str:
    """Sample one sentence's traces (``annotations.assisted.services.ai.sentence_sample``).
    A provider failure (after the provider's own retries) is retried with backoff
    (30 s · 2^k); after the last retry — or at once for a template that does not fit the
    sentence, or a failure asking again cannot mend (``ProviderError.retryable``: a refused
    endpoint, a redirect, a client error) — the sentence is marked failed with the reason.
    Nothing is stored on failure."""
    from annotations.assisted.services.ai import (
        sampling_failed,
        sampling_retrying,
        sentence_sample,
    )
    from assistants.prompts import TemplateError
    from assistants.provider import ProviderError

    try:
        return sentence_sample(sampling_id=sampling_id)
    except TemplateError as exc:
        return sampling_failed(sampling_id=sampling_id, error=exc)
    except ProviderError as exc:
        if (not exc.retryable or self.request.retries >= self.max_retries
                or self.request.is_eager):
            return sampling_failed(sampling_id=sampling_id, error=exc)
        sampling_retrying(sampling_id=sampling_id, error=exc)
        countdown = SAMPLING_BACKOFF_SECONDS * 2 ** self.request.retries
        raise self.retry(exc=exc, countdown=countdown) from None
