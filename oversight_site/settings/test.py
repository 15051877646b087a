"""Test settings: fast hashing, debounce off so answers recompute at once."""

import os

from .parallel import isolate_test_process

isolate_test_process()  # pytest-xdist: this process's own Redis databases, before base reads them

from .base import *  # noqa: E402, F403
from .base import DATABASES, REST_FRAMEWORK  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher",
                    "annotations.core.accounts.OneTimePasswordHasher"]
OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = 0.0
# Import jobs run in the call that submits them (the result exists on return), also in the
# pass with a broker; tests of the thread and of the worker choose their runner.
OVERSIGHT_IMPORT_RUNNER = "request"
OVERSIGHT_WEBHOOK_RUNNER = "request"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # A fixed name, so the Celery worker the tests start can connect to the same database
    # (pytest-xdist's processes: pytest-django appends _gw0, _gw1 …). OVERSIGHT_TEST_DB lets
    # several checkouts test on one server side by side.
    DATABASES["default"]["TEST"] = {"NAME": os.environ.get("OVERSIGHT_TEST_DB", "oversight_test")}

# A read replica as production may have one: a test mirror of the primary, its routing off
# (the tests' transactions are invisible to its second connection; test_db_router turns it on
# in committed transactions).
DATABASES["replica"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}
OVERSIGHT_REPLICA_READS = False

# The stand-in AI endpoints of the tests listen on the loopback: listed as an address, as an
# operator lists a local vLLM (tests/security/test_egress.py checks the default refusals).
OVERSIGHT_AI_ALLOWED_HOSTS = ["127.0.0.1"]

# Serve static files from the finders without collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

# The whole suite shares one client address and one cache per process: API rates no test
# reaches by accident (tests/site/test_throttling.py sets its own).
REST_FRAMEWORK = {**REST_FRAMEWORK,
                  "DEFAULT_THROTTLE_RATES": {"user": "100000/minute", "anon": "100000/minute"}}
