"""API routes every study type shares (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.core import api

urlpatterns = [
    path("studies/", api.StudyListApi.as_view(), name="api-studies"),
    path("studies/<int:study_id>/", api.StudyDetailApi.as_view(), name="api-study"),
    path("studies/<int:study_id>/export/", api.StudyExportApi.as_view(), name="api-export"),
    path("studies/<int:study_id>/flags/", api.StudyFlagApi.as_view(), name="api-flags"),
    path("studies/<int:study_id>/open/", api.StudyOpenApi.as_view(), name="api-study-open"),
    path("studies/<int:study_id>/close/", api.StudyCloseApi.as_view(),
         name="api-study-close"),
    path("studies/<int:study_id>/members/", api.StudyMemberApi.as_view(),
         name="api-members"),
]
