from django.urls import path

from annotations import views_assisted_dashboard as views

urlpatterns = [
    path("studies/<int:study_id>/assisted/dashboard/", views.assisted_dashboard,
         name="assisted-dashboard"),
    path("studies/<int:study_id>/assisted/dashboard/<slug:figure>.csv",
         views.assisted_figure_csv, name="assisted-figure-csv"),
]
