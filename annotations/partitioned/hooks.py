"""What partitioned studies plug into the core (called from the app's ``ready``): their
task kind (queries, registered by ``services.routing`` on import), their recompute, their
opening, their dashboard, the two import-job kinds they own (items, AI predictions) and the
roles their Members page offers, and what a flag names (the item a query asks about)."""

from __future__ import annotations

from django.urls import reverse
from django.utils.translation import gettext_lazy

from annotations.core.exports import export_register, figures_register
from annotations.core.models import ImportJob, Item, Study, StudyMembership
from annotations.core.recruitment.services import participant_join_register
from annotations.core.reviews.registry import Reviewable, reviewable_register
from annotations.core.services.eval_logs import eval_log_writer_register
from annotations.core.services.flags import Flaggable, flaggable_register
from annotations.core.services.import_jobs import import_kind_register
from annotations.core.services.notices import interval_widths_register
from annotations.core.services.recompute import recompute_kind_register
from annotations.core.services.studies import (
    study_create,
    study_creator_register,
    study_opener_register,
    study_roles_register,
)
from annotations.core.views import (
    dashboard_register,
    study_home_register,
    study_page_register,
)
from annotations.partitioned import reviews, views, workers
from annotations.partitioned.dashboard import FIGURES, interval_widths
from annotations.partitioned.models import Query
from annotations.partitioned.selectors import studies_with_unfolded_changes
from annotations.partitioned.services import routing  # the queries' task kind
from annotations.partitioned.services.estimates import answered_counts, study_recompute
from annotations.partitioned.services.eval_logs import partitioned_eval_log_import
from annotations.partitioned.services.exports import EXPORT_FIELDS, label_rows
from annotations.partitioned.services.imports import items_import
from annotations.partitioned.services.predictions import predictions_import
from annotations.partitioned.services.studies import (
    partitioned_study_open,
    specialist_participant_join,
)


def register() -> None:
    participant_join_register(Study.Kind.PARTITIONED, specialist_participant_join, "label")
    interval_widths_register(Study.Kind.PARTITIONED, interval_widths)
    study_creator_register(Study.Kind.PARTITIONED, study_create, frozenset({
        "classes", "description", "queries_per_item", "lease_minutes", "shuffle_options",
        "gold_rate", "seed", "interval_method"}))
    eval_log_writer_register(Study.Kind.PARTITIONED, partitioned_eval_log_import)
    recompute_kind_register(Study.Kind.PARTITIONED, study_recompute, answered=answered_counts,
                            behind=studies_with_unfolded_changes)
    study_opener_register(Study.Kind.PARTITIONED, partitioned_study_open)
    figures_register(Study.Kind.PARTITIONED, FIGURES)
    dashboard_register(Study.Kind.PARTITIONED, views.dashboard_page)
    import_kind_register(ImportJob.Kind.ITEMS, items_import)
    import_kind_register(ImportJob.Kind.PREDICTIONS, predictions_import)
    export_register(Study.Kind.PARTITIONED, "labels",
                    "Labels: every answered query with its routing", label_rows, EXPORT_FIELDS,
                    answers=("query_id", Query))
    study_page_register(
        Study.Kind.PARTITIONED, "admin:annotations_study_change",
        add=("Add partitioned study", "admin:annotations_study_add"),
        imports=[("Import items", "admin:annotations_study_import_items"),
                 ("Import AI predictions", "admin:annotations_study_import_predictions")])
    study_roles_register(Study.Kind.PARTITIONED, (StudyMembership.Role.SPECIALIST,
                                                  "Specialist (answers one class's question)"))
    study_home_register(Study.Kind.PARTITIONED, "annotations/_home_links.html")
    flaggable_register(Study.Kind.PARTITIONED, Flaggable(
        task_kind=routing.QUERY_KIND, item_model=Item, noun=gettext_lazy("item"),
        text=lambda i: i.text,
        edit_url=lambda i: reverse("admin:annotations_item_change", args=[i.pk])))
    reviewable_register(Study.Kind.PARTITIONED, Reviewable(
        answer_model=Query, noun="label", answers=reviews.answers, views=reviews.views,
        items=reviews.items, item_answer_ids=reviews.item_answer_ids,
        disagreements=reviews.disagreements, worker_field="answered_by", at_field="answered_at",
        ms_field="time_on_task_ms",
        worker_answers=workers.worker_answers))
