"""What assisted studies plug into the core (called from the app's ``ready``): their task
kind (rating tasks, registered by ``services.rating`` on import), their analysis (recomputed
after each rating), their opening, their dashboard and the roles their Members page
offers."""

from __future__ import annotations

from annotations.assisted import views
from annotations.assisted.dashboard import FIGURES
from annotations.assisted.services import rating  # noqa: F401 - the rating tasks' kind
from annotations.assisted.services.analysis import (
    answered_counts,
    assisted_recompute,
    connect_signals,
)
from annotations.assisted.services.exports import ratings_export
from annotations.assisted.services.routing import assisted_study_open
from annotations.core.exports import export_register, figures_register
from annotations.core.models import Study, StudyMembership
from annotations.core.services.recompute import recompute_kind_register
from annotations.core.services.studies import study_opener_register, study_roles_register
from annotations.core.views import dashboard_register, study_page_register


def register() -> None:
    connect_signals()  # the analysis recomputes after each rating
    recompute_kind_register(Study.Kind.ASSISTED, assisted_recompute, answered=answered_counts)
    study_opener_register(Study.Kind.ASSISTED, assisted_study_open)
    figures_register(Study.Kind.ASSISTED, FIGURES)
    dashboard_register(Study.Kind.ASSISTED, views.assisted_dashboard_page)
    export_register(Study.Kind.ASSISTED, "ratings", "Ratings with comments, what each rater "
                    "was shown and what they opened", ratings_export)
    study_page_register(Study.Kind.ASSISTED, "admin:annotations_assistedstudy_change")
    study_roles_register(Study.Kind.ASSISTED,
                         (StudyMembership.Role.ANNOTATOR, "Rater (rates sentences)"))
