"""WSGI entry point (gunicorn). Production settings unless told otherwise: a server started
without DJANGO_SETTINGS_MODULE refuses to run without a secret key instead of serving debug
pages."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oversight_site.settings.production")
application = get_wsgi_application()

from oversight_site.sweepers import embedded_sweepers_start  # noqa: E402 - settings first

embedded_sweepers_start()  # no broker: the beat schedule's sweepers in a thread (or nothing)
