"""What critique studies plug into the core (called from the app's ``ready``): their task
kind (registered by ``services.assignment`` on import), their recompute, their opening,
their dashboard (also at its own address, ``critique-dashboard``) and the roles their
Members page offers, and what a flag names (the question of a task)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy

from annotations.core.exports import export_register, figures_register
from annotations.core.models import ImportJob, Study, StudyMembership
from annotations.core.recruitment.services import annotator_join, participant_join_register
from annotations.core.reviews.registry import Reviewable, reviewable_register
from annotations.core.services.eval_logs import eval_log_writer_register
from annotations.core.services.flags import Flaggable, flaggable_register
from annotations.core.services.import_jobs import import_kind_register
from annotations.core.services.notices import interval_widths_register
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
from annotations.critique import reviews, views, workers
from annotations.critique.dashboard import FIGURES, interval_widths
from annotations.critique.models import CritiqueOutput, CritiqueQuestion
from annotations.critique.services import assignment  # the tasks' kind
from annotations.critique.services.ai_outputs import critique_ai_outputs_import
from annotations.critique.services.analysis import answered_counts, critique_recompute
from annotations.critique.services.eval_logs import critique_eval_log_import
from annotations.critique.services.exports import EXPORTS
from annotations.critique.services.questions import critique_questions_import
from annotations.critique.services.studies import critique_study_create, critique_study_open


def register() -> None:
    participant_join_register(Study.Kind.CRITIQUE, annotator_join, "critique-work")
    interval_widths_register(Study.Kind.CRITIQUE, interval_widths)
    import_kind_register(ImportJob.Kind.QUESTIONS, critique_questions_import)
    import_kind_register(ImportJob.Kind.AI_OUTPUTS, critique_ai_outputs_import)
    study_creator_register(Study.Kind.CRITIQUE, critique_study_create, frozenset({
        "description", "guidelines", "seed", "top_level", "counts", "mode",
        "time_limit_minutes"}))
    eval_log_writer_register(Study.Kind.CRITIQUE, critique_eval_log_import)
    recompute_kind_register(Study.Kind.CRITIQUE, critique_recompute, answered=answered_counts)
    study_opener_register(Study.Kind.CRITIQUE, critique_study_open, made=("task", "made"))
    figures_register(Study.Kind.CRITIQUE, FIGURES)
    dashboard_register(Study.Kind.CRITIQUE, views.critique_dashboard_page)
    for what, title in (("outputs", "Outputs: every response and critique"),
                        ("tasks", "Tasks and their timing"),
                        ("metrics", "Metrics of the latest analysis")):
        export_register(Study.Kind.CRITIQUE, what, title, *EXPORTS[what],
                        answers=("output_id", CritiqueOutput) if what == "outputs" else None)
    study_page_register(
        Study.Kind.CRITIQUE, "admin:annotations_critiquesettings_change",
        add=("Add critique study", "admin:annotations_critiquesettings_add"),
        imports=[("Import questions", "admin:annotations_critiquesettings_import_questions"),
                 ("Import AI outputs", "admin:annotations_critiquesettings_import_outputs")])
    study_roles_register(Study.Kind.CRITIQUE,
                         (StudyMembership.Role.ANNOTATOR, "Annotator (answers and critiques)"))
    study_home_register(Study.Kind.CRITIQUE, "critique/_home_links.html")
    # questions are never rewritten (imports refuse it): a broken one is withdrawn
    flaggable_register(Study.Kind.CRITIQUE, Flaggable(
        task_kind=assignment.CRITIQUE_KIND, item_model=CritiqueQuestion,
        noun=gettext_lazy("question"),
        text=lambda q: q.text))
    reviewable_register(Study.Kind.CRITIQUE, Reviewable(
        answer_model=CritiqueOutput, noun="output", answers=reviews.answers, views=reviews.views,
        items=reviews.items, item_answer_ids=reviews.item_answer_ids,
        disagreements=reviews.disagreements, worker_field="author", at_field="created_at",
        ms_field="time_ms",
        worker_answers=workers.worker_answers))
