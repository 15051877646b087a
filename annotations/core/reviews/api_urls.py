"""The review and workers API's routes (included by ``oversight_site.urls`` under ``api/``)."""

from django.urls import path

from annotations.core.reviews import api, workers_api

urlpatterns = [
    path("studies/<int:study_id>/review/answers/", api.ReviewAnswersApi.as_view(),
         name="api-review-answers"),
    path("studies/<int:study_id>/review/answers/<int:answer_id>/", api.ReviewAnswerApi.as_view(),
         name="api-review-answer"),
    path("studies/<int:study_id>/review/answers/<int:answer_id>/undo/",
         api.ReviewAnswerUndoApi.as_view(), name="api-review-undo"),
    path("studies/<int:study_id>/review/disagreements/", api.ReviewDisagreementsApi.as_view(),
         name="api-review-disagreements"),
    path("studies/<int:study_id>/review/items/<int:item_id>/", api.ReviewItemApi.as_view(),
         name="api-review-item"),
    path("studies/<int:study_id>/workers/", workers_api.WorkersApi.as_view(),
         name="api-workers"),
    path("studies/<int:study_id>/exclusions/", workers_api.ExclusionsApi.as_view(),
         name="api-exclusions"),
    path("studies/<int:study_id>/exclusions/<int:exclusion_id>/undo/",
         workers_api.ExclusionUndoApi.as_view(), name="api-exclusion-undo"),
]
