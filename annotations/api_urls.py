from django.urls import path

from annotations import api

urlpatterns = [
    path("studies/", api.StudyListApi.as_view(), name="api-studies"),
    path("studies/<int:study_id>/", api.StudyDetailApi.as_view(), name="api-study"),
    path("studies/<int:study_id>/items/", api.ItemListApi.as_view(), name="api-items"),
    path("studies/<int:study_id>/predictions/", api.PredictionListApi.as_view(),
         name="api-predictions"),
    path("studies/<int:study_id>/queries/next/", api.QueryNextApi.as_view(),
         name="api-query-next"),
    path("studies/<int:study_id>/estimates/", api.StudyEstimatesApi.as_view(),
         name="api-estimates"),
    path("queries/<int:query_id>/answer/", api.QueryAnswerApi.as_view(), name="api-answer"),
    path("queries/<int:query_id>/heartbeat/", api.QueryHeartbeatApi.as_view(),
         name="api-heartbeat"),
]
