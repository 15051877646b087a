"""AI outputs of a critique study from an OpenAI-compatible endpoint, as runs with progress.

A run (``CritiqueRun``, kind "provider") writes every missing AI output of the study: for
each question, level by level through the levels the mode gives to AI, ``counts[l]`` minus
what exists, each critique comparing the question's chain pair of the level below in an
order drawn for it (seeded by study, question, level and slot; stored as its inputs' order).
Prompts come from the study's templates (``assistants.prompts``); replies are parsed to an
option letter and, for critiques, a choice (``assistants.sampling``): an unparseable reply
is stored with its raw text as unparseable, never guessed.

Questions are processed in batches of ``BATCH_QUESTIONS``; each batch is stored in one
transaction only after all its requests succeeded. A request that still fails after the
provider's retries (``ProviderError``) ends the run as failed with the endpoint's error and
stores nothing of that batch (earlier batches stay: each was complete). After every batch
the annotator tasks its outputs make possible are generated. One run at a time per study.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from annotations.core.errors import DomainError, InvalidStudy
from annotations.core.models import Study, User
from annotations.core.queue import task
from annotations.core.words import counted
from annotations.critique.models import (
    CritiqueOutput,
    CritiqueQuestion,
    CritiqueRun,
    CritiqueSettings,
)
from annotations.critique.services.studies import critique_settings
from annotations.critique.services.task_view import (
    ShownOutput,
    letter,
    output_name,
)
from assistants.endpoints import ai_endpoint_check

log = logging.getLogger(__name__)

BATCH_QUESTIONS = 5
SLICE_SECONDS = 150.0  # one Celery task's share of a run (CELERY_TASK_SOFT_TIME_LIMIT 240 s)
ORDER_STREAM = 11
# the run task's registered name (annotations/critique/tasks.py; core.queue)
RUN_TASK = "annotations.critique_tasks.critique_run_task"
ACTIVE = (CritiqueRun.Status.QUEUED, CritiqueRun.Status.RUNNING)


class RunRefused(DomainError):
    code = "run_refused"
    http_status = 409


@dataclass
class _Out:
    """One output of a question in memory, keyed by (level, slot): existing or new."""

    level: int
    slot: int
    reasoning: str
    final: int | None
    choice: str
    swapped: bool = False  # its inputs were shown as (slot 1, slot 0)
    raw_text: str = ""
    model: str = ""
    new: bool = False


def _shown(out: _Out, options: list[str]) -> ShownOutput:
    saw, judged = None, ""
    if out.level:
        names = (output_name(out.level - 1, 0), output_name(out.level - 1, 1))
        saw = names[::-1] if out.swapped else names
        judged = {"first": saw[0], "second": saw[1], "neither": "neither",
                  "unparseable": "no parseable choice"}.get(out.choice, "")
    return ShownOutput(name=output_name(out.level, out.slot), level=out.level,
                       text=out.reasoning, final=letter(out.final),
                       final_text=options[out.final] if out.final is not None else "",
                       saw=saw, judged=judged)


def _chain_text(outs: dict[tuple[int, int], _Out], below: int, options: list[str]) -> str:
    blocks = []
    for lv in range(below):
        for slot in (0, 1):
            shown = _shown(outs[(lv, slot)], options)
            blocks.append(f"[{shown.name}]\n{shown.as_text()}\n[End of {shown.name}]")
    return "\n\n".join(blocks)


def _orders(seed: int, question_id: int, level: int, count: int) -> np.ndarray:
    rng = np.random.default_rng([seed, ORDER_STREAM, question_id, level])
    return rng.integers(0, 2, size=count).astype(bool)


def _existing(study: Study, question_ids: list[int]) -> dict[int, dict[tuple[int, int], _Out]]:
    outs: dict[int, dict[tuple[int, int], _Out]] = {q: {} for q in question_ids}
    rows = (CritiqueOutput.objects.filter(study=study, question_id__in=question_ids)
            .values_list("question_id", "level", "slot", "reasoning", "final", "choice",
                         "first__slot"))
    for q, lv, slot, reasoning, final, choice, first_slot in rows:
        outs[q][(lv, slot)] = _Out(lv, slot, reasoning, final, choice,
                                   swapped=first_slot == 1)
    return outs


def questions_needing_work(study: Study, settings: CritiqueSettings) -> list[int]:
    """Questions with an AI output still to write whose inputs exist or will (every AI
    level below the first human one is written in the same pass)."""
    if not settings.ai_levels:
        return []
    needed = sum(settings.count_at(lv) for lv in settings.ai_levels)
    counts = dict(CritiqueOutput.objects.filter(study=study, level__in=settings.ai_levels)
                  .values_list("question_id").annotate(n=Count("id"))
                  .values_list("question_id", "n"))
    return [q for q in CritiqueQuestion.objects.filter(study=study).order_by("pk")
            .values_list("pk", flat=True) if counts.get(q, 0) < needed]


def _generate_question(config, templates, settings: CritiqueSettings, study: Study,
                       question: CritiqueQuestion, outs: dict[tuple[int, int], _Out]) -> None:
    """Write the question's missing AI outputs into ``outs`` (raises ProviderError)."""
    from assistants.sampling import generate_critique, generate_response

    options = list(question.options)
    for level in settings.ai_levels:
        if level and not ((level - 1, 0) in outs and (level - 1, 1) in outs):
            return  # its inputs are written by annotators and do not exist yet
        have = sorted(slot for lv, slot in outs if lv == level)
        missing = [s for s in range(settings.count_at(level)) if s not in have]
        orders = _orders(study.seed, question.pk, level, settings.count_at(level))
        for slot in missing:
            seed = int((study.seed + question.pk * 1009 + level * 101 + slot) % 2**31)
            if level == 0:
                got = generate_response(config, templates["response"], question.text, options,
                                        seed=seed)
                outs[(0, slot)] = _Out(0, slot, got.rationale, got.final, "",
                                       raw_text=got.raw_text, model=got.model, new=True)
                continue
            swapped = bool(orders[slot])
            pair = [outs[(level - 1, 0)], outs[(level - 1, 1)]]
            first, second = (pair[1], pair[0]) if swapped else (pair[0], pair[1])
            got = generate_critique(
                config, templates["critique"], question.text, options, level,
                _shown(first, options).as_text(), _shown(second, options).as_text(),
                _chain_text(outs, level - 1, options), seed=seed)
            choice = {1: "first", 2: "second", 0: "neither"}.get(got.choice, "unparseable")
            outs[(level, slot)] = _Out(level, slot, got.rationale, got.final, choice,
                                       swapped=swapped, raw_text=got.raw_text, model=got.model,
                                       new=True)


@transaction.atomic
def _store(study: Study, batch: dict[int, dict[tuple[int, int], _Out]]) -> tuple[int, int]:
    """Store the new outputs of a batch (level by level: inputs first). Returns (stored,
    unparseable)."""
    stored = unparseable = 0
    ids = {(q, lv, slot): pk for q, lv, slot, pk in CritiqueOutput.objects.filter(
        study=study, question_id__in=list(batch)).values_list("question_id", "level", "slot",
                                                                "pk")}
    for level in range(CritiqueSettings.objects.get(study=study).top_level + 1):
        for q, outs in batch.items():
            for (lv, slot), out in sorted(outs.items()):
                if lv != level or not out.new:
                    continue
                inputs = ((ids[(q, lv - 1, 1)], ids[(q, lv - 1, 0)]) if out.swapped
                          else (ids[(q, lv - 1, 0)], ids[(q, lv - 1, 1)])) if lv else (None, None)
                made = CritiqueOutput.objects.create(
                    study=study, question_id=q, level=lv, slot=slot, first_id=inputs[0],
                    second_id=inputs[1], reasoning=out.reasoning, final=out.final,
                    choice=out.choice if lv else "", author_kind=CritiqueOutput.Author.AI,
                    ai_model=out.model, raw_text=out.raw_text,
                    source=CritiqueOutput.Source.PROVIDER)
                ids[(q, lv, slot)] = made.pk
                stored += 1
                unparseable += out.final is None or out.choice == "unparseable"
    return stored, unparseable


def provider_config(settings: CritiqueSettings):
    from assistants.provider import config_from_settings

    return config_from_settings(base_url=settings.ai_base_url, model=settings.ai_model,
                                api_key=settings.ai_api_key)


@transaction.atomic
def critique_ai_run_start(*, study: Study, by: User | None = None) -> CritiqueRun:
    """Queue a run writing every missing AI output (module docstring). Refused when the
    mode has no AI level, no endpoint is configured or it is not allowed, or a run is under
    way; the Celery task starts after commit."""
    settings = critique_settings(study)
    if not settings.ai_levels:
        raise RunRefused("This study's mode has no AI level: annotators write every level.")
    config = provider_config(settings)
    if not config.base_url or not config.model:
        raise RunRefused("No AI endpoint: set the study's endpoint and model (or the server's "
                         "OVERSIGHT_AI_BASE_URL and OVERSIGHT_AI_MODEL).")
    try:
        ai_endpoint_check(config.base_url, resolve_names=False)
    except InvalidStudy as exc:
        raise RunRefused(f"AI endpoint refused: {exc.message.removeprefix('ai_base_url: ')}"
                         ) from None
    Study.objects.select_for_update().get(pk=study.pk)
    if CritiqueRun.objects.filter(study=study, status__in=ACTIVE).exists():
        raise RunRefused("A run of this study is under way; wait for it to end.")
    total = len(questions_needing_work(study, settings))
    run = CritiqueRun.objects.create(study=study, kind=CritiqueRun.Kind.PROVIDER, total=total,
                                     created_by=by, name=f"{config.model} at {config.endpoint}")
    transaction.on_commit(lambda: run_enqueue(run.pk))
    return run


def run_enqueue(run_id: int) -> None:
    """Start the run's Celery task. On the embedded defaults (no broker) a web request must
    not wait for an AI run: it runs in a thread, as the debounced recompute does (tests,
    with no debounce, run it inline)."""
    from django.conf import settings


    if settings.CELERY_TASK_ALWAYS_EAGER:
        if settings.OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS > 0:
            threading.Thread(target=_run_in_thread, args=(run_id,), daemon=True).start()
        else:
            task(RUN_TASK).apply(args=(run_id,))
        return
    task(RUN_TASK).delay(run_id)


def _run_in_thread(run_id: int) -> None:
    from django.db import connections


    try:
        task(RUN_TASK).apply(args=(run_id,))
    finally:
        connections.close_all()


def _finish(run: CritiqueRun, status: str, errors: list[str] | None = None) -> None:
    CritiqueRun.objects.filter(pk=run.pk).update(status=status, finished_at=timezone.now(),
                                                 errors=errors or [])


def critique_ai_run_slice(*, run_id: int, seconds: float = SLICE_SECONDS) -> bool:
    """Work on a provider run for about ``seconds``; True when more remains (the caller
    queues another slice). Records progress, failure (the endpoint's error) or success."""
    from annotations.critique.services.generation import critique_generate
    from assistants.prompts import PromptTemplate
    from assistants.provider import ProviderError

    run = CritiqueRun.objects.select_related("study").get(pk=run_id)
    if run.status not in ACTIVE:
        return False
    CritiqueRun.objects.filter(pk=run.pk).update(status=CritiqueRun.Status.RUNNING)
    study = run.study
    settings = CritiqueSettings.objects.get(study=study)
    config = provider_config(settings)
    templates = {
        "response": PromptTemplate("response", settings.response_template,
                                   settings.response_system),
        "critique": PromptTemplate("critique", settings.critique_template,
                                   settings.critique_system)}
    started = time.monotonic()
    todo = questions_needing_work(study, settings)
    while todo and time.monotonic() - started < seconds:
        ids, todo = todo[:BATCH_QUESTIONS], todo[BATCH_QUESTIONS:]
        questions = {q.pk: q for q in CritiqueQuestion.objects.filter(pk__in=ids)}
        batch = _existing(study, ids)
        try:
            for q in ids:
                _generate_question(config, templates, settings, study, questions[q], batch[q])
            stored, unparseable = _store(study, batch)
        except ProviderError as exc:
            log.warning("critique run %s failed: %s", run.pk, exc)
            _finish(run, CritiqueRun.Status.FAILED, [str(exc)])
            return False
        except Exception as exc:  # a template that no longer renders, a bug: reported, and
            # the run ends (a run left 'running' would refuse every later run)
            _finish(run, CritiqueRun.Status.FAILED, [f"{type(exc).__name__}: {exc}"])
            raise
        CritiqueRun.objects.filter(pk=run.pk).update(
            done=F("done") + len(ids), stored=F("stored") + stored,
            unparseable=F("unparseable") + unparseable)
        critique_generate(study=study, question_ids=ids)
        _schedule(study.pk)
    if todo:
        return True
    _finish(run, CritiqueRun.Status.SUCCEEDED)
    return False


def _schedule(study_id: int) -> None:
    from annotations.core.services.recompute import study_recompute_schedule

    study_recompute_schedule(study_id)


def run_progress(run: CritiqueRun) -> str:
    """One line for the page: what the run did so far."""
    share = f"{run.done}/{counted(run.total, 'question')}" if run.total else "nothing to do"
    return (f"{run.get_status_display()}: {share}, {counted(run.stored, 'output')} stored"
            f"{f', {run.unparseable} unparseable' if run.unparseable else ''}")


# --- JSONL imports as runs -----------------------------------------------------------------
@transaction.atomic
def critique_import_run_start(*, study: Study, data: bytes, name: str,
                              by: User | None = None) -> CritiqueRun:
    """Queue the JSONL import of AI outputs (``ai_outputs``) as a run: the page shows its
    progress and, when it fails, every bad line. Refused at once (ImportFailed naming the
    file, and line and field where there is one; nothing stored): more than
    OVERSIGHT_IMPORT_MAX_BYTES, text that is not UTF-8, a NUL character. The upload waits
    in the run's file (never the run's row) until the run ends; the Celery task starts
    after commit."""
    from django.conf import settings as django_settings

    from annotations.core.errors import ImportFailed
    from annotations.core.inputs import file_too_large_message
    from annotations.core.services.records import read_records
    from annotations.critique.models import CritiqueRunFile

    critique_settings(study)
    if len(data) > django_settings.OVERSIGHT_IMPORT_MAX_BYTES:
        raise ImportFailed([file_too_large_message(name, len(data))])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFailed([f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})"]
                           ) from None
    if "\x00" in text or "\\u0000" in text:  # the reader names the line and field
        for _ in read_records(io.StringIO(text), name=name, fmt="jsonl"):
            pass
    run = CritiqueRun.objects.create(study=study, kind=CritiqueRun.Kind.IMPORT, name=name[:255],
                                     total=text.count("\n") + 1, created_by=by)
    CritiqueRunFile.objects.create(run=run, data=data)
    transaction.on_commit(lambda: run_enqueue(run.pk))
    return run


def critique_import_run(*, run_id: int) -> None:
    """Import a queued run's file, all or nothing; record the outcome on the run and delete
    the file."""
    from annotations.core.errors import ImportFailed
    from annotations.core.services.import_jobs import import_summary
    from annotations.critique.models import CritiqueRunFile
    from annotations.critique.services.ai_outputs import critique_ai_outputs_import

    run = CritiqueRun.objects.select_related("study").get(pk=run_id)
    if run.status not in ACTIVE:
        return
    CritiqueRun.objects.filter(pk=run.pk).update(status=CritiqueRun.Status.RUNNING)
    stored = CritiqueRunFile.objects.filter(run=run).values_list("data", flat=True).first()
    try:
        if stored is None:
            raise ImportFailed([f"{run.name}: the uploaded file is gone; upload it again"])
        result = critique_ai_outputs_import(study=run.study, source=io.BytesIO(bytes(stored)),
                                            name=run.name)
    except ImportFailed as exc:
        _finish(run, CritiqueRun.Status.FAILED, exc.errors[:200])
        CritiqueRunFile.objects.filter(run=run).delete()
        return
    CritiqueRun.objects.filter(pk=run.pk).update(
        done=run.total, stored=result.created, unparseable=result.unparseable,
        summary=import_summary(result))
    CritiqueRunFile.objects.filter(run=run).delete()
    _finish(run, CritiqueRun.Status.SUCCEEDED)
