"""The audits of a study through the REST API (researchers; read-only: audits are started
on the study's audits page): each audit's settings, progress and summary."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.audit.models import Audit
from annotations.audit.selectors import audit_of, audits_query
from annotations.core.api import paginated, study_for
from annotations.core.models import StudyMembership


class AuditOutputSerializer(serializers.ModelSerializer):
    rubric = serializers.CharField(source="rubric.name")

    class Meta:
        model = Audit
        fields = ["id", "rubric", "evaluator", "evaluator_name", "ai_model", "verifier",
                  "dataset", "dataset_name", "rounds", "phi", "seed", "status", "total", "done",
                  "successes", "flips", "summary", "errors", "created_at", "finished_at"]


class AuditListApi(APIView):
    @extend_schema(responses=AuditOutputSerializer(many=True),
                   summary="The study's audits, newest first (researchers)")
    def get(self, request, study_id: int):
        study = study_for(request, study_id, StudyMembership.Role.RESEARCHER)
        return paginated(request, self, audits_query(study), AuditOutputSerializer)


class AuditDetailApi(APIView):
    @extend_schema(responses=AuditOutputSerializer,
                   summary="One audit: its settings, progress, summary or errors "
                   "(researchers)")
    def get(self, request, study_id: int, audit_id: int):
        study = study_for(request, study_id, StudyMembership.Role.RESEARCHER)
        return Response(AuditOutputSerializer(audit_of(study=study, audit_id=audit_id)).data)
