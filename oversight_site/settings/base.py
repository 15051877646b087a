"""Settings shared by every environment; everything configurable comes from the environment.

Embedded defaults: without configuration the site runs on SQLite with Celery tasks executed
in-process (``task_always_eager``). ``DATABASE_URL`` switches to PostgreSQL (psycopg 3);
``CELERY_BROKER_URL`` (a Redis URL) switches to real Celery workers and a Redis cache.
"""

import os
from pathlib import Path

import dj_database_url
from celery.schedules import schedule
from csp.constants import NONCE as CSP_NONCE

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(default)).lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [v.strip() for v in os.environ.get(name, default).split(",") if v.strip()]


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-local-development-key-change-me")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

# Behind a reverse proxy that terminates TLS (DJANGO_BEHIND_PROXY=true) trust its
# X-Forwarded-Proto header for "is this HTTPS?" and its X-Forwarded-For entry for the
# client address (throttling); never otherwise, or any client could claim either.
BEHIND_PROXY = env_bool("DJANGO_BEHIND_PROXY", False)
if BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
PROXY_COUNT = int(os.environ.get("DJANGO_PROXY_COUNT", "1")) if BEHIND_PROXY else 0

# Request bodies (the API's JSON, forms) up to this size; files uploaded in the admin are
# not counted. Over it the API answers 413 with a JSON body.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("DJANGO_DATA_UPLOAD_MAX_BYTES",
                                                 str(20 * 1024 * 1024)))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "csp",
    "annotations",
    "assistants",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Content-Security-Policy on every page (CONTENT_SECURITY_POLICY below); static files
    # (served above) need none
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # the page's language: the language menu's cookie, else the browser's Accept-Language
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # every request body: size, NUL characters, JSON depth, text length (annotations/core/inputs.py)
    "annotations.core.inputs.RequestBodyGuard",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # a password a researcher handed out is replaced first (annotations/core/accounts.py)
    "annotations.core.accounts.PasswordChangeRequired",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # a crowd participant's session reaches only their study's pages while working; an MTurk
    # participant's pages may be framed by MTurk (annotations/core/recruitment/middleware.py)
    "annotations.core.recruitment.middleware.ParticipantGate",
]

ROOT_URLCONF = "oversight_site.urls"
WSGI_APPLICATION = "oversight_site.wsgi.application"

# The study types: one package each under annotations/, each with the same rooms
# (docs/architecture.md); their templates and static files are found here.
STUDY_TYPES = ("partitioned", "assisted", "critique")

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # the site's own templates, then each study type's (annotations/<type>/templates)
        "DIRS": [BASE_DIR / "templates",
                 *(BASE_DIR / "annotations" / t / "templates" for t in STUDY_TYPES),
                 BASE_DIR / "annotations" / "audit" / "templates",  # audits (study-level)
                 BASE_DIR / "annotations" / "evaluation" / "templates"],  # evaluation service
        "APP_DIRS": True,
        "OPTIONS": {
            # each study type's tags live in its package (annotations/<type>/templatetags.py)
            "libraries": {
                "chart_tags": "annotations.core.templatetags",
                "dashboard_tags": "annotations.partitioned.templatetags",
                "assisted_dashboard_tags": "annotations.assisted.templatetags",
                "critique_tags": "annotations.critique.templatetags",
            },
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=60, conn_health_checks=True
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Wait for the writer instead of failing at once when the dev server and the
    # in-process tasks write together. WAL: readers (pages, an import's progress) are not
    # blocked while an import writes; IMMEDIATE: a transaction takes the write lock when it
    # begins, so it waits its turn instead of failing when it starts writing after reading.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=20, init_command="PRAGMA journal_mode=WAL;", transaction_mode="IMMEDIATE")
    DATABASES["default"]["CONN_MAX_AGE"] = 0
# Behind PgBouncer in transaction pooling (docs/scaling.md): consecutive transactions of one
# Django connection may run on different server connections, so nothing may outlive a
# transaction — no server-side cursors (``.iterator()`` declares one WITH HOLD outside a
# transaction) and no prepared statements (psycopg 3 prepares a query it has run 5 times).
DATABASE_PGBOUNCER = env_bool("DATABASE_PGBOUNCER")
# A read replica (a hot standby of the primary) for dashboards and raw exports
# (annotations/core/db_router.py, docs/scaling.md); a test mirror of the primary in tests.
if os.environ.get("DATABASE_REPLICA_URL"):
    DATABASES["replica"] = dj_database_url.parse(
        os.environ["DATABASE_REPLICA_URL"], conn_max_age=60, conn_health_checks=True)
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    # an unreachable replica is given up quickly: its reads go to the primary
    DATABASES["replica"].setdefault("OPTIONS", {})["connect_timeout"] = 2
for _alias in DATABASES:
    if DATABASE_PGBOUNCER and DATABASES[_alias]["ENGINE"].endswith("postgresql"):
        DATABASES[_alias]["DISABLE_SERVER_SIDE_CURSORS"] = True
        DATABASES[_alias].setdefault("OPTIONS", {})["prepare_threshold"] = None
DATABASE_ROUTERS = ["annotations.core.db_router.ReplicaRouter"]
OVERSIGHT_REPLICA_READS = env_bool("OVERSIGHT_REPLICA_READS", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "annotations.User"
# Django's defaults, then the one for passwords researchers hand out (random, signing in
# once: annotations/core/accounts.py); a chosen password is stored with the first
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.BCryptSHA256PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
    "annotations.core.accounts.OneTimePasswordHasher",
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Worker-facing pages are translated (gettext; locale/<lang>/LC_MESSAGES, docs/operations.md
# "Languages"): the browser's Accept-Language picks one of LANGUAGES, or the language menu
# at the foot of every page (a cookie). Researchers' pages and the admin stay in English
# where Django has no translation of their own.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("de", "Deutsch")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static",
                    *(BASE_DIR / "annotations" / t / "static" for t in STUDY_TYPES)]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Celery -------------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
if not CELERY_BROKER_URL:
    CELERY_BROKER_URL = "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_TIMEZONE = TIME_ZONE
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Survives losing Redis while holding countdown/retry messages (Celery 5.7.0 ended with
# "'NoneType' object has no attribute 'hostname'"): docs/operations.md, "Worker supervision"
CELERY_WORKER_CONSUMER = "oversight_site.worker:Consumer"
CELERY_TASK_DEFAULT_QUEUE = "default"
# audits run on their own queue, chunk by chunk: a recompute never waits behind one
CELERY_TASK_ROUTES = {"annotations.tasks.study_recompute_task": {"queue": "estimates"},
                      "annotations.tasks.tallies_check_task": {"queue": "estimates"},
                      "annotations.audit_tasks.audit_run_task": {"queue": "audits"}}
CELERY_BEAT_SCHEDULE = {
    "reclaim-expired-leases": {
        "task": "annotations.tasks.leases_reclaim_task",
        "schedule": schedule(run_every=30.0),
    },
    # studies whose snapshot is behind their answers (Redis was down, a worker died):
    # annotations.core.services.recompute
    "catch-up-recomputes": {
        "task": "annotations.tasks.recomputes_catch_up_task",
        "schedule": schedule(run_every=float(os.environ.get("OVERSIGHT_CATCH_UP_SECONDS", "15"))),
    },
    # large exclusions whose job was lost or failed (annotations/core/reviews/exclusions.py)
    "catch-up-exclusions": {
        "task": "annotations.tasks.exclusions_catch_up_task",
        "schedule": schedule(run_every=60.0),
    },
    # audits whose worker died mid-chunk (annotations.audit.services.runs.audits_sweep).
    # "task" is the name a task is registered under (what beat sends), not its import path.
    "fail-stopped-audits": {
        "task": "annotations.audit_tasks.audits_sweep_task",
        "schedule": schedule(run_every=60.0),
    },
    # partitioned studies' maintained statistics held to the full recompute
    # (annotations.partitioned.services.consistency; /healthz reports a difference)
    # webhook deliveries due: retries, and those whose task was lost (annotations.webhooks)
    "webhooks-due": {
        "task": "annotations.tasks.webhooks_due_task",
        "schedule": schedule(run_every=15.0),
    },
    "check-estimates": {
        "task": "annotations.tasks.tallies_check_task",
        "schedule": schedule(run_every=float(os.environ.get("OVERSIGHT_CHECK_ESTIMATES_SECONDS",
                                                            "3600"))),
    },
}
# an audit works this long per Celery task (well within CELERY_TASK_SOFT_TIME_LIMIT), then
# stores a checkpoint and queues its next chunk
OVERSIGHT_AUDIT_CHUNK_SECONDS = float(os.environ.get("OVERSIGHT_AUDIT_CHUNK_SECONDS", "30"))
# Without a broker no beat runs: a thread of the web process runs the schedule above
# (oversight_site/sweepers.py); OVERSIGHT_EMBEDDED_SWEEPERS=false turns it off.
OVERSIGHT_EMBEDDED_SWEEPERS = CELERY_TASK_ALWAYS_EAGER and (
    os.environ.get("OVERSIGHT_EMBEDDED_SWEEPERS", "true").lower() != "false")

# --- Cache (debounce keys, rate limits) --------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL") or (
    os.environ.get("CELERY_BROKER_URL")
    if os.environ.get("CELERY_BROKER_URL", "").startswith("redis")
    else ""
)
if REDIS_URL:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- REST API -----------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "oversight_site.throttling.ThrottledTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON without deep nesting, NUL characters or bodies over DATA_UPLOAD_MAX_MEMORY_SIZE.
    "DEFAULT_PARSER_CLASSES": [
        "annotations.core.inputs.GuardedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "annotations.core.api_errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": [
        "oversight_site.throttling.UserRateThrottle",
        "oversight_site.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": os.environ.get("OVERSIGHT_API_RATE_USER", "1200/minute"),
        "anon": os.environ.get("OVERSIGHT_API_RATE_ANON", "120/minute"),
    },
    "NUM_PROXIES": PROXY_COUNT,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Oversight platform API",
    "DESCRIPTION": "Studies, items, AI predictions, routed queries, answers and estimates.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Platform ------------------------------------------------------------------------------
# Seconds to wait before recomputing a study after an answer, gathering a burst into one run.
OVERSIGHT_RECOMPUTE_DEBOUNCE_SECONDS = float(os.environ.get("OVERSIGHT_RECOMPUTE_DEBOUNCE", "0.3"))
# The largest share of a worker one study's live recomputes may take while answers stream in:
# after a recompute that took c seconds the next waits at least c · (1/share − 1).
OVERSIGHT_RECOMPUTE_MAX_SHARE = float(os.environ.get("OVERSIGHT_RECOMPUTE_MAX_SHARE", "0.25"))
OVERSIGHT_DASHBOARD_POLL_SECONDS = int(os.environ.get("OVERSIGHT_DASHBOARD_POLL_SECONDS", "1"))
# seed_demo creates accounts with known passwords; production settings turn this off.
OVERSIGHT_DEMO_ALLOWED = True

# Failed log-ins and invalid API tokens (oversight_site.throttling): free failures, then
# waits doubling from 2 s (at most max_delay), then a lock; counted over window_seconds.
_LOCK_SECONDS = int(os.environ.get("OVERSIGHT_LOGIN_LOCK_SECONDS", "900"))
OVERSIGHT_THROTTLES = {
    "login_user": {"free_failures": int(os.environ.get("OVERSIGHT_LOGIN_FREE_FAILURES", "3")),
                   "lock_after": int(os.environ.get("OVERSIGHT_LOGIN_LOCK_AFTER", "10")),
                   "lock_seconds": _LOCK_SECONDS, "max_delay_seconds": 60,
                   "window_seconds": 900},
    "login_ip": {"free_failures": 20,
                 "lock_after": int(os.environ.get("OVERSIGHT_LOGIN_IP_LOCK_AFTER", "50")),
                 "lock_seconds": _LOCK_SECONDS, "max_delay_seconds": 60, "window_seconds": 900},
    "token_ip": {"free_failures": 5, "lock_after": 20, "lock_seconds": _LOCK_SECONDS,
                 "max_delay_seconds": 60, "window_seconds": 900},
}
# An answer to a query shown (HTML page or API "next query") less than this many ms ago is
# refused (409 answered_too_soon): a held key must not answer queries nobody read.
OVERSIGHT_MIN_ANSWER_MS = int(os.environ.get("OVERSIGHT_MIN_ANSWER_MS", "600"))
# Imports run as jobs (annotations/core/services/import_jobs.py): the largest file accepted, the
# task's time limit (a job running longer is stopped, nothing written), how often progress
# is stored, and who runs the jobs: "celery" (a worker; the default with a broker),
# "thread" (one background thread of the web process; the embedded default) or "request"
# (the call that submits a job runs it before answering; the test settings).
OVERSIGHT_IMPORT_MAX_BYTES = int(os.environ.get("OVERSIGHT_IMPORT_MAX_BYTES",
                                                str(100 * 1024 * 1024)))
# The bytes of audit files (datapoints and commitments, stored with each audit, plus uploads
# still being checked) one study may hold (annotations/audit/services/uploads.py): 1 GiB.
OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES = int(os.environ.get("OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES",
                                                       str(1024 * 1024 * 1024)))
# Webhooks (annotations/webhooks/): the hosts they may call (host names, .domain, IP
# addresses and networks, "*"; comma-separated; empty: none — the operator opens them), the
# seconds one delivery may take in all, and who sends them: "celery" (a worker; the default
# with a broker), "thread" (a background thread of the web process; the embedded default) or
# "request" (at once, in the call that made the notice: the test settings).
OVERSIGHT_WEBHOOK_ALLOWED_HOSTS = [h for h in os.environ.get(
    "OVERSIGHT_WEBHOOK_ALLOWED_HOSTS", "").split(",") if h.strip()]
OVERSIGHT_WEBHOOK_TIMEOUT = float(os.environ.get("OVERSIGHT_WEBHOOK_TIMEOUT", "10"))
OVERSIGHT_WEBHOOK_RUNNER = os.environ.get("OVERSIGHT_WEBHOOK_RUNNER") or (
    "thread" if CELERY_TASK_ALWAYS_EAGER else "celery")
# Evaluation logs (annotations/core/services/eval_logs/): the most samples × epochs one import reads
# (a log declaring more is refused before it is read), and the most bytes an Inspect log's
# zip may inflate to (checked before Inspect opens it).
OVERSIGHT_EVAL_LOG_MAX_SAMPLES = int(os.environ.get("OVERSIGHT_EVAL_LOG_MAX_SAMPLES",
                                                    "200000"))
OVERSIGHT_EVAL_LOG_MAX_INFLATED = int(os.environ.get("OVERSIGHT_EVAL_LOG_MAX_INFLATED",
                                                     str(1024 * 1024 * 1024)))
OVERSIGHT_IMPORT_TIME_LIMIT = int(os.environ.get("OVERSIGHT_IMPORT_TIME_LIMIT", "1800"))
OVERSIGHT_IMPORT_PROGRESS_SECONDS = float(os.environ.get("OVERSIGHT_IMPORT_PROGRESS_SECONDS",
                                                         "0.5"))
# An exclusion (made or undone) over more answers than this moves them in a job
# (annotations/core/reviews/exclusions.py), not in the researcher's request.
OVERSIGHT_EXCLUSION_INLINE_MAX = int(os.environ.get("OVERSIGHT_EXCLUSION_INLINE_MAX", "20000"))
OVERSIGHT_IMPORT_RUNNER = os.environ.get("OVERSIGHT_IMPORT_RUNNER") or (
    "thread" if CELERY_TASK_ALWAYS_EAGER else "celery")
# An answer can be undone for this many seconds (0: never); follow-up queries it routed are
# not handed out before the window closes, so undo never depends on whether the answered
# query was routed or a quality check (annotations/partitioned/services/labels.py, label_undo).
OVERSIGHT_UNDO_SECONDS = int(os.environ.get("OVERSIGHT_UNDO_SECONDS", "30"))
# Lease length in seconds instead of each study's lease_minutes (tests of expiry; unset in use).
OVERSIGHT_LEASE_SECONDS = (int(os.environ["OVERSIGHT_LEASE_SECONDS"])
                           if os.environ.get("OVERSIGHT_LEASE_SECONDS") else None)

# The AI rater / AI outputs (assistants.provider): any OpenAI-compatible chat endpoint. Empty
# base URL or model = not configured (nothing is ever sent anywhere by default); a study's own
# provider settings override these. The key is sent only to that endpoint, never logged.
OVERSIGHT_AI_BASE_URL = os.environ.get("OVERSIGHT_AI_BASE_URL", "")
OVERSIGHT_AI_MODEL = os.environ.get("OVERSIGHT_AI_MODEL", "")
OVERSIGHT_AI_API_KEY = os.environ.get("OVERSIGHT_AI_API_KEY", "")
OVERSIGHT_AI_TIMEOUT = float(os.environ.get("OVERSIGHT_AI_TIMEOUT", "60"))
OVERSIGHT_AI_MAX_RETRIES = int(os.environ.get("OVERSIGHT_AI_MAX_RETRIES", "3"))
# Hosts a study's own AI endpoint may name (assistants.egress), comma-separated: host names,
# .domain (it and its subdomains), * (any host), IP addresses and CIDR networks. Addresses on
# loopback, private, link-local (metadata) and other internal ranges are refused unless they
# lie in a listed address or network. Unset: the host of OVERSIGHT_AI_BASE_URL only.
OVERSIGHT_AI_ALLOWED_HOSTS = (os.environ["OVERSIGHT_AI_ALLOWED_HOSTS"].split(",")
                              if "OVERSIGHT_AI_ALLOWED_HOSTS" in os.environ else None)

# Prolific's API, for sending a recruitment link's bonus batches (annotations/core/recruitment/
# payments.py): the operator's key; unset, researchers download the bulk-bonus CSV instead.
# The URL is the operator's too (tests point it at a local server), never a researcher's.
OVERSIGHT_PROLIFIC_TOKEN = os.environ.get("OVERSIGHT_PROLIFIC_TOKEN", "")
OVERSIGHT_PROLIFIC_API_URL = os.environ.get("OVERSIGHT_PROLIFIC_API_URL",
                                            "https://api.prolific.com")

# Content-Security-Policy (django-csp; docs/operations.md): scripts and styles from the site
# only, inline ones only with the request's nonce (``request.csp_nonce``); no eval, no inline
# style attributes, no framing, forms post only here. OVERSIGHT_CSP_REPORT_URI: where browsers
# report violations (unset: no reports).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'", CSP_NONCE],
        "style-src": ["'self'", CSP_NONCE],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        **({"report-uri": [os.environ["OVERSIGHT_CSP_REPORT_URI"]]}
           if os.environ.get("OVERSIGHT_CSP_REPORT_URI") else {}),
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # a 403 is one line (method, path, user id, reason), never a traceback
    "filters": {"forbidden_one_line": {"()": "oversight_site.log_filters.ForbiddenOneLine"}},
    # httpx2 logs every request of the AI provider client at INFO: one line per sample.
    "loggers": {"django.db.backends": {"level": "WARNING"}, "httpx2": {"level": "WARNING"},
                "django.request": {"filters": ["forbidden_one_line"]},
                "django.security.csrf": {"filters": ["forbidden_one_line"]}},
}
