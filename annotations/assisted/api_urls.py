from django.urls import path

from annotations.assisted import api

urlpatterns = [
    path("studies/<int:study_id>/tutorial/", api.TutorialApi.as_view(), name="api-tutorial"),
    path("studies/<int:study_id>/quiz/", api.QuizApi.as_view(), name="api-quiz"),
    path("studies/<int:study_id>/ratings/next/", api.RatingNextApi.as_view(),
         name="api-rating-next"),
    path("studies/<int:study_id>/ratings/undo/", api.RatingUndoApi.as_view(),
         name="api-rating-undo"),
    path("ratings/<str:task_id>/answer/", api.RatingAnswerApi.as_view(),
         name="api-rating-answer"),
    path("ratings/<str:task_id>/heartbeat/", api.RatingHeartbeatApi.as_view(),
         name="api-rating-heartbeat"),
    path("ratings/<str:task_id>/skip/", api.RatingSkipApi.as_view(), name="api-rating-skip"),
    path("ratings/<str:task_id>/events/", api.RatingEventApi.as_view(),
         name="api-rating-events"),
]
