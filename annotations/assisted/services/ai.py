"""The AI rater of an assisted study: its trace samples per sentence, aggregated into the AI
rating (``assistants.aggregation``: mode of the verified samples, confidence = share
agreeing with it, displayed trace = best agreeing sample under the study's scorer, debate
= best sample of each binarised side), and sampling them from an OpenAI-compatible
endpoint (``assistants.sampling.sample_traces``), one Celery task per sentence.

A provider that fails (after its own retries and the task's) is reported on the sentence's
``SentenceSampling`` row; it never stores a sample, a rating or a route. Traces a rater was
shown are never replaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotations.assisted.models import AssistedSettings, Exposure, Sentence
from annotations.assisted.services.design import settings_of
from annotations.assisted.services.ranks import splitmix64
from annotations.assisted.services.routing import sentences_reroute
from annotations.core.errors import DomainError, InvalidStudy
from annotations.core.models import Study, User
from annotations.core.queue import task
from assistants.aggregation import (
    AiRating,
    SampleResult,
    aggregate,
    imported_score,
    most_evidence,
)
from assistants.endpoints import ai_endpoint_check
from assistants.models import SamplingRun, SentenceSampling, TraceSample
from assistants.prompts import (
    FACTUALITY_GIVEN_RESULTS,
    FACTUALITY_OWN_SEARCHES,
    PromptTemplate,
    validate_template,
)
from assistants.provider import ProviderConfig, ProviderError, config_from_settings
from assistants.traces import FactualitySentence, Search, SearchResult

SCORERS = {"most_evidence": most_evidence, "imported_score": imported_score}
SAMPLING_SEED_STREAM = 0x5A11
# the sampling task's registered name (annotations/assisted/tasks.py; core.queue)
SAMPLE_TASK = "assistants.tasks.sample_sentence_task"


class TracesShown(DomainError):
    code = "traces_shown"
    http_status = 409


def sentences_shown(sentence_ids: Iterable[int]) -> set[int]:
    """Sentences whose AI output some rater of an assisted arm was shown."""
    return set(Exposure.objects.filter(task__sentence_id__in=list(sentence_ids))
               .exclude(components=[]).values_list("task__sentence_id", flat=True))


def searches_of(sentence: Sentence) -> tuple[Search, ...] | None:
    """The search results the sentence gives the AI rater (None: it searches itself)."""
    if sentence.searches is None:
        return None
    return tuple(Search(query=s["query"], results=tuple(
        SearchResult(title=r.get("title", ""), url=r["url"], snippet=r["snippet"])
        for r in s["results"])) for s in sentence.searches)


def _rows(sentence: Sentence, samples: Sequence[SampleResult], source: str,
          rating: AiRating) -> list[TraceSample]:
    displayed = rating.displayed.index if rating.displayed is not None else None
    sides = {}
    if rating.debate is not None:
        sides[rating.debate.accurate.index] = TraceSample.DebateSide.ACCURATE
        sides[rating.debate.inaccurate.index] = TraceSample.DebateSide.INACCURATE
    return [TraceSample(
        sentence=sentence, index=s.index, source=source, raw_text=s.raw_text,
        trace=s.trace.to_dict() if s.trace is not None else None,
        verdict=s.trace.verdict if s.trace is not None else "", verified=s.verified,
        reasons=list(s.drop_reasons), score=s.score, model=s.model or "", latency=s.latency,
        usage=s.usage, is_displayed=s.index == displayed, debate_side=sides.get(s.index, ""))
        for s in samples]


def ai_rating_store(*, sentence: Sentence, samples: Sequence[SampleResult], source: str,
                    settings: AssistedSettings) -> AiRating:
    """Replace the sentence's samples with ``samples`` and store their aggregation as its
    AI rating (call inside a transaction; the caller checks nothing was shown)."""
    rating = aggregate(samples, scorer=SCORERS[settings.scorer])
    TraceSample.objects.filter(sentence=sentence).delete()
    TraceSample.objects.bulk_create(_rows(sentence, samples, source, rating))
    sentence.ai_verdict = rating.verdict or ""
    sentence.ai_confidence = rating.confidence
    sentence.ai_n_agree = rating.n_agree
    sentence.ai_n_verified = rating.n_verified
    sentence.ai_n_samples = rating.n_samples
    sentence.ai_source = Sentence.AiSource.TRACES
    sentence.ai_rated_at = timezone.now()
    sentence.save(update_fields=["ai_verdict", "ai_confidence", "ai_n_agree",
                                 "ai_n_verified", "ai_n_samples", "ai_source", "ai_rated_at"])
    return rating


def reaggregate(*, study: Study) -> int:
    """Aggregate every sentence's stored samples again (after the scorer or cut-offs
    changed); sentences whose AI output was shown keep theirs. Returns how many changed."""
    settings = settings_of(study)
    shown = sentences_shown(Sentence.objects.filter(study=study).values_list("pk", flat=True))
    changed = []
    with transaction.atomic():
        for sentence in Sentence.objects.filter(study=study, ai_source="traces") \
                .exclude(pk__in=shown):
            samples = [_sample(row) for row in sentence.trace_samples.order_by("index")]
            if samples:
                before = (sentence.ai_verdict, sentence.ai_confidence)
                ai_rating_store(sentence=sentence, samples=samples,
                                source=sentence.trace_samples.first().source,
                                settings=settings)
                if before != (sentence.ai_verdict, sentence.ai_confidence):
                    changed.append(sentence.pk)
        sentences_reroute(study=study, sentence_ids=changed)
    return len(changed)


def _sample(row: TraceSample) -> SampleResult:
    from assistants.traces import parse_trace

    trace = parse_trace(row.trace, strict=False) if row.trace is not None else None
    error = None
    reasons: tuple[str, ...] = ()
    if trace is None:
        error = row.reasons[0] if row.reasons else "no trace"
    elif not row.verified:
        reasons = tuple(row.reasons) or ("not verified",)
    return SampleResult(index=row.index, trace=trace, raw_text=row.raw_text, error=error,
                        reasons=reasons, score=row.score, model=row.model,
                        latency=row.latency, usage=row.usage)


# ---------------------------------------------------------------- sampling an endpoint


def provider_config(settings: AssistedSettings) -> ProviderConfig:
    """The study's endpoint (its own base URL, model and key, else the site's settings)."""
    return config_from_settings(base_url=settings.ai_base_url, model=settings.ai_model,
                                api_key=settings.ai_api_key,
                                temperature=settings.ai_temperature,
                                max_tokens=settings.ai_max_tokens)


def prompt_template(settings: AssistedSettings, *, given_searches: bool) -> PromptTemplate:
    """The study's factuality template (its own text, else the platform's default for
    sentences with or without given search results)."""
    if settings.prompt_user.strip():
        template = PromptTemplate(kind="factuality", user=settings.prompt_user,
                                  system=settings.prompt_system)
        validate_template(template)
        return template
    return FACTUALITY_GIVEN_RESULTS if given_searches else FACTUALITY_OWN_SEARCHES


def sampling_seed(study: Study, sentence: Sentence) -> int:
    """The seed of a sentence's first sample (sample i: + i, mod 2³¹)."""
    return splitmix64(splitmix64(study.seed ^ SAMPLING_SEED_STREAM) ^ sentence.pk) % 2**31


@transaction.atomic
def sampling_start(*, study: Study, user: User | None = None,
                   sentences: Iterable[Sentence] | None = None) -> SamplingRun:
    """Queue one sampling task per sentence (those given, else every sentence whose AI
    output no rater was shown yet). Checks the endpoint is configured and allowed
    (``ai_endpoints.ai_endpoint_check``) and the template valid before anything is queued.
    The tasks start after commit."""
    settings = settings_of(study)
    config = provider_config(settings)
    if not config.base_url or not config.model:
        raise InvalidStudy("ai_base_url: no endpoint configured (set the study's base URL "
                           "and model, or OVERSIGHT_AI_BASE_URL / OVERSIGHT_AI_MODEL).",
                           field="ai_base_url")
    ai_endpoint_check(config.base_url, resolve_names=False)
    prompt_template(settings, given_searches=True)
    qs = Sentence.objects.filter(study=study)
    if sentences is not None:
        qs = qs.filter(pk__in=[s.pk for s in sentences])
    ids = list(qs.order_by("pk").values_list("pk", flat=True))
    shown = sentences_shown(ids)
    ids = [pk for pk in ids if pk not in shown]
    if not ids:
        raise InvalidStudy("No sentence to sample: import sentences first (sentences whose "
                           "AI output raters saw keep it).", field="sentences")
    run = SamplingRun.objects.create(
        study=study, n_samples=settings.n_samples, requested_by=user,
        config={"endpoint": config.endpoint, "model": config.model,
                "temperature": config.temperature, "max_tokens": config.max_tokens,
                "scorer": settings.scorer})
    SentenceSampling.objects.bulk_create(SentenceSampling(run=run, sentence_id=pk)
                                         for pk in ids)
    sampling_ids = list(run.sentences.values_list("pk", flat=True))

    def enqueue() -> None:

        for pk in sampling_ids:
            task(SAMPLE_TASK).delay(pk)

    transaction.on_commit(enqueue)
    return run


def sentence_sample(*, sampling_id: int) -> str:
    """Sample one sentence of a run (the Celery task's body): ask the endpoint
    ``n_samples`` times, then store the samples and the AI rating and route the sentence,
    in one transaction. Raises ``ProviderError`` (nothing stored) for the task to retry.
    Returns the new status."""
    item = SentenceSampling.objects.select_related("run", "sentence", "run__study") \
        .get(pk=sampling_id)
    if item.status in (SentenceSampling.Status.DONE, SentenceSampling.Status.FAILED):
        return item.status
    SentenceSampling.objects.filter(pk=sampling_id).update(
        status=SentenceSampling.Status.RUNNING, attempts=item.attempts + 1)
    study, sentence = item.run.study, item.sentence
    settings = settings_of(study)
    searches = searches_of(sentence)
    template = prompt_template(settings, given_searches=searches is not None)
    samples = sample_traces_for(settings, template, sentence, searches, item.run.n_samples,
                                sampling_seed(study, sentence))
    with transaction.atomic():
        locked = Sentence.objects.select_for_update().get(pk=sentence.pk)
        if locked.pk in sentences_shown([locked.pk]):
            return _finish(sampling_id, SentenceSampling.Status.FAILED,
                           "a rater was shown this sentence's AI output meanwhile; kept it")
        ai_rating_store(sentence=locked, samples=samples, source=TraceSample.Source.SAMPLED,
                        settings=settings)
        sentences_reroute(study=study, sentence_ids=[locked.pk])
        return _finish(sampling_id, SentenceSampling.Status.DONE, "")


def sample_traces_for(settings: AssistedSettings, template: PromptTemplate,
                      sentence: Sentence, searches: tuple[Search, ...] | None, n: int,
                      seed: int) -> list[SampleResult]:
    from assistants.sampling import sample_traces

    return sample_traces(provider_config(settings), template,
                         FactualitySentence(prompt=sentence.prompt, response=sentence.response,
                                            sentence=sentence.target, searches=searches),
                         n, seed)


def _finish(sampling_id: int, status: str, error: str) -> str:
    now = timezone.now()
    SentenceSampling.objects.filter(pk=sampling_id).update(status=status, error=error[:500],
                                                           finished_at=now)
    run_id = SentenceSampling.objects.filter(pk=sampling_id).values_list("run_id",
                                                                         flat=True).first()
    open_left = SentenceSampling.objects.filter(
        run_id=run_id, status__in=[SentenceSampling.Status.QUEUED,
                                   SentenceSampling.Status.RUNNING]).exists()
    if not open_left:
        SamplingRun.objects.filter(pk=run_id, finished_at__isnull=True).update(finished_at=now)
    return status


def sampling_failed(*, sampling_id: int, error: ProviderError | Exception) -> str:
    """The task gave up: record why (the endpoint and what went wrong; never the key)."""
    return _finish(sampling_id, SentenceSampling.Status.FAILED, str(error))


def sampling_retrying(*, sampling_id: int, error: Exception) -> None:
    SentenceSampling.objects.filter(pk=sampling_id).update(
        status=SentenceSampling.Status.QUEUED, error=f"retrying: {error}"[:500])


def sampling_progress(run: SamplingRun) -> dict[str, Any]:
    """Counts per status and the share finished (the study page's progress bar)."""
    counts = dict.fromkeys(SentenceSampling.Status.values, 0)
    for status, n in _status_counts(run):
        counts[status] = n
    total = sum(counts.values())
    finished = counts["done"] + counts["failed"]
    return {"run": run, "total": total, **counts, "finished": finished,
            "percent": int(100 * finished / total) if total else 100,
            "errors": list(run.sentences.filter(status=SentenceSampling.Status.FAILED)
                           .select_related("sentence")
                           .values_list("sentence__external_id", "error")[:20])}


def _status_counts(run: SamplingRun) -> list[tuple[str, int]]:
    from django.db.models import Count

    return [(row["status"], row["n"]) for row in
            run.sentences.values("status").annotate(n=Count("id")).order_by()]
