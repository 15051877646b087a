"""The participant's pages and the Payments page (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.core.recruitment import payments_views, views

urlpatterns = [
    path("join/<str:token>/", views.join, name="join"),
    path("join/<str:token>/step/", views.step, name="join-step"),
    path("join/<str:token>/consent/", views.consent, name="join-consent"),
    path("join/<str:token>/quiz/", views.quiz, name="join-quiz"),
    path("join/<str:token>/complete/", views.complete, name="join-complete"),
    path("join/<str:token>/return/", views.leave, name="join-return"),
    path("join/<str:token>/progress/", views.progress, name="join-progress"),
    path("studies/<int:study_id>/payments/", payments_views.payments_page, name="payments"),
    path("studies/<int:study_id>/payments/links/<int:link_id>/record/",
         payments_views.payments_record, name="payments-record"),
    path("studies/<int:study_id>/payments/batches/<int:batch_id>.<str:fmt>",
         payments_views.batch_download, name="payments-batch"),
    path("studies/<int:study_id>/payments/batches/<int:batch_id>/",
         payments_views.batch_act, name="payments-batch-act"),
]
