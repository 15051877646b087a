from django.urls import path

from annotations.evaluation import api

urlpatterns = [
    path("studies/<int:study_id>/evaluations/", api.EvaluationApi.as_view(),
         name="api-evaluations"),
    path("studies/<int:study_id>/evaluations/final/", api.EvaluationFinalApi.as_view(),
         name="api-evaluations-final"),
]
