"""WSGI entry point (gunicorn). Production settings unless told otherwise: a server started
without DJANGO_SETTINGS_MODULE refuses to run without a secret key instead of serving debug
pages."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.production")
application = get_wsgi_application()
