from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.decorators.cache import cache_control
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularSwaggerSplitView,
)

from annotations.core.accounts import InvitationView, OwnPasswordChangeView
from oversight_site.health import favicon, healthz
from oversight_site.throttling import ThrottledAdminAuthenticationForm, ThrottledLoginView

admin.site.login_form = ThrottledAdminAuthenticationForm  # failed log-ins slow down, then lock

urlpatterns = [
    path("", include("annotations.core.urls")),
    path("", include("annotations.partitioned.urls")),
    path("", include("annotations.critique.urls")),
    path("", include("annotations.assisted.urls")),
    path("", include("annotations.audit.urls")),
    path("", include("annotations.core.reviews.urls")),
    path("", include("annotations.core.recruitment.urls")),
    path("healthz", healthz, name="healthz"),
    # the language menu (set_language) and the worker pages' script strings
    path("i18n/", include("django.conf.urls.i18n")),
    # cached by the browser for an hour: pages ask for it with their language (?l=de), so a
    # change of language is a new address
    path("jsi18n/", cache_control(max_age=3600)(JavaScriptCatalog.as_view()),
         name="javascript-catalog"),
    # browsers ask for /favicon.ico on pages without a <link rel="icon"> (the admin's)
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # members created by researchers get a one-time password and replace it here
    path("accounts/password/", OwnPasswordChangeView.as_view(), name="password_change"),
    path("accounts/invitation/<uidb64>/<token>/", InvitationView.as_view(), name="invitation"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(),
         name="password_change_done"),
    path("api/", include("annotations.core.api_urls")),
    path("api/", include("annotations.core.reviews.api_urls")),
    path("api/", include("annotations.partitioned.api_urls")),
    path("api/", include("annotations.critique.api_urls")),
    path("api/", include("annotations.assisted.api_urls")),
    path("api/", include("annotations.evaluation.api_urls")),
    path("api/", include("annotations.audit.api_urls")),
    path("", include("annotations.evaluation.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # the split view serves its settings script as a file: no inline script (the CSP). No
    # Redoc page: it loads fonts and a logo from the internet and injects styles and a worker
    # the policy refuses, and it said what this page says.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(
        url_name="schema", template_name="api/swagger_ui.html"), name="swagger-ui"),
]

handler400 = "oversight_site.error_pages.bad_request"
handler403 = "oversight_site.error_pages.permission_denied"
handler404 = "oversight_site.error_pages.page_not_found"
handler500 = "oversight_site.error_pages.server_error"
