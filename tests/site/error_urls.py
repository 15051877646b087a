"""The site's URLs plus views that fail, to test the error handlers."""

from django.urls import path

from oversight_site.urls import handler400, handler403, handler404, handler500  # noqa: F401
from oversight_site.urls import urlpatterns as site_urlpatterns


def boom(request):
    raise RuntimeError("secret internals: password=hunter2")


urlpatterns = [
    path("boom/", boom),
    path("api/boom/", boom),
    *site_urlpatterns,
]
