from django.urls import include, path

from annotations import views

urlpatterns = [
    path("", views.home, name="home"),
    path("studies/<int:study_id>/label/", views.label_page, name="label"),
    path("studies/<int:study_id>/label/next/", views.label_next, name="label-next"),
    path("studies/<int:study_id>/label/undo/", views.label_undo, name="label-undo"),
    path("studies/<int:study_id>/label/<str:public_id>/answer/", views.label_answer,
         name="label-answer"),
    path("studies/<int:study_id>/label/<str:public_id>/skip/", views.label_skip,
         name="label-skip"),
    path("studies/<int:study_id>/label/<str:public_id>/heartbeat/", views.label_heartbeat,
         name="label-heartbeat"),
    path("studies/<int:study_id>/dashboard/", views.dashboard, name="dashboard"),
    path("studies/<int:study_id>/plan/", views.plan, name="plan"),
    path("help/img/<str:name>", views.help_image, name="help-image"),
    path("help/<slug:page>/", views.help_page, name="help-page"),
    path("", include("annotations.critique_urls")),  # critique studies (issue 10)
]
