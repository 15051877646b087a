"""Evaluation pages (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.evaluation import views

urlpatterns = [
    path("studies/<int:study_id>/evaluations/", views.evaluations, name="evaluations"),
]
