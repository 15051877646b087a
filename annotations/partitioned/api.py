"""REST API: one view per operation. Validate → call a service or selector → serialise."""

from __future__ import annotations

import json

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.core import selectors
from annotations.core.api import (
    Role,
    answered,
    leased,
    paginated,
    skip_api,
    study_for,
    undo_api,
)
from annotations.core.db_router import replica_reads
from annotations.core.errors import ImportFailed, NotPermitted
from annotations.core.inputs import accepts_upload, file_too_large_message
from annotations.core.models import ImportJob, Study
from annotations.core.services.eval_logs import eval_log_submit
from annotations.core.services.import_jobs import import_job_submit, import_jobs_expire
from annotations.core.sqlite_locks import while_sqlite_locked
from annotations.partitioned.selectors import (
    query_for_specialist,
    specialist_membership_of,
    study_designs,
)
from annotations.partitioned.serializers import (
    AnswerInputSerializer,
    AnswerOutputSerializer,
    ImportJobInputSerializer,
    ImportJobOutputSerializer,
    ImportOutputSerializer,
    ItemInputSerializer,
    ItemOutputSerializer,
    PredictionImportOutputSerializer,
    PredictionInputSerializer,
    PredictionOutputSerializer,
    QueryOutputSerializer,
    RoutingDesignInputSerializer,
    RoutingDesignOutputSerializer,
    SnapshotOutputSerializer,
)
from annotations.partitioned.services.designs import routing_design_set
from annotations.partitioned.services.labels import label_submit, label_undo
from annotations.partitioned.services.routing import (
    query_heartbeat,
    query_lease_next,
    query_mark_rendered,
    query_skip,
)


def _jsonl(records: list[dict]) -> bytes:
    return "\n".join(json.dumps(r) for r in records).encode()


def _job_response(request, job: ImportJob, code: int) -> Response:
    body = ImportJobOutputSerializer(job, context={"request": request}).data
    return Response(body, status=code, headers={"Location": body["url"]})


WAIT = OpenApiParameter(
    "wait", OpenApiTypes.BOOL, description="true: import within this request and answer 201 "
    "with the counts (400 import_failed with every error) — the synchronous form, subject to "
    "the server's request timeout; keep such requests small. Default: 202 with the import "
    "job to poll.")
UPDATE = OpenApiParameter("update", OpenApiTypes.BOOL,
                          description="true: rewrite records whose ids already exist.")
ASYNC_IMPORT = ("Atomic: all or nothing. Answers 202 with an import job (also in Location): "
                "GET its url until status is succeeded (summary) or failed (errors, nothing "
                "written). The same records sent again while that job is queued or running "
                "return the same job. ?wait=true imports within the request instead.")


def _import(request, study_id: int, serializer_cls, kind: str, output_cls) -> Response:
    """POST a JSON list of records → an import job of the same service files use."""
    study = study_for(request, study_id, Role.RESEARCHER)
    data = serializer_cls(data=request.data, many=True)
    data.is_valid(raise_exception=True)
    wait = request.query_params.get("wait") == "true"
    job, _ = import_job_submit(study=study, kind=kind, data=_jsonl(data.validated_data),
                               name="request", fmt="jsonl", user=request.user,
                               update=request.query_params.get("update") == "true",
                               run_here=wait)
    if not wait or not job.finished:
        return _job_response(request, job, status.HTTP_202_ACCEPTED)
    url = ImportJobOutputSerializer(job, context={"request": request}).data["url"]
    if job.status == ImportJob.Status.FAILED:
        return Response({**ImportFailed(job.errors).as_dict(), "job": url},
                        status=status.HTTP_400_BAD_REQUEST, headers={"Location": url})
    body = {k: v for k, v in job.summary.items() if k in output_cls().fields}
    return Response(output_cls(body).data, status=status.HTTP_201_CREATED,
                    headers={"Location": url})


class ItemListApi(APIView):
    @extend_schema(responses=ItemOutputSerializer(many=True),
                   summary="Items of a study (researchers; includes hidden gold)")
    def get(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER)
        names = list(study.classes.order_by("index").values_list("name", flat=True))
        return paginated(request, self, selectors.study_items(study=study), ItemOutputSerializer,
                          {"class_names": {study.pk: names}})

    @extend_schema(request=ItemInputSerializer(many=True), parameters=[WAIT, UPDATE],
                   responses={202: ImportJobOutputSerializer,
                              201: OpenApiResponse(ImportOutputSerializer,
                                                   description="?wait=true: imported")},
                   summary="Add items", description=ASYNC_IMPORT)
    def post(self, request, study_id: int):
        return _import(request, study_id, ItemInputSerializer, ImportJob.Kind.ITEMS,
                       ImportOutputSerializer)


class PredictionListApi(APIView):
    @extend_schema(responses=PredictionOutputSerializer(many=True),
                   summary="AI predictions of a study (researchers)")
    def get(self, request, study_id: int):
        from annotations.partitioned.selectors import study_predictions

        study = study_for(request, study_id, Role.RESEARCHER)
        return paginated(request, self, study_predictions(study=study),
                          PredictionOutputSerializer)

    @extend_schema(request=PredictionInputSerializer(many=True), parameters=[WAIT, UPDATE],
                   responses={202: ImportJobOutputSerializer,
                              201: OpenApiResponse(PredictionImportOutputSerializer,
                                                   description="?wait=true: imported")},
                   summary="Add AI predictions (unknown systems are created)",
                   description=ASYNC_IMPORT)
    def post(self, request, study_id: int):
        return _import(request, study_id, PredictionInputSerializer,
                       ImportJob.Kind.PREDICTIONS, PredictionImportOutputSerializer)


@accepts_upload
class ImportJobListApi(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(responses=ImportJobOutputSerializer(many=True),
                   summary="Import jobs of a study, newest first (researchers)")
    def get(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER)
        import_jobs_expire(study=study)
        return paginated(request, self, selectors.study_import_jobs(study=study),
                          ImportJobOutputSerializer)

    @extend_schema(request={"multipart/form-data": ImportJobInputSerializer},
                   responses={202: ImportJobOutputSerializer},
                   summary="Import a file: items or predictions (CSV or JSONL), or an "
                   "evaluation log into a study of any type",
                   description="The file as the study's import page takes it (file uploads "
                   "are not limited by the JSON body size; at most OVERSIGHT_IMPORT_MAX_BYTES). "
                   + ASYNC_IMPORT.replace(" ?wait=true imports within the request instead.",
                                          ""))
    def post(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER)
        data = ImportJobInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        if upload.size > settings.OVERSIGHT_IMPORT_MAX_BYTES:
            raise ImportFailed([file_too_large_message(upload.name, upload.size)])
        given = data.validated_data
        if given["kind"] == ImportJob.Kind.EVAL_LOG:
            job, _ = eval_log_submit(study=study, data=upload.read(), name=upload.name,
                                     user=request.user, log_format_given=given.get("log_format"),
                                     model=given.get("model", ""), task=given.get("task", ""))
        else:
            job, _ = import_job_submit(study=study, kind=given["kind"], data=upload.read(),
                                       name=upload.name, user=request.user,
                                       update=given["update"])
        return _job_response(request, job, status.HTTP_202_ACCEPTED)


class ImportJobDetailApi(APIView):
    @extend_schema(responses=ImportJobOutputSerializer,
                   summary="One import job: its status, progress, summary or errors "
                   "(researchers of its study)")
    def get(self, request, job_id: int):
        job = while_sqlite_locked(lambda: get_object_or_404(ImportJob, pk=job_id))
        study = study_for(request, job.study_id, Role.RESEARCHER)
        if while_sqlite_locked(lambda: import_jobs_expire(study=study)):
            job.refresh_from_db()
        return Response(ImportJobOutputSerializer(job, context={"request": request}).data)


class QueryNextApi(APIView):
    @extend_schema(request=None, responses={200: QueryOutputSerializer,
                                            204: OpenApiResponse(description="Pool empty")},
                   summary="Lease the next query of your class (resumes your current lease)")
    def post(self, request, study_id: int):
        membership = specialist_membership_of(user=request.user, study_id=study_id)
        if membership is None:  # one statement for study and membership otherwise
            get_object_or_404(Study, pk=study_id)
            raise NotPermitted("You are not a specialist in this study.")
        study = membership.study
        query = query_lease_next(study=study, user=request.user, membership=membership)
        if query is not None:
            query_mark_rendered(query=query)  # the minimum answer time counts from here
        return leased(query and QueryOutputSerializer(
            query_for_specialist(query=query, study=study)).data)


class QueryAnswerApi(APIView):
    @extend_schema(request=AnswerInputSerializer, responses=AnswerOutputSerializer,
                   summary="Answer a query you hold (idempotent; 409 answered_too_soon "
                   "within OVERSIGHT_MIN_ANSWER_MS of receiving it)")
    def post(self, request, query_id: str):
        data = AnswerInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = label_submit(public_id=query_id, user=request.user,
                              answer=data.validated_data["answer"])
        return answered(AnswerOutputSerializer(result).data, result.created)


class QueryHeartbeatApi(APIView):
    @extend_schema(request=None, responses=QueryOutputSerializer,
                   summary="Extend your lease while you work")
    def post(self, request, query_id: str):
        query = query_heartbeat(public_id=query_id, user=request.user)
        shown = query_for_specialist(query=query)
        return Response(QueryOutputSerializer(shown).data)


QuerySkipApi = skip_api("QuerySkipApi", query_skip, summary="Hand a query you hold back "
                        "to your class's pool (never offered to you again)")


def _undo(request, study_id: int) -> dict:
    study = get_object_or_404(Study, pk=study_id)
    query = label_undo(study=study, user=request.user)
    query_mark_rendered(query=query)
    return QueryOutputSerializer(query_for_specialist(query=query, study=study)).data


QueryUndoApi = undo_api(
    "QueryUndoApi", _undo, response=QueryOutputSerializer,
    summary="Take back your last answer within OVERSIGHT_UNDO_SECONDS (30 s) of giving it; you "
    "get its query back under a fresh lease (409 undo_refused otherwise)")


class StudyEstimatesApi(APIView):
    @extend_schema(responses={200: SnapshotOutputSerializer,
                              204: OpenApiResponse(description="No estimates yet")},
                   summary="Latest estimates of every AI system (managers, researchers)")
    @replica_reads
    def get(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER, Role.MANAGER)
        snapshot = selectors.study_latest_snapshot(study=study)
        if snapshot is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(SnapshotOutputSerializer(snapshot).data)


class RoutingDesignApi(APIView):
    """The study's routing designs (researchers): how the class asked about each item is
    drawn. Specialists see the same question whatever the design."""

    @extend_schema(responses=RoutingDesignOutputSerializer(many=True),
                   summary="The study's routing designs, oldest first; the last is current "
                   "(researchers)")
    def get(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER)
        return Response(RoutingDesignOutputSerializer(study_designs(study=study),
                                                      many=True).data)

    @extend_schema(request=RoutingDesignInputSerializer,
                   responses={201: RoutingDesignOutputSerializer(many=True)},
                   summary="Change the routing design (researchers)",
                   description="From now on, and for the queries no one was handed yet, "
                   "which are drawn again. Refused (400, naming the field) for an unknown "
                   "kind, ε missing or outside [0.05, 1] for a targeted design, ε given to "
                   "the uniform or Neyman design, the current design again, a closed study, "
                   "or while any query of the study is leased (it finishes under its own "
                   "design); Neyman also for items in one stratum, no pilot (20 answers in a "
                   "stratum about a system's items) or a study with targeted answers, and "
                   "targeted for a study with answers under a Neyman allocation.")
    def post(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER)
        data = RoutingDesignInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        routing_design_set(study=study, kind=data.validated_data["kind"],
                           epsilon=data.validated_data.get("epsilon"), by=request.user)
        return Response(RoutingDesignOutputSerializer(study_designs(study=study),
                                                      many=True).data,
                        status=status.HTTP_201_CREATED)
