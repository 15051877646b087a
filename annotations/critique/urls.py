"""Pages of critique studies (included by ``oversight_site.urls``)."""

from django.urls import path

from annotations.core import views as core_views
from annotations.critique import views

urlpatterns = [
    path("studies/<int:study_id>/critique/", views.critique_work, name="critique-work"),
    path("studies/<int:study_id>/critique/next/", views.critique_next, name="critique-next"),
    path("studies/<int:study_id>/critique/undo/", views.critique_undo_view,
         name="critique-undo"),
    path("studies/<int:study_id>/critique/<str:public_id>/answer/", views.critique_submit,
         name="critique-submit"),
    path("studies/<int:study_id>/critique/<str:public_id>/skip/", views.critique_skip,
         name="critique-skip"),
    path("studies/<int:study_id>/critique/<str:public_id>/lease/", views.critique_lease,
         name="critique-lease"),
]
urlpatterns += [
    path("studies/<int:study_id>/critique/dashboard/", views.critique_dashboard,
         name="critique-dashboard"),
    # the raw exports every study type offers (core.views.study_export), at their old address
    path("studies/<int:study_id>/critique/export/", core_views.study_export,
         name="critique-export"),
    # the old researchers' page: now the study's admin page
    path("studies/<int:study_id>/critique/manage/", views.critique_manage,
         name="critique-manage"),
]
