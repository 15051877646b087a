"""REST API for raters of assisted studies: tutorial and quiz, next task (with the AI panel
of their arm, and nothing outside it), answer, heartbeat, skip, interaction events.
Validate → call a service → serialise (annotations/partitioned/api.py patterns)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.assisted.models import Exposure, Rating, RatingTask
from annotations.assisted.services.design import settings_of, tutorial_of
from annotations.assisted.services.exposure import interaction_record, task_show
from annotations.assisted.services.raters import (
    quiz_for_rater,
    quiz_submit,
    rater_for_work,
    rater_join,
    rater_membership,
)
from annotations.assisted.services.rating import (
    RatingInput,
    rating_heartbeat,
    rating_lease_next,
    rating_skip,
    rating_submit,
    rating_undo,
)
from annotations.core.api import answered, leased, skip_api, undo_api
from annotations.core.errors import NotPermitted
from annotations.core.models import Study


def _rater_study(request, study_id: int) -> Study:
    study = get_object_or_404(Study, pk=study_id)
    if study.kind != Study.Kind.ASSISTED or rater_membership(study=study,
                                                             user=request.user) is None:
        raise NotPermitted(f"You are not a rater in study {study.pk}.")
    return study


class QuizQuestionSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    question = serializers.CharField()
    options = serializers.ListField(child=serializers.CharField())


class TutorialOutputSerializer(serializers.Serializer):
    tutorial = serializers.CharField(help_text="Markdown.")
    quiz = QuizQuestionSerializer(many=True)
    quiz_passed = serializers.BooleanField()
    assisted = serializers.BooleanField(help_text="Your arm shows AI assistance (read its "
                                                  "warning on the rating page).")


class QuizInputSerializer(serializers.Serializer):
    answers = serializers.ListField(child=serializers.IntegerField(allow_null=True),
                                    help_text="0-based option per question, in order.")


class QuizFeedbackSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    correct = serializers.BooleanField()
    explain = serializers.CharField(allow_blank=True)


class QuizOutputSerializer(serializers.Serializer):
    passed = serializers.BooleanField()
    feedback = QuizFeedbackSerializer(many=True)


class SentenceOutputSerializer(serializers.Serializer):
    prompt = serializers.CharField()
    response = serializers.CharField()
    target = serializers.CharField(help_text="The sentence of the response to rate.")


class RatingTaskOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The task's public id.")
    lease_expires_at = serializers.DateTimeField()
    issued_at = serializers.DateTimeField()
    sentence = SentenceOutputSerializer()
    panel = serializers.JSONField(
        required=False,
        help_text="Only in assisted arms: {components, traces: [...], confidence?} with only "
                  "the fields of your arm's components (absent keys are not shown to you).")


class RatingInputSerializer(serializers.Serializer):
    label = serializers.ChoiceField(choices=Rating.Label.choices)
    confidence = serializers.ChoiceField(
        choices=Rating.Confidence.choices, required=False, allow_null=True,
        help_text="Required unless label is cant_assess (then not asked, stored as null).")
    helpfulness = serializers.ChoiceField(choices=Rating.Helpfulness.choices, required=False,
                                          allow_null=True,
                                          help_text="Required in assisted arms only.")
    comment = serializers.CharField(required=False, allow_blank=True, max_length=5000,
                                    help_text="Optional, in every arm.")


class RatingOutputSerializer(serializers.Serializer):
    task = serializers.CharField(source="task.public_id")
    label = serializers.CharField()
    confidence = serializers.IntegerField(allow_null=True)
    helpfulness = serializers.IntegerField(allow_null=True)
    comment = serializers.CharField()
    time_on_task_ms = serializers.IntegerField(allow_null=True)


class LeaseOutputSerializer(serializers.Serializer):
    id = serializers.CharField(source="public_id")
    lease_expires_at = serializers.DateTimeField()


class InteractionInputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["expand", "collapse", "open_link"])
    section = serializers.CharField(max_length=40)
    target = serializers.CharField(required=False, allow_blank=True, max_length=300)
    trace = serializers.IntegerField(required=False, allow_null=True, min_value=0)
    client_ms = serializers.IntegerField(required=False, allow_null=True, min_value=0)


def task_payload(task: RatingTask, user, assignment=None) -> dict:
    """The task as the API sends it; ``panel`` only for assisted arms (exposure stored)."""
    shown = task_show(task=task, user=user, via=Exposure.Via.API, assignment=assignment)
    view = shown.sentence
    data = {"id": view.id, "lease_expires_at": view.lease_expires_at,
            "issued_at": view.issued_at,
            "sentence": {"prompt": view.prompt, "response": view.response,
                         "target": view.target}}
    if shown.data is not None:
        data["panel"] = shown.data
    return data


class TutorialApi(APIView):
    @extend_schema(responses=TutorialOutputSerializer,
                   summary="Tutorial and comprehension quiz (joins you to an arm)")
    def get(self, request, study_id: int):
        study = _rater_study(request, study_id)
        assignment = rater_join(study=study, user=request.user)
        settings = settings_of(study)
        return Response(TutorialOutputSerializer({
            "tutorial": tutorial_of(settings), "quiz": quiz_for_rater(settings),
            "quiz_passed": assignment.quiz_passed_at is not None,
            "assisted": bool(assignment.components)}).data)


class QuizApi(APIView):
    @extend_schema(request=QuizInputSerializer, responses=QuizOutputSerializer,
                   summary="Answer the quiz (every answer right passes; needed before the "
                           "first task)")
    def post(self, request, study_id: int):
        study = _rater_study(request, study_id)
        data = QuizInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        passed, feedback = quiz_submit(study=study, user=request.user,
                                       answers=data.validated_data["answers"])
        return Response(QuizOutputSerializer({"passed": passed, "feedback": feedback}).data)


class RatingNextApi(APIView):
    @extend_schema(request=None, responses={200: RatingTaskOutputSerializer,
                                            204: OpenApiResponse(description="Nothing left"),
                                            409: OpenApiResponse(
                                                description="tutorial_required")},
                   summary="Lease your next sentence (resumes your current lease)")
    def post(self, request, study_id: int):
        # the common case in one read (assignment, arm, study, settings, membership)
        assignment = rater_for_work(study_id=study_id, user=request.user)
        study = assignment.study if assignment is not None else _rater_study(request, study_id)
        task = rating_lease_next(study=study, user=request.user, assignment=assignment,
                                 rendered=True)
        return leased(task and RatingTaskOutputSerializer(
            task_payload(task, request.user, assignment)).data)


class RatingAnswerApi(APIView):
    @extend_schema(request=RatingInputSerializer, responses=RatingOutputSerializer,
                   summary="Rate a sentence you hold (idempotent; 409 answered_too_soon "
                           "within OVERSIGHT_MIN_ANSWER_MS of receiving it)")
    def post(self, request, task_id: str):
        data = RatingInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        result = rating_submit(user=request.user, public_id=task_id, data=RatingInput(
            label=v["label"], confidence=v.get("confidence"), helpfulness=v.get("helpfulness"),
            comment=v.get("comment", "")))
        return answered(RatingOutputSerializer(result.rating).data, result.created)


class RatingHeartbeatApi(APIView):
    @extend_schema(request=None, responses=LeaseOutputSerializer,
                   summary="Extend your lease while you work")
    def post(self, request, task_id: str):
        task = rating_heartbeat(user=request.user, public_id=task_id)
        return Response(LeaseOutputSerializer(task).data)


def _undo(request, study_id: int) -> dict:
    task = rating_undo(study=_rater_study(request, study_id), user=request.user)
    return RatingTaskOutputSerializer(task_payload(task, request.user)).data


RatingUndoApi = undo_api(
    "RatingUndoApi", _undo, response=RatingTaskOutputSerializer,
    summary="Take back your last rating within OVERSIGHT_UNDO_SECONDS (30 s) of giving it; you "
    "get its sentence back under a fresh lease (409 undo_refused otherwise)")


RatingSkipApi = skip_api("RatingSkipApi", rating_skip, summary="Hand a sentence back to your "
                         "arm's pool (never offered to you again)")


class RatingEventApi(APIView):
    @extend_schema(request=InteractionInputSerializer,
                   responses={204: OpenApiResponse(description="Recorded")},
                   summary="Record what you did with the AI panel: a section expanded or "
                           "collapsed, a link opened (server time)")
    def post(self, request, task_id: str):
        data = InteractionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        interaction_record(user=request.user, public_id=task_id, kind=v["kind"],
                           section=v["section"], target=v.get("target") or "",
                           trace=v.get("trace"), client_ms=v.get("client_ms"))
        return Response(status=status.HTTP_204_NO_CONTENT)
