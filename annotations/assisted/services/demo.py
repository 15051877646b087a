"""A simulated assisted study in the database (METHODS.md M2): the `serve` demo beside the
partitioned one, and the end-to-end tests of the analysis.

``estimators.assisted.simulation`` draws the truth — each sentence's gold label, the AI's
confidence (share of N samples agreeing) and whether its verdict is right, and raters with
planted accuracies when the AI is right / wrong per arm (the reliance effects). This module
turns one draw into rows through the platform's own services where they exist: the
study, its arms and settings (``assisted_study_create``, ``arm_save``), the sentences
(``sentences_import``), N verifiable traces per sentence (``traces_import``: the AI rating,
its confidence and the displayed trace come out of the real aggregation), opening and
routing (``assisted_study_open``: the rating tasks). The raters' work is written in bulk —
one rating task answered per simulated rating, with the exposure of exactly the panel
their arm shows (the real panel's SHA-256), a skip row per simulated skip and an
interaction log — because 3 000 ratings through the page would take minutes; the rows are
the ones the rating service writes."""

from __future__ import annotations

import datetime as dt
import io
import json
import math
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.utils import timezone

from annotations.assisted.models import (
    Arm,
    Exposure,
    Interaction,
    RaterAssignment,
    Rating,
    RatingSkip,
    RatingTask,
    Sentence,
)
from annotations.core.models import Study, StudyMembership, User
from annotations.core.services.bulk import rows_insert, rows_update
from estimators.assisted.simulation import (
    ArmBehaviour,
    AssistedDesign,
    SimulatedAssistedStudy,
    simulate_assisted,
)

DEMO_ASSISTED_STUDY = "Demo: assisted fact-checking (M2)"
# Components per simulated arm name (the sim's default arms and the demo's).
ARM_COMPONENTS = {
    "baseline": (),
    "evidence": ("search", "evidence"),
    "full_trace": ("search", "evidence", "reasoning", "judgments", "confidence"),
}
ARM_TITLES = {"baseline": "Baseline", "evidence": "Search + evidence",
              "full_trace": "Full trace"}
TOPICS = ["the Danube", "the Eiffel Tower", "penicillin", "the Hubble telescope",
          "Marie Curie", "the Great Barrier Reef", "the printing press", "Mount Kilimanjaro",
          "the Rosetta Stone", "photosynthesis", "the Suez Canal", "insulin"]


def demo_design(*, n_items: int = 160, raters_per_arm: int = 8,
                items_per_rater: int = 40, n_samples: int = 11) -> AssistedDesign:
    """The demo's planted behaviour: search + evidence helps a little when the AI is right
    and does not hurt when it is wrong; the full trace (with the AI's judgment) helps when
    the AI is right and misleads when it is wrong — the paper's over-reliance."""
    return AssistedDesign(
        arms=(ArmBehaviour("baseline", 0.74, 0.66, None, 95.0),
              ArmBehaviour("evidence", 0.80, 0.67, (0.2, 0.5, 0.3), 150.0),
              ArmBehaviour("full_trace", 0.92, 0.40, (0.1, 0.35, 0.55), 130.0)),
        n_items=n_items, n_samples=n_samples, raters_per_arm=raters_per_arm,
        items_per_rater=items_per_rater)


def _texts(i: int, rng: np.random.Generator) -> dict:
    topic = TOPICS[i % len(TOPICS)]
    year = int(rng.integers(1700, 2001))
    figure = int(rng.integers(2, 99))
    target = f"Records about {topic} list {figure} entries from {year}."
    return {"prompt": f"Write a short note about {topic}.",
            "response": f"{topic[0].upper()}{topic[1:]} is well documented. {target} "
                        f"Later sources add further detail.",
            "sentence": target, "figure": figure, "year": year}


def _trace(i: int, sample: int, verdict: str, text: dict) -> dict:
    """A trace that passes the format verifier: one search result whose snippet holds the
    quote verbatim, one evidence item citing it, one claim citing the evidence."""
    url = f"https://example.org/records/{i}/{sample}"
    quote = (f"the archive lists {text['figure']} entries for {text['year']}" if
             verdict == "Accurate" else
             f"the archive lists {text['figure'] + 3} entries for {text['year']}")
    return {
        "searches": [{"query": f"{text['sentence'][:60]} source",
                      "results": [{"title": f"Archive record {i}.{sample}", "url": url,
                                   "snippet": f"According to the record, {quote}; "
                                              "see the full catalogue."}]}],
        "evidence": [{"id": 1, "url": url, "title": f"Archive record {i}.{sample}",
                      "quote": quote}],
        "claims": [{"text": text["sentence"],
                    "reasoning": f"The record says {quote} [1].", "evidence_ids": [1],
                    "verdict": verdict}],
        "verdict": verdict,
        "reasoning": f"The claim is {'supported' if verdict == 'Accurate' else 'contradicted'} "
                     "by the archive record [1].",
    }


def _sentences_and_traces(sim: SimulatedAssistedStudy, rng: np.random.Generator
                          ) -> tuple[list[dict], list[dict]]:
    sentences, traces = [], []
    for i in range(sim.confidence.size):
        text = _texts(i, rng)
        ext = f"s{i:04d}"
        sentences.append({"id": ext, "prompt": text["prompt"], "response": text["response"],
                          "sentence": text["sentence"], "gold": str(sim.gold[i])})
        says = "Accurate" if sim.ai_label[i] == "accurate" else "Inaccurate"
        other = "Inaccurate" if says == "Accurate" else "Accurate"
        for j in range(int(sim.n_samples[i])):
            verdict = says if j < int(sim.n_agree[i]) else other
            traces.append({"sentence": ext, "sample": j, "trace": _trace(i, j, verdict, text)})
    return sentences, traces


def _jsonl(rows: list[dict]) -> io.StringIO:
    return io.StringIO("\n".join(json.dumps(r) for r in rows))


@dataclass(frozen=True)
class SeededAssisted:
    study: Study
    simulation: SimulatedAssistedStudy
    arms: dict[str, Arm]  # simulated arm name → arm
    raters: dict[int, User]  # simulated rater → user
    sentences: list[int]  # simulated item → sentence pk


def _raters(study: Study, sim: SimulatedAssistedStudy, arms: dict[str, Arm],
            prefix: str) -> dict[int, User]:
    from annotations.core.services.studies import membership_add

    users = {}
    for r in range(sim.rater_arm.size):
        user, created = User.objects.get_or_create(username=f"{prefix}-rater{r:03d}")
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        membership_add(study=study, user=user, role=StudyMembership.Role.ANNOTATOR)
        users[r] = user
    now = timezone.now()
    rows_insert(RaterAssignment, [
        {"study_id": study.pk, "user_id": users[r].pk, "arm_id": arms[str(a)].pk,
         "arm_version": arms[str(a)].version, "components": arms[str(a)].components,
         "sequence": r, "quiz_passed_at": now, "quiz_attempts": 1,
         "warning_seen_at": now if arms[str(a)].components else None, "assigned_at": now}
        for r, a in enumerate(sim.rater_arm)])
    study.assisted.raters_joined = len(users)
    study.assisted.save(update_fields=["raters_joined"])
    return users


def _panels(study: Study, sentence_ids: list[int], arms: dict[str, Arm]
            ) -> dict[tuple[int, int], tuple[str, list[int]]]:
    """(sentence pk, arm pk) → (SHA-256 of the panel the arm shows, trace ids shown)."""
    from annotations.assisted.services.exposure import panel_for
    from assistants.panels import panel_html, panel_sha256

    settings = study.assisted
    sentences = {s.pk: s for s in Sentence.objects.filter(pk__in=sentence_ids)}
    out = {}
    for arm in arms.values():
        for pk in sentence_ids:
            panel = panel_for(sentence=sentences[pk], components=arm.components,
                              settings=settings)
            out[(pk, arm.pk)] = (panel_sha256(panel_html(panel)),
                                 panel.trace_ids if panel is not None else [])
    return out


def _work(study: Study, sim: SimulatedAssistedStudy, arms: dict[str, Arm],
          raters: dict[int, User], sentences: list[int], rng: np.random.Generator,
          ratings: np.ndarray) -> int:
    """Write the simulated ratings ``ratings`` (indices into the simulation's ratings) as
    the rating service would: each takes a pending task of its sentence and arm."""
    from annotations.assisted.services.rating import RATING_KIND
    from annotations.core import engine

    pending: dict[tuple[int, int], list[int]] = {}
    for pk, s, a in (RatingTask.objects.filter(study=study, status=RatingTask.Status.PENDING)
                     .order_by("slot").values_list("pk", "sentence_id", "arm_id")):
        pending.setdefault((s, a), []).append(pk)
    panels = _panels(study, sorted({sentences[int(sim.item[j])] for j in ratings}), arms)
    now = timezone.now()
    answered, rating_rows, exposure_rows, skip_rows, events = [], [], [], [], []
    for j in ratings:
        sentence = sentences[int(sim.item[j])]
        arm = arms[str(sim.arm[j])]
        user = raters[int(sim.rater[j])]
        slots = pending.get((sentence, arm.pk))
        if not slots:
            continue
        seconds = float(sim.seconds[j])
        ms = int(min(seconds, 3 * 3600) * 1000)
        shown = now - dt.timedelta(milliseconds=ms)
        digest, trace_ids = panels[(sentence, arm.pk)]
        task = slots[0]
        exposure_rows.append({"task_id": task, "rater_id": user.pk, "arm_id": arm.pk,
                              "arm_version": arm.version, "components": arm.components,
                              "trace_ids": trace_ids, "panel_sha256": digest, "lease": 1,
                              "via": Exposure.Via.PAGE, "shown_at": shown})
        if sim.label[j] == "skip":
            skip_rows.append({"task_id": task, "sentence_id": sentence, "user_id": user.pk,
                              "arm_id": arm.pk, "time_on_task_ms": ms, "at": now})
            continue
        slots.pop(0)
        answered.append((task, RatingTask.Status.ANSWERED, user.pk, shown, shown, now, ms, 1))
        events.append((task, "answered", user, {"label": str(sim.label[j])}))
        help_ = sim.helpfulness[j]
        rating_rows.append({
            "task_id": task, "study_id": study.pk, "sentence_id": sentence, "arm_id": arm.pk,
            "arm_version": arm.version, "rater_id": user.pk, "label": str(sim.label[j]),
            "confidence": (None if sim.label[j] == Rating.Label.CANT_ASSESS
                           else int(sim.rater_confidence[j])),
            "helpfulness": None if math.isnan(help_) else int(help_), "comment": "",
            "time_on_task_ms": ms, "created_at": now})
    rows_insert(Exposure, exposure_rows)
    exposure_of = dict(Exposure.objects.filter(task_id__in=[r["task_id"] for r in exposure_rows])
                       .values_list("task_id", "pk"))
    for row in rating_rows + skip_rows:
        row["exposure_id"] = exposure_of.get(row["task_id"])
    rows_update(RatingTask, ["status", "answered_by_id", "issued_at", "rendered_at",
                             "answered_at", "time_on_task_ms", "times_issued"], answered)
    engine.task_events_bulk(RATING_KIND, events)
    rows_insert(Rating, rating_rows)
    rows_insert(RatingSkip, skip_rows)
    interactions = []
    for row in exposure_rows:  # assisted raters open a section 70 % of the time
        components = row["components"]
        if not components or rng.random() > 0.7:
            continue
        base = {"task_id": row["task_id"], "exposure_id": exposure_of[row["task_id"]],
                "rater_id": row["rater_id"], "at": now}
        interactions.append({**base, "kind": Interaction.Kind.EXPAND,
                             "section": components[-1], "target": ""})
        if "evidence" in components and rng.random() < 0.4:
            interactions.append({**base, "kind": Interaction.Kind.OPEN_LINK,
                                 "section": "evidence", "target": "evidence:1"})
    rows_insert(Interaction, interactions)
    return len(rating_rows)


def assisted_study_from_simulation(*, name: str, sim: SimulatedAssistedStudy, seed: int,
                                   spare_slots: int = 1, keep_pending: int = 0,
                                   routing: dict | None = None, prefix: str | None = None,
                                   ) -> SeededAssisted:
    """An open assisted study holding the simulation: arms named after the simulated ones
    (``ARM_COMPONENTS``), sentences with gold, N traces each, raters assigned to their
    simulated arm (quiz passed) and their ratings, skips and panel interactions. Each
    (sentence, arm) gets enough rating slots for the simulated ratings plus
    ``spare_slots``; the last ``keep_pending`` simulated ratings of each rater are not
    written (they stay for live raters, e.g. a browser test or the demo's visitors)."""
    from annotations.assisted.services.design import arm_save, assisted_study_create
    from annotations.assisted.services.imports import sentences_import, traces_import
    from annotations.assisted.services.routing import assisted_study_open

    d = sim.design
    if d.n_samples % 2 == 0:
        # k = N/2 agreeing samples is a tie: the platform's aggregation breaks it towards
        # Inaccurate, not as the simulation drew the AI's label
        raise ValueError(f"n_samples: {d.n_samples} is even; simulate an odd number of AI "
                         "samples so every sentence has a modal verdict")
    rng = np.random.default_rng(seed)
    arm_index = {name: j for j, name in enumerate(sim.arm_names)}
    per_slot = np.bincount(sim.item * len(d.arms) + np.array([arm_index[a] for a in sim.arm]),
                           minlength=d.n_items * len(d.arms))
    slots = int(per_slot.max()) + spare_slots
    with transaction.atomic():
        study = assisted_study_create(name=name, seed=seed, baseline=None,
                                      ratings_per_item=slots, n_samples=d.n_samples,
                                      **(routing or {}))
        arms = {}
        for position, behaviour in enumerate(d.arms):
            components = ARM_COMPONENTS.get(behaviour.name, ())
            arm = Arm(study=study, name=ARM_TITLES.get(behaviour.name, behaviour.name),
                      position=position,
                      description="No AI assistance." if not components else "",
                      **{f"show_{c}": True for c in components})
            arms[behaviour.name] = arm_save(arm=arm)
        sentences, traces = _sentences_and_traces(sim, rng)
        sentences_import(study=study, source=_jsonl(sentences), name="demo-sentences.jsonl",
                         fmt="jsonl")
        traces_import(study=study, source=_jsonl(traces), name="demo-traces.jsonl")
        assisted_study_open(study=study)
        study.refresh_from_db()
        ids = dict(Sentence.objects.filter(study=study).values_list("external_id", "pk"))
        sentence_pks = [ids[f"s{i:04d}"] for i in range(d.n_items)]
        raters = _raters(study, sim, arms, prefix or f"sim{study.pk}")
        keep = np.ones(sim.rater.size, dtype=bool)
        if keep_pending:
            keep &= sim.position < d.items_per_rater - keep_pending
        _work(study, sim, arms, raters, sentence_pks, rng, np.flatnonzero(keep))
    return SeededAssisted(study, sim, arms, raters, sentence_pks)


def assisted_demo_seed(*, seed: int = 20261124, design: AssistedDesign | None = None,
                       members: dict[str, list[User]] | None = None) -> tuple[Study, bool]:
    """Create the demo assisted study once (idempotent: an existing one is returned as is)
    and compute its analysis; ``members`` ({role: users}) join it every time (idempotent
    too). Returns (study, created)."""
    from annotations.assisted.services.analysis import assisted_recompute
    from annotations.core.services.studies import membership_add

    existing = Study.objects.filter(name=DEMO_ASSISTED_STUDY, created_by__isnull=True).first()
    for role, users in (members or {}).items():
        for user in users:
            if existing is not None:
                membership_add(study=existing, user=user, role=role)
    if existing is not None:
        return existing, False
    sim = simulate_assisted(design or demo_design(), seed=seed)
    # every sentence rated in every arm (full curves); the spare slot of each (sentence,
    # arm) is left for the demo's visitors
    seeded = assisted_study_from_simulation(name=DEMO_ASSISTED_STUDY, sim=sim, seed=seed,
                                            spare_slots=1, prefix="demo")
    study = seeded.study
    Study.objects.filter(pk=study.pk).update(
        description="Simulated raters in three arms (no assistance, search + evidence, the "
        "full AI trace) judge AI-written sentences; the AI rater's confidence is the share "
        "of its samples agreeing. Planted: the full trace misleads when the AI is wrong.")
    for role, users in (members or {}).items():
        for user in users:
            membership_add(study=study, user=user, role=role)
    assisted_recompute(study_id=study.pk)
    return study, True


def demo_raters_place(*, study: Study, blind: User, assisted: User) -> dict[User, Arm]:
    """The demo's two rater accounts in their arms (idempotent): ``blind`` in the arm that
    shows no AI panel, ``assisted`` in the arm that shows the most of the AI's trace, so a
    visitor can try both pages. Both join as annotators; their quiz is still to pass."""
    from annotations.assisted.services.design import arms_active
    from annotations.assisted.services.raters import rater_place
    from annotations.core.services.studies import membership_add

    arms = arms_active(study)
    wanted = {blind: next(arm for arm in arms if not arm.components),
              assisted: max(arms, key=lambda arm: len(arm.components))}
    placed = {}
    for user, arm in wanted.items():
        membership_add(study=study, user=user, role=StudyMembership.Role.ANNOTATOR)
        placed[user] = rater_place(study=study, user=user, arm=arm).arm
    return placed
