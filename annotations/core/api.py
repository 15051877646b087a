"""The REST API's shared parts: the studies a caller belongs to, the role check and the
pagination every list uses, and the shape of the labelling endpoints every study type
offers (lease the next task → 200 or 204; answer → 201 the first time, 200 when repeated;
skip → 204). Views validate, call a service or selector, and serialise."""

from __future__ import annotations

from collections.abc import Callable

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.core import selectors
from annotations.core.db_router import replica_reads
from annotations.core.errors import NotPermitted
from annotations.core.exports import (
    FORMATS,
    excluded_requested,
    export_response,
    requested_format,
)
from annotations.core.models import Study, StudyMembership
from annotations.core.serializers import (
    FlagInputSerializer,
    FlagListOutputSerializer,
    FlagOutputSerializer,
    MemberInputSerializer,
    MemberOutputSerializer,
    StudyCreateInputSerializer,
    StudyOutputSerializer,
)
from annotations.core.services.flags import flag_item, flaggable, worker_role
from annotations.core.services.studies import (
    NewMember,
    members_add,
    study_close,
    study_create_any,
    study_open,
)

Role = StudyMembership.Role


def study_for(request, study_id: int, *roles: str) -> Study:
    """The study, when the caller holds one of ``roles`` in it (404 / 403 otherwise)."""
    study = get_object_or_404(Study, pk=study_id)
    if not selectors.user_roles(user=request.user, study=study) & set(roles):
        raise NotPermitted(f"This needs the role {' or '.join(roles)} in study {study.pk}.")
    return study


def paginated(request, view, queryset, serializer_cls, context: dict | None = None
              ) -> Response:
    """One page of ``queryset`` (``?limit=&offset=``) with ``count``, ``next``, ``previous``."""
    paginator = LimitOffsetPagination()
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(
        serializer_cls(page, many=True, context={"request": request, **(context or {})}).data)


def leased(data: dict | None) -> Response:
    """The next task's body, or ``204`` when there is none for the caller."""
    if data is None:
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(data)


def answered(data: dict, created: bool) -> Response:
    """An answer's body: ``201`` when it was stored now, ``200`` when it repeats one stored
    before (answers are idempotent)."""
    return Response(data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


def skip_api(name: str, skip: Callable[..., object], *, summary: str) -> type[APIView]:
    """The skip endpoint of a study type: ``POST`` hands the task named by the URL's one
    argument back to the pool through ``skip(public_id=…, user=…)`` → ``204``."""

    @extend_schema(request=None, responses={204: OpenApiResponse(description="Skipped")},
                   summary=summary)
    def post(self, request, **kwargs):
        (public_id,) = kwargs.values()
        skip(public_id=public_id, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    return type(name, (APIView,), {"post": post, "__doc__": None})


def undo_api(name: str, undo: Callable[..., dict], *, response, summary: str
             ) -> type[APIView]:
    """The undo endpoint of a study type: ``POST /api/studies/{study_id}/…/undo/`` takes back
    the caller's last answer through ``undo(request, study_id)``, which returns the task given
    back (its body: ``response``'s shape); a refusal is the domain's 409 ``undo_refused``."""

    @extend_schema(request=None, responses=response, summary=summary)
    def post(self, request, study_id: int):
        return Response(undo(request, study_id))

    return type(name, (APIView,), {"post": post, "__doc__": None})


def _study_body(request, study: Study) -> dict:
    roles = {study.pk: selectors.user_roles(user=request.user, study=study)}
    return StudyOutputSerializer(study, context={"roles": roles}).data


class StudyListApi(APIView):
    @extend_schema(responses=StudyOutputSerializer(many=True), summary="Studies you belong to")
    def get(self, request):
        rows = selectors.studies_for_user(user=request.user)
        studies = [s for s, _, _ in rows]
        roles = {s.pk: r for s, r, _ in rows}
        return Response(StudyOutputSerializer(studies, many=True,
                                              context={"roles": roles}).data)

    @extend_schema(request=StudyCreateInputSerializer, responses={201: StudyOutputSerializer},
                   summary="Create a draft study of any type (staff accounts; you become "
                   "its researcher)",
                   description="400 naming the field: an unknown kind, a setting the type "
                   "does not take, a name you already use, fewer than 2 classes …")
    def post(self, request):
        data = StudyCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        study = study_create_any(kind=data.validated_data["kind"],
                                 name=data.validated_data["name"], by=request.user,
                                 settings=data.validated_data["settings"])
        return Response(_study_body(request, study), status=status.HTTP_201_CREATED)


class StudyDetailApi(APIView):
    @extend_schema(responses=StudyOutputSerializer, summary="One study")
    def get(self, request, study_id: int):
        study = study_for(request, study_id, *Role.values)
        return Response(_study_body(request, study))


def _status_api(name: str, change: Callable[..., object], summary: str) -> type[APIView]:
    """A study's open or close endpoint (researchers): ``change(study=, by=)``, then the
    study as it is now."""

    @extend_schema(request=None, responses=StudyOutputSerializer, summary=summary)
    def post(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER)
        change(study=study, by=request.user)
        study.refresh_from_db()
        return Response(_study_body(request, study))

    return type(name, (APIView,), {"post": post, "__doc__": None})


StudyOpenApi = _status_api("StudyOpenApi", study_open, "Open a study to its workers "
                           "(researchers; its first tasks are made)")
StudyCloseApi = _status_api("StudyCloseApi", study_close, "Close a study (researchers): no "
                            "task is offered or answered any more")


def _member_row(membership: StudyMembership, **new_account) -> dict:
    return {"username": membership.user.username, "role": membership.role,
            "class_index": membership.study_class.index if membership.study_class else None,
            **new_account}


class StudyMemberApi(APIView):
    @extend_schema(responses=MemberOutputSerializer(many=True),
                   summary="The study's members (researchers)")
    def get(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER)
        rows = [_member_row(m) for m in selectors.study_memberships(study=study)]
        return Response(MemberOutputSerializer(rows, many=True).data)

    @extend_schema(request=MemberInputSerializer(many=True),
                   responses={201: MemberOutputSerializer(many=True)},
                   summary="Add members, all or none (researchers); new accounts come back "
                   "with a one-time password and an invitation link, once")
    def post(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER)
        data = MemberInputSerializer(data=request.data, many=True)
        data.is_valid(raise_exception=True)
        added = members_add(study=study, by=request.user, members=[
            NewMember(**row) for row in data.validated_data])
        rows = [_member_row(a.membership, password=a.password, invitation=(
                    a.invitation and request.build_absolute_uri(a.invitation)))
                for a in added]
        return Response(MemberOutputSerializer(rows, many=True).data,
                        status=status.HTTP_201_CREATED)


class StudyExportApi(APIView):
    def perform_content_negotiation(self, request, force=False):
        # ?format= names the file's format here, not one of the API's renderers
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        parameters=[
            OpenApiParameter("what", str, description="Which export: partitioned labels; "
                             "assisted ratings; critique outputs, tasks or metrics (default: "
                             "the study type's first)."),
            OpenApiParameter("format", str, enum=list(FORMATS), description="csv (default) "
                             "or jsonl"),
            OpenApiParameter("excluded", str, enum=["include"], description="include: keep "
                             "the answers an exclusion took out, with a column 'excluded' "
                             "(default: left out, as from every estimate)")],
        responses={(200, "text/csv"): OpenApiTypes.STR,
                   (200, "application/jsonl"): OpenApiTypes.STR},
        summary="Raw export of every answer of a study (researchers, managers)")
    @replica_reads
    def get(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER, Role.MANAGER)
        return export_response(study, request.query_params.get("what"),
                               requested_format(request), excluded=excluded_requested(request))


class StudyFlagApi(APIView):
    @extend_schema(responses=FlagListOutputSerializer(many=True),
                   summary="The study's flags, open first then newest (researchers, "
                   "managers)")
    def get(self, request, study_id: int):
        study = study_for(request, study_id, Role.RESEARCHER, Role.MANAGER)
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(selectors.study_flags(study=study), request,
                                           view=self)
        rows = selectors.flag_rows(page, flaggable(study.kind).item_model)
        return paginator.get_paginated_response(FlagListOutputSerializer(rows, many=True).data)

    @extend_schema(
        request=FlagInputSerializer,
        responses={201: FlagOutputSerializer,
                   200: OpenApiResponse(FlagOutputSerializer,
                                        description="Your earlier flag of the item, rewritten"),
                   403: OpenApiResponse(description="not_permitted: not a labeller of the "
                                        "study"),
                   404: OpenApiResponse(description="unknown_task: not a task you were given")},
        summary="Flag the item of a task you hold or were given as broken or ambiguous "
                "(every study type; one flag per person and item)")
    def post(self, request, study_id: int):
        study = get_object_or_404(Study, pk=study_id)
        study_for(request, study_id, worker_role(study))
        data = FlagInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        flag, created = flag_item(study=study, user=request.user,
                                  public_id=data.validated_data["task"],
                                  reason=data.validated_data["reason"],
                                  note=data.validated_data["note"])
        body = {"task": data.validated_data["task"], "reason": flag.reason, "note": flag.note,
                "flagged_at": flag.updated_at}
        return answered(FlagOutputSerializer(body).data, created)
