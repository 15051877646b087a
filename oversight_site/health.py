"""/healthz: database, broker and worker status as JSON (503 when something required is down)."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


def _database() -> dict:
    started = time.perf_counter()
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()
    except Exception as exc:  # noqa: BLE001 - report any failure
        return {"ok": False, "error": str(exc)}
    return {"ok": True, "vendor": connection.vendor,
            "ms": round((time.perf_counter() - started) * 1000, 1)}


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
        return {"ok": False, "error": str(exc)}, {"ok": False, "count": 0}
    try:
        replies = app.control.ping(timeout=1.0) or []
    except Exception as exc:  # noqa: BLE001
        return broker, {"ok": False, "error": str(exc), "count": 0}
    return broker, {"ok": bool(replies), "count": len(replies),
                    "names": sorted(name for r in replies for name in r)}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    database = _database()
    broker, workers = _broker_and_workers()
    ok = database["ok"] and broker["ok"] and workers["ok"]
    return JsonResponse({"ok": ok, "database": database, "broker": broker, "workers": workers},
                        status=200 if ok else 503)
