"""What assisted studies plug into the core (called from the app's ``ready``): their task
kind (rating tasks, registered by ``services.rating`` on import), their analysis (recomputed
after each rating), their opening, their dashboard and the roles their Members page
offers, and what a flag names (the sentence a rater rates)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy

from annotations.assisted import reviews, views, workers
from annotations.assisted.dashboard import FIGURES
from annotations.assisted.models import Rating, Sentence
from annotations.assisted.services import rating  # the rating tasks' kind
from annotations.assisted.services.analysis import (
    answered_counts,
    assisted_recompute,
    connect_signals,
)
from annotations.assisted.services.design import assisted_study_create_with_arms
from annotations.assisted.services.eval_logs import assisted_eval_log_import
from annotations.assisted.services.exports import RATING_FIELDS, rating_rows
from annotations.assisted.services.imports import sentences_import, traces_import
from annotations.assisted.services.routing import assisted_study_open
from annotations.core.exports import export_register, figures_register
from annotations.core.models import ImportJob, Study, StudyMembership
from annotations.core.recruitment.services import annotator_join, participant_join_register
from annotations.core.reviews.registry import Reviewable, reviewable_register
from annotations.core.services.eval_logs import eval_log_writer_register
from annotations.core.services.flags import Flaggable, flaggable_register
from annotations.core.services.import_jobs import import_kind_register
from annotations.core.services.recompute import recompute_kind_register
from annotations.core.services.studies import (
    study_creator_register,
    study_opener_register,
    study_roles_register,
)
from annotations.core.views import (
    dashboard_register,
    study_home_register,
    study_page_register,
)


def register() -> None:
    participant_join_register(Study.Kind.ASSISTED, annotator_join, "rate")
    import_kind_register(ImportJob.Kind.SENTENCES, sentences_import)
    import_kind_register(ImportJob.Kind.TRACES, traces_import)
    study_creator_register(Study.Kind.ASSISTED, assisted_study_create_with_arms, frozenset({
        "description", "seed", "lease_minutes", "ratings_per_item", "item_order", "routing",
        "arms"}))
    eval_log_writer_register(Study.Kind.ASSISTED, assisted_eval_log_import)
    connect_signals()  # the analysis recomputes after each rating
    recompute_kind_register(Study.Kind.ASSISTED, assisted_recompute, answered=answered_counts)
    study_opener_register(Study.Kind.ASSISTED, assisted_study_open, made=("sentence", "routed"))
    figures_register(Study.Kind.ASSISTED, FIGURES)
    dashboard_register(Study.Kind.ASSISTED, views.assisted_dashboard_page)
    export_register(Study.Kind.ASSISTED, "ratings", "Ratings with comments, what each rater "
                    "was shown and what they opened", rating_rows, RATING_FIELDS,
                    answers=("rating_id", Rating))
    study_page_register(
        Study.Kind.ASSISTED, "admin:annotations_assistedstudy_change",
        add=("Add assisted study", "admin:annotations_assistedstudy_add"),
        imports=[("Import sentences", "admin:annotations_assistedstudy_import_sentences"),
                 ("Import AI traces", "admin:annotations_assistedstudy_import_traces")])
    study_roles_register(Study.Kind.ASSISTED,
                         (StudyMembership.Role.ANNOTATOR, "Rater (rates sentences)"))
    study_home_register(Study.Kind.ASSISTED, "assisted/_home_links.html")
    # sentences are never rewritten (imports refuse it): a broken one is withdrawn
    flaggable_register(Study.Kind.ASSISTED, Flaggable(
        task_kind=rating.RATING_KIND, item_model=Sentence, noun=gettext_lazy("sentence"),
        text=lambda s: s.target))
    reviewable_register(Study.Kind.ASSISTED, Reviewable(
        answer_model=Rating, noun="rating", answers=reviews.answers, views=reviews.views,
        items=reviews.items, item_answer_ids=reviews.item_answer_ids,
        disagreements=reviews.disagreements, worker_field="rater", at_field="created_at",
        ms_field="time_on_task_ms",
        worker_answers=workers.worker_answers))
