"""What critique studies plug into the core (called from the app's ``ready``): their task
kind (registered by ``services.assignment`` on import), their recompute and their opening.
Their dashboard has its own address (``critique-dashboard``)."""

from __future__ import annotations

from annotations.core.models import Study
from annotations.core.services.recompute import recompute_kind_register
from annotations.core.services.studies import study_opener_register
from annotations.critique.services import assignment  # noqa: F401 - the tasks' kind
from annotations.critique.services.analysis import answered_counts, critique_recompute
from annotations.critique.services.studies import critique_study_open


def register() -> None:
    recompute_kind_register(Study.Kind.CRITIQUE, critique_recompute, answered=answered_counts)
    study_opener_register(Study.Kind.CRITIQUE, critique_study_open)
