from django.urls import path

from annotations.core import views

urlpatterns = [
    path("", views.home, name="home"),
    path("studies/<int:study_id>/dashboard/", views.dashboard, name="dashboard"),
    path("studies/<int:study_id>/dashboard/<slug:figure>.csv", views.figure_csv,
         name="figure-csv"),
    path("studies/<int:study_id>/export/", views.study_export, name="study-export"),
    path("studies/<int:study_id>/flag/<str:public_id>/", views.flag, name="flag"),
    path("help/", views.help_index, name="help-index"),
    path("help/img/<str:name>", views.help_image, name="help-image"),
    path("help/<slug:page>/", views.help_page, name="help-page"),
]
