"""The Review and Workers pages' routes (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.core.reviews import views, workers_views

urlpatterns = [
    path("studies/<int:study_id>/review/", views.review, name="review"),
    path("studies/<int:study_id>/review/items/<int:item_id>/", views.review_item,
         name="review-item"),
    path("studies/<int:study_id>/review/items/<int:item_id>/flags/", views.review_flag_resolve,
         name="review-flag-resolve"),
    path("studies/<int:study_id>/review/answers/<int:answer_id>/", views.review_answer,
         name="review-answer"),
    path("studies/<int:study_id>/review/answers/<int:answer_id>/decide/", views.review_decide,
         name="review-decide"),
    path("studies/<int:study_id>/workers/", workers_views.workers_page, name="workers"),
    path("studies/<int:study_id>/workers/compact/", workers_views.workers_compact_part,
         name="workers-compact"),
    path("studies/<int:study_id>/workers/exclusions/", workers_views.workers_exclusions_part,
         name="workers-exclusions"),
    path("studies/<int:study_id>/workers/exclude/", workers_views.workers_exclude,
         name="workers-exclude"),
    path("studies/<int:study_id>/workers/exclusions/<int:exclusion_id>/undo/",
         workers_views.workers_exclusion_undo, name="workers-exclusion-undo"),
]
