"""REST API: one view per operation. Validate → call a service or selector → serialise."""

from __future__ import annotations

import io
import json

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import selectors
from annotations.errors import NotPermitted
from annotations.models import Study, StudyMembership
from annotations.serializers import (
    AnswerInputSerializer,
    AnswerOutputSerializer,
    ImportOutputSerializer,
    ItemInputSerializer,
    ItemOutputSerializer,
    PredictionImportOutputSerializer,
    PredictionInputSerializer,
    PredictionOutputSerializer,
    QueryOutputSerializer,
    SnapshotOutputSerializer,
    StudyOutputSerializer,
)
from annotations.services.imports import items_import
from annotations.services.labels import label_submit, label_undo
from annotations.services.routing import (
    query_heartbeat,
    query_lease_next,
    query_mark_rendered,
    query_skip,
)

Role = StudyMembership.Role


def _study_for(request, study_id: int, *roles: str) -> Study:
    study = get_object_or_404(Study, pk=study_id)
    if not selectors.user_roles(user=request.user, study=study) & set(roles):
        raise NotPermitted(f"This needs the role {' or '.join(roles)} in study {study.pk}.")
    return study


def _paginated(request, view, queryset, serializer_cls) -> Response:
    paginator = LimitOffsetPagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_cls(page, many=True).data)


def _jsonl(records: list[dict]) -> io.StringIO:
    return io.StringIO("\n".join(json.dumps(r) for r in records))


def _import(request, study_id: int, serializer_cls, service, output_cls) -> Response:
    """POST a JSON list of records → the same atomic import service as files use."""
    study = _study_for(request, study_id, Role.RESEARCHER)
    data = serializer_cls(data=request.data, many=True)
    data.is_valid(raise_exception=True)
    result = service(study=study, source=_jsonl(data.validated_data), name="request",
                     fmt="jsonl", update=request.query_params.get("update") == "true")
    return Response(output_cls(result).data, status=status.HTTP_201_CREATED)


class StudyListApi(APIView):
    @extend_schema(responses=StudyOutputSerializer(many=True), summary="Studies you belong to")
    def get(self, request):
        rows = selectors.studies_for_user(user=request.user)
        studies = [s for s, _, _ in rows]
        roles = {s.pk: r for s, r, _ in rows}
        return Response(StudyOutputSerializer(studies, many=True,
                                              context={"roles": roles}).data)


class StudyDetailApi(APIView):
    @extend_schema(responses=StudyOutputSerializer, summary="One study")
    def get(self, request, study_id: int):
        study = _study_for(request, study_id, *Role.values)
        roles = {study.pk: selectors.user_roles(user=request.user, study=study)}
        return Response(StudyOutputSerializer(study, context={"roles": roles}).data)


class ItemListApi(APIView):
    @extend_schema(responses=ItemOutputSerializer(many=True),
                   summary="Items of a study (researchers; includes hidden gold)")
    def get(self, request, study_id: int):
        study = _study_for(request, study_id, Role.RESEARCHER)
        return _paginated(request, self, selectors.study_items(study=study), ItemOutputSerializer)

    @extend_schema(request=ItemInputSerializer(many=True), responses=ImportOutputSerializer,
                   summary="Add items (atomic: all or nothing)")
    def post(self, request, study_id: int):
        return _import(request, study_id, ItemInputSerializer, items_import,
                       ImportOutputSerializer)


class PredictionListApi(APIView):
    @extend_schema(responses=PredictionOutputSerializer(many=True),
                   summary="AI predictions of a study (researchers)")
    def get(self, request, study_id: int):
        from assistants.selectors import study_predictions

        study = _study_for(request, study_id, Role.RESEARCHER)
        return _paginated(request, self, study_predictions(study=study),
                          PredictionOutputSerializer)

    @extend_schema(request=PredictionInputSerializer(many=True),
                   responses=PredictionImportOutputSerializer,
                   summary="Add AI predictions (atomic; unknown systems are created)")
    def post(self, request, study_id: int):
        from assistants.services import predictions_import

        return _import(request, study_id, PredictionInputSerializer, predictions_import,
                       PredictionImportOutputSerializer)


class QueryNextApi(APIView):
    @extend_schema(request=None, responses={200: QueryOutputSerializer,
                                            204: OpenApiResponse(description="Pool empty")},
                   summary="Lease the next query of your class (resumes your current lease)")
    def post(self, request, study_id: int):
        study = get_object_or_404(Study, pk=study_id)
        query = query_lease_next(study=study, user=request.user)  # checks the membership
        if query is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        query_mark_rendered(query=query)  # the minimum answer time counts from here
        view = selectors.query_for_specialist(query=query, study=study)
        return Response(QueryOutputSerializer(view).data)


class QueryAnswerApi(APIView):
    @extend_schema(request=AnswerInputSerializer, responses=AnswerOutputSerializer,
                   summary="Answer a query you hold (idempotent; 409 answered_too_soon "
                   "within OVERSIGHT_MIN_ANSWER_MS of receiving it)")
    def post(self, request, query_id: str):
        data = AnswerInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = label_submit(public_id=query_id, user=request.user,
                              answer=data.validated_data["answer"])
        return Response(AnswerOutputSerializer(result).data,
                        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class QueryHeartbeatApi(APIView):
    @extend_schema(request=None, responses=QueryOutputSerializer,
                   summary="Extend your lease while you work")
    def post(self, request, query_id: str):
        query = query_heartbeat(public_id=query_id, user=request.user)
        return Response(QueryOutputSerializer(selectors.query_for_specialist(query=query)).data)


class QuerySkipApi(APIView):
    @extend_schema(request=None, responses={204: OpenApiResponse(description="Skipped")},
                   summary="Hand a query you hold back to your class's pool (never offered to "
                   "you again)")
    def post(self, request, query_id: str):
        query_skip(public_id=query_id, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class QueryUndoApi(APIView):
    @extend_schema(request=None, responses=QueryOutputSerializer,
                   summary="Take back your last answer while nothing depends on it; you get "
                   "its query back under a fresh lease (409 undo_refused otherwise)")
    def post(self, request, study_id: int):
        study = get_object_or_404(Study, pk=study_id)
        query = label_undo(study=study, user=request.user)
        query_mark_rendered(query=query)
        return Response(QueryOutputSerializer(
            selectors.query_for_specialist(query=query, study=study)).data)


class StudyEstimatesApi(APIView):
    @extend_schema(responses={200: SnapshotOutputSerializer,
                              204: OpenApiResponse(description="No estimates yet")},
                   summary="Latest estimates of every AI system (managers, researchers)")
    def get(self, request, study_id: int):
        study = _study_for(request, study_id, Role.RESEARCHER, Role.MANAGER)
        snapshot = selectors.study_latest_snapshot(study=study)
        if snapshot is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(SnapshotOutputSerializer(snapshot).data)
