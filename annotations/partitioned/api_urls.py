from django.urls import path

from annotations.partitioned import api

urlpatterns = [
    path("studies/<int:study_id>/items/", api.ItemListApi.as_view(), name="api-items"),
    path("studies/<int:study_id>/predictions/", api.PredictionListApi.as_view(),
         name="api-predictions"),
    path("studies/<int:study_id>/import-jobs/", api.ImportJobListApi.as_view(),
         name="api-import-jobs"),
    path("import-jobs/<int:job_id>/", api.ImportJobDetailApi.as_view(), name="api-import-job"),
    path("studies/<int:study_id>/queries/next/", api.QueryNextApi.as_view(),
         name="api-query-next"),
    path("studies/<int:study_id>/estimates/", api.StudyEstimatesApi.as_view(),
         name="api-estimates"),
    path("studies/<int:study_id>/routing-designs/", api.RoutingDesignApi.as_view(),
         name="api-routing-designs"),
    path("studies/<int:study_id>/queries/undo/", api.QueryUndoApi.as_view(),
         name="api-query-undo"),
    path("queries/<str:query_id>/answer/", api.QueryAnswerApi.as_view(), name="api-answer"),
    path("queries/<str:query_id>/heartbeat/", api.QueryHeartbeatApi.as_view(),
         name="api-heartbeat"),
    path("queries/<str:query_id>/skip/", api.QuerySkipApi.as_view(), name="api-skip"),
]
