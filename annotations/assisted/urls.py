from django.urls import path

from annotations.assisted import views

urlpatterns = [
    path("studies/<int:study_id>/rate/", views.rate_page, name="rate"),
    path("studies/<int:study_id>/rate/quiz/", views.quiz_post, name="rate-quiz"),
    path("studies/<int:study_id>/rate/warning/", views.warning_post, name="rate-warning"),
    path("studies/<int:study_id>/rate/next/", views.rate_next, name="rate-next"),
    path("studies/<int:study_id>/rate/undo/", views.rate_undo, name="rate-undo"),
    path("studies/<int:study_id>/rate/<str:public_id>/answer/", views.rate_answer,
         name="rate-answer"),
    path("studies/<int:study_id>/rate/<str:public_id>/skip/", views.rate_skip,
         name="rate-skip"),
    path("studies/<int:study_id>/rate/<str:public_id>/heartbeat/", views.rate_heartbeat,
         name="rate-heartbeat"),
    path("studies/<int:study_id>/rate/<str:public_id>/events/", views.rate_event,
         name="rate-event"),
    path("studies/<int:study_id>/assisted/dashboard/", views.assisted_dashboard,
         name="assisted-dashboard"),
    path("studies/<int:study_id>/assisted/comments/", views.rater_comments,
         name="assisted-comments"),
    path("studies/<int:study_id>/assisted/dashboard/<slug:figure>.csv",
         views.assisted_figure_csv, name="assisted-figure-csv"),
]
