"""API routes of audits (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.audit import api

urlpatterns = [
    path("studies/<int:study_id>/audits/", api.AuditListApi.as_view(), name="api-audits"),
    path("studies/<int:study_id>/audits/<int:audit_id>/", api.AuditDetailApi.as_view(),
         name="api-audit"),
]
