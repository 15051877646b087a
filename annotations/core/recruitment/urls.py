"""The participant's pages (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.core.recruitment import views

urlpatterns = [
    path("join/<str:token>/", views.join, name="join"),
    path("join/<str:token>/step/", views.step, name="join-step"),
    path("join/<str:token>/consent/", views.consent, name="join-consent"),
    path("join/<str:token>/quiz/", views.quiz, name="join-quiz"),
    path("join/<str:token>/complete/", views.complete, name="join-complete"),
    path("join/<str:token>/return/", views.leave, name="join-return"),
    path("join/<str:token>/progress/", views.progress, name="join-progress"),
]
