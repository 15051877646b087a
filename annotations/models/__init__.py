"""The annotations app's models, one module per study type (``core``: studies, members,
items and the partitioned queries; the task engine's abstract columns are in
``annotations.task_models``)."""

from annotations.models.assisted import (
    Arm,
    AssistedSettings,
    AssistedStudy,
    Component,
    Exposure,
    Interaction,
    QuizAttempt,
    RaterAssignment,
    Rating,
    RatingSkip,
    RatingTask,
    RatingTaskEvent,
    RoutingChange,
    Sentence,
)
from annotations.models.core import (
    EstimateSnapshot,
    ImportJob,
    ImportJobFile,
    Item,
    Query,
    QueryEvent,
    QuerySkip,
    RecomputeState,
    Study,
    StudyClass,
    StudyMembership,
    User,
    _new_seed,
)
from annotations.models.critique import *  # noqa: F403 - critique studies (issue 10)
from annotations.models.events import StudyEvent, study_event_kind_register
from annotations.task_models import LeasedTask, TaskEvent, new_public_id

__all__ = [
    "Arm", "AssistedSettings", "AssistedStudy", "Component", "Exposure", "Interaction",
    "QuizAttempt", "RaterAssignment", "Rating", "RatingSkip", "RatingTask", "RatingTaskEvent",
    "RoutingChange", "Sentence",
    "EstimateSnapshot", "ImportJob", "ImportJobFile", "Item", "LeasedTask", "Query",
    "QueryEvent", "QuerySkip",
    "RecomputeState", "Study", "StudyClass", "StudyEvent", "StudyMembership", "TaskEvent",
    "User", "_new_seed", "new_public_id", "study_event_kind_register",
]
