"""REST API of critique studies for annotators (clients such as the benchmark): lease the
next task, answer it. Validate → call a service → serialise; errors are the domain errors
(``api_errors``: JSON with a ``code``)."""

from __future__ import annotations

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from annotations.core.api import answered, leased, skip_api, undo_api
from annotations.core.models import Study
from annotations.critique.services.answers import (
    CritiqueAnswer,
    critique_answer,
    critique_undo,
)
from annotations.critique.services.assignment import (
    annotator_settings_by_id,
    critique_task_next,
    critique_task_skip,
    task_mark_rendered,
)
from annotations.critique.services.task_view import task_view


class CritiqueShownOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    level = serializers.IntegerField()
    text = serializers.CharField()
    final = serializers.CharField()
    final_text = serializers.CharField()
    saw = serializers.ListField(child=serializers.CharField(), allow_null=True)
    judged = serializers.CharField()


class CritiqueChainLevelSerializer(serializers.Serializer):
    name = serializers.CharField()
    outputs = CritiqueShownOutputSerializer(many=True)


class CritiqueTaskOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    level = serializers.IntegerField()
    level_name = serializers.CharField()
    question = serializers.CharField()
    options = serializers.ListField(child=serializers.ListField(child=serializers.CharField()))
    first = CritiqueShownOutputSerializer(allow_null=True)
    second = CritiqueShownOutputSerializer(allow_null=True)
    chain = CritiqueChainLevelSerializer(many=True)
    lease_expires_at = serializers.DateTimeField()
    time_limit_minutes = serializers.IntegerField()


class CritiqueAnswerInputSerializer(serializers.Serializer):
    reasoning = serializers.CharField(max_length=20_000, allow_blank=True)
    final = serializers.IntegerField(min_value=0, help_text="0-based option index")
    confidence = serializers.IntegerField(min_value=1, max_value=5)
    choice = serializers.ChoiceField(choices=["first", "second", "neither"], required=False,
                                     allow_blank=True, default="",
                                     help_text="critiques: the better input, in shown order")


class CritiqueAnswerOutputSerializer(serializers.Serializer):
    task = serializers.CharField()
    level = serializers.IntegerField()
    final = serializers.IntegerField()
    choice = serializers.CharField()
    confidence = serializers.IntegerField()
    time_on_task_ms = serializers.IntegerField(allow_null=True)


def _task_data(task, time_limit_minutes: int | None = None) -> dict:
    view = task_view(task, time_limit_minutes=time_limit_minutes)
    data = asdict(view)
    data["chain"] = [{"name": name, "outputs": outputs} for name, outputs in data["chain"]]
    return CritiqueTaskOutputSerializer(data).data


class CritiqueTaskNextApi(APIView):
    @extend_schema(request=None, responses={200: CritiqueTaskOutputSerializer,
                                            204: OpenApiResponse(description="No task for you")},
                   summary="Lease your next critique task (resumes your current lease)")
    def post(self, request, study_id: int):
        # the common case in one read: the settings, the study and the membership check
        settings = annotator_settings_by_id(study_id, request.user)
        study = settings.study if settings else get_object_or_404(Study, pk=study_id)
        task = critique_task_next(study=study, user=request.user, settings=settings,
                                  rendered=True)  # a new lease: stamped shown as it is leased
        if task is not None:
            task_mark_rendered(task=task)  # a resumed lease first rendered elsewhere
        return leased(task and _task_data(task, settings.time_limit_minutes if settings else None))


class CritiqueTaskAnswerApi(APIView):
    @extend_schema(request=CritiqueAnswerInputSerializer,
                   responses={201: CritiqueAnswerOutputSerializer,
                              200: CritiqueAnswerOutputSerializer},
                   summary="Answer the critique task you hold (idempotent: the same answer "
                           "again is 200; 409 when the lease ended)")
    def post(self, request, task_id: str):
        data = CritiqueAnswerInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        output = critique_answer(public_id=task_id, user=request.user,
                                 answer=CritiqueAnswer(**data.validated_data))
        return answered(CritiqueAnswerOutputSerializer({
            "task": task_id, "level": output.level, "final": output.final,
            "choice": output.choice, "confidence": output.confidence,
            "time_on_task_ms": output.time_ms}).data, created=not output.repeated)


def _undo(request, study_id: int) -> dict:
    settings = annotator_settings_by_id(study_id, request.user)
    study = settings.study if settings else get_object_or_404(Study, pk=study_id)
    task = critique_undo(study=study, user=request.user)
    task_mark_rendered(task=task)
    return _task_data(task, settings.time_limit_minutes if settings else None)


CritiqueUndoApi = undo_api(
    "CritiqueUndoApi", _undo, response=CritiqueTaskOutputSerializer,
    summary="Take back your last answer within OVERSIGHT_UNDO_SECONDS (30 s) of giving it, "
    "while nobody critiques it yet; you get its task back under a fresh time limit (409 "
    "undo_refused otherwise)")


CritiqueTaskSkipApi = skip_api("CritiqueTaskSkipApi", critique_task_skip,
                               summary="Hand the critique task you hold back to the pool "
                                       "(never offered to you again)")
