"""API routes of critique studies (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.critique import api

urlpatterns = [
    path("studies/<int:study_id>/critique/next/", api.CritiqueTaskNextApi.as_view(),
         name="api-critique-next"),
    path("studies/<int:study_id>/critique/undo/", api.CritiqueUndoApi.as_view(),
         name="api-critique-undo"),
    path("critique/tasks/<str:task_id>/answer/", api.CritiqueTaskAnswerApi.as_view(),
         name="api-critique-answer"),
    path("critique/tasks/<str:task_id>/skip/", api.CritiqueTaskSkipApi.as_view(),
         name="api-critique-skip"),
]
