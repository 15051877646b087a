"""The annotations app's models, gathered where Django looks for them (``<app>.models``):
the core's (studies, classes, members, items, snapshots, import jobs, events; the task
engine's abstract columns) and each study type's (``annotations/<type>/models.py``). Code
of the app imports from those modules; this one is for Django, migrations and tests."""

from annotations.assisted.models import (
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
from annotations.audit.models import (
    Audit,
    AuditFile,
    AuditOutcome,
    Criterion,
    Rubric,
    VerifierQuestion,
    VerifierQuestionEvent,
)
from annotations.core.events import StudyEvent, study_event_kind_register
from annotations.core.exclusion_models import ExcludedAnswer, Exclusion
from annotations.core.models import (
    AnswerReview,
    EstimateSnapshot,
    ImportJob,
    ImportJobFile,
    Item,
    ItemFlag,
    RecomputeState,
    Study,
    StudyClass,
    StudyMembership,
    User,
    _new_seed,
)
from annotations.core.recruitment_models import (
    Participant,
    Payment,
    PaymentBatch,
    RecruitmentLink,
)
from annotations.core.task_models import LeasedTask, TaskEvent, new_public_id
from annotations.critique.models import *  # noqa: F403 - critique studies (issue 10)
from annotations.evaluation.models import (
    EvaluationCall,
    EvaluationSettings,
    EvaluationToken,
)
from annotations.partitioned.models import (
    Query,
    QueryEvent,
    QuerySkip,
    RoutingDesign,
    TallyEntry,
    TallyGroup,
    TallyItem,
    TallyState,
)
from annotations.webhooks.models import Webhook, WebhookDelivery

__all__ = [
    "EvaluationCall", "EvaluationSettings", "EvaluationToken",
    "Audit", "AuditFile", "AuditOutcome", "Criterion", "Rubric", "VerifierQuestion",
    "VerifierQuestionEvent",
    "Arm", "AssistedSettings", "AssistedStudy", "Component", "Exposure", "Interaction",
    "QuizAttempt", "RaterAssignment", "Rating", "RatingSkip", "RatingTask", "RatingTaskEvent",
    "RoutingChange", "Sentence",
    "AnswerReview", "EstimateSnapshot", "ImportJob", "ImportJobFile", "Item", "ItemFlag",
    "LeasedTask", "Query",
    "QueryEvent", "QuerySkip", "RoutingDesign", "TallyEntry", "TallyGroup", "TallyItem",
    "TallyState",
    "ExcludedAnswer", "Exclusion", "Participant", "Payment", "PaymentBatch", "RecruitmentLink",
    "RecomputeState", "Study", "StudyClass", "StudyEvent", "StudyMembership", "TaskEvent",
    "User", "_new_seed", "new_public_id", "study_event_kind_register",
    "Webhook", "WebhookDelivery",
]
