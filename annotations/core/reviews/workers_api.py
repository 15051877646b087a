"""The Workers REST API: each worker's quality and time (researchers, managers), and the
study's exclusions — list, make, undo (researchers). Validate → call a service or
selector → serialise."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.core.reviews import workers
from annotations.core.reviews.exclusions import exclusion_add, exclusion_undo
from annotations.core.reviews.serializers import (
    ExclusionInputSerializer,
    ExclusionOutputSerializer,
    WorkerOutputSerializer,
)

FORBIDDEN = OpenApiResponse(description="not_permitted")


class WorkersApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("sort", str, enum=list(workers.SORTS)),
                    OpenApiParameter("order", str, enum=["asc", "desc"])],
        responses={200: WorkerOutputSerializer(many=True), 403: FORBIDDEN},
        summary="Every worker's answers, time, gold accuracy (exact 95 % interval), agreement, "
                "skips, undos, flags and excluded answers (researchers, managers)")
    def get(self, request, study_id: int):
        study, _ = workers.workers_study(user=request.user, study_id=study_id)
        sort = request.query_params.get("sort", "name")
        rows = workers.study_workers(study=study, sort=sort,
                                     descending=request.query_params.get("order") == "desc")
        return Response(WorkerOutputSerializer(rows, many=True).data)


class ExclusionsApi(APIView):
    @extend_schema(responses={200: ExclusionOutputSerializer(many=True), 403: FORBIDDEN},
                   summary="The study's exclusions, newest first, undone ones included")
    def get(self, request, study_id: int):
        study, _ = workers.workers_study(user=request.user, study_id=study_id)
        return Response(ExclusionOutputSerializer(workers.study_exclusions(study=study),
                                                  many=True).data)

    @extend_schema(
        request=ExclusionInputSerializer,
        responses={201: ExclusionOutputSerializer, 400: OpenApiResponse(
            description="invalid_exclusion: names the field"), 403: FORBIDDEN},
        summary="Exclude a worker, or answers before / from a time or faster than a "
                "threshold (researchers): the answers leave every estimate and the default "
                "exports; the worker's leases go back")
    def post(self, request, study_id: int):
        study, _ = workers.workers_study(user=request.user, study_id=study_id)
        data = ExclusionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        rule = exclusion_add(study=study, by=request.user, kind=v["kind"], reason=v["reason"],
                             worker_id=v.get("worker"), at=v.get("at"),
                             faster_than_seconds=v.get("faster_than_seconds"))
        return Response(ExclusionOutputSerializer(rule).data, status=status.HTTP_201_CREATED)


class ExclusionUndoApi(APIView):
    @extend_schema(request=None, responses={
        200: ExclusionOutputSerializer, 403: FORBIDDEN,
        409: OpenApiResponse(description="nothing_to_undo")},
        summary="Undo an exclusion (its answers return unless another exclusion holds them)")
    def post(self, request, study_id: int, exclusion_id: int):
        study, _ = workers.workers_study(user=request.user, study_id=study_id)
        rule = exclusion_undo(study=study, exclusion_id=exclusion_id, by=request.user,
                              reason=str(request.data.get("reason", ""))[:2000])
        return Response(ExclusionOutputSerializer(rule).data)
