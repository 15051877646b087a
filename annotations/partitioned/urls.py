from django.urls import path

from annotations.partitioned import views

urlpatterns = [
    path("studies/<int:study_id>/label/", views.label_page, name="label"),
    path("studies/<int:study_id>/label/next/", views.label_next, name="label-next"),
    path("studies/<int:study_id>/label/undo/", views.label_undo, name="label-undo"),
    path("studies/<int:study_id>/label/<str:public_id>/answer/", views.label_answer,
         name="label-answer"),
    path("studies/<int:study_id>/label/<str:public_id>/skip/", views.label_skip,
         name="label-skip"),
    path("studies/<int:study_id>/label/<str:public_id>/heartbeat/", views.label_heartbeat,
         name="label-heartbeat"),
    path("studies/<int:study_id>/plan/", views.plan, name="plan"),
]
