"""Audit pages (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.audit import views

urlpatterns = [
    path("studies/<int:study_id>/audits/", views.audits, name="audits"),
    path("studies/<int:study_id>/audits/<int:audit_id>/", views.audit_detail,
         name="audit-detail"),
    path("studies/<int:study_id>/audits/<int:audit_id>/download/", views.audit_download,
         name="audit-download"),
    path("studies/<int:study_id>/audits/verify/", views.verify, name="audit-verify"),
    path("studies/<int:study_id>/audits/uploads/<int:job_id>/", views.audit_upload,
         name="audit-upload"),
]
