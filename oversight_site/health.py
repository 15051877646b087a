"""/healthz: database, broker, worker and live-recompute status, the estimates'
consistency check (``estimates``) and the read replica where one is configured
(``replica``: reachable, replay lag), as JSON (503 when something required is down).

Anonymous callers get the status only (no error strings, worker names, versions or study
names); staff see the details, and of the stale studies only those they research (a
superuser: all), so no researcher learns another study's name or error. Stale studies, and
studies whose statistics differed from the full recompute, make the status "degraded"
(still 200: the web process is fine, and a container health check must not restart it for
that)."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.views.decorators.http import require_GET

from annotations.core.services.recompute import short_error


def _database() -> dict:
    started = time.perf_counter()
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()
    except Exception as exc:  # noqa: BLE001 - report any failure
        return {"ok": False, "error": short_error(exc)}
    return {"ok": True, "vendor": connection.vendor,
            "ms": round((time.perf_counter() - started) * 1000, 1)}


def _replica() -> dict | None:
    """The read replica of dashboards and exports (``annotations.core.db_router``), when one
    is configured: reachable, and on PostgreSQL how far its replay lags the primary."""
    from annotations.core.db_router import REPLICA, replica_configured, replica_down_forget

    if not replica_configured():
        return None
    started = time.perf_counter()
    try:
        with connections[REPLICA].cursor() as cur:
            if connections[REPLICA].vendor == "postgresql":
                cur.execute("SELECT CASE WHEN pg_is_in_recovery() THEN EXTRACT(EPOCH FROM "
                            "now() - pg_last_xact_replay_timestamp()) END")
                lag = cur.fetchone()[0]
            else:
                cur.execute("SELECT 1")
                cur.fetchone()
                lag = None
    except Exception as exc:  # noqa: BLE001 - report any failure
        return {"ok": False, "error": short_error(exc)}
    replica_down_forget()  # reachable again: dashboards may read from it at once
    return {"ok": True, "ms": round((time.perf_counter() - started) * 1000, 1),
            "lag_seconds": None if lag is None else round(float(lag), 3)}


def _broker_and_workers() -> tuple[dict, dict]:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        mode = {"ok": True, "mode": "in-process (eager)"}
        return mode, {"ok": True, "mode": "in-process (eager)", "count": 0}
    from oversight_site.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        broker = {"ok": True, "mode": "redis"}
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": short_error(exc)}, {"ok": False, "count": 0}
    try:
        replies = app.control.ping(timeout=1.0) or []
    except Exception as exc:  # noqa: BLE001
        return broker, {"ok": False, "error": short_error(exc), "count": 0}
    return broker, {"ok": bool(replies), "count": len(replies),
                    "names": sorted(name for r in replies for name in r)}


def _recompute(detailed: bool, user=None) -> dict:
    from annotations.core.selectors import researched_study_ids, stale_studies

    try:
        stale = stale_studies()
    except Exception as exc:  # noqa: BLE001 - the database check reports the cause
        return {"ok": False, "error": short_error(exc)} if detailed else {"ok": False}
    body: dict = {"ok": not stale, "stale_studies": len(stale),
                  "failed_studies": sum(1 for _, h in stale if h.failed_at is not None)}
    if detailed:
        mine = researched_study_ids(user=user)
        body["studies"] = [
            {"id": study.pk, "name": study.name, "stale_since": h.stale_since.isoformat(),
             "failed_at": h.failed_at.isoformat() if h.failed_at else None, "error": h.error}
            for study, h in stale if mine is None or study.pk in mine
        ]
    return body


def _estimates(detailed: bool, user=None) -> dict:
    """Partitioned studies whose maintained statistics differed from the full recompute at
    their last consistency check (``annotations.partitioned.services.consistency``)."""
    from annotations.core.selectors import researched_study_ids
    from annotations.partitioned.services.consistency import mismatched_studies

    try:
        differed = mismatched_studies()
    except Exception as exc:  # noqa: BLE001 - the database check reports the cause
        return {"ok": False, "error": short_error(exc)} if detailed else {"ok": False}
    body: dict = {"ok": not differed, "mismatched_studies": len(differed)}
    if detailed:
        mine = researched_study_ids(user=user)
        body["studies"] = [pk for pk in differed if mine is None or pk in mine]
    return body


PUBLIC_KEYS = {"ok", "mode", "count"}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    detailed = bool(getattr(request, "user", None) and request.user.is_staff)
    database = _database()
    broker, workers = _broker_and_workers()
    recompute = _recompute(detailed, request.user if detailed else None)
    estimates = _estimates(detailed, request.user if detailed else None)
    replica = _replica()
    ok = database["ok"] and broker["ok"] and workers["ok"]
    parts = {"database": database, "broker": broker, "workers": workers}
    if replica is not None:  # down: dashboards read from the primary (degraded, not down)
        parts["replica"] = replica
    if not detailed:
        parts = {name: {k: v for k, v in part.items() if k in PUBLIC_KEYS}
                 for name, part in parts.items()}
    status = ("down" if not ok else
              "degraded" if not (recompute["ok"] and estimates["ok"]
                                 and (replica is None or replica["ok"])) else "ok")
    return JsonResponse({"ok": ok, "status": status, **parts, "recompute": recompute,
                         "estimates": estimates},
                        status=200 if ok else 503)


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for on pages without a ``<link rel="icon">`` (the
    admin's): a redirect to the static icon."""
    return redirect(static("img/favicon.svg"), permanent=True)
