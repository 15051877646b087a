"""The Review page's routes (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.core.reviews import views

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
]
