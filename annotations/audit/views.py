"""Audit pages (htmx): a study's audits (start one, import a rubric file), one audit's
progress and result, and its downloads. For the study's researchers only: anyone else gets
404 (``selectors.audit_study``). Views parse, call one service or selector, render."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotations.audit.models import Audit, Rubric
from annotations.audit.selectors import (
    audit_of,
    audit_study,
    audit_upload_jobs,
    audits_of,
    failed_outcomes,
    rubrics_of,
)
from annotations.audit.services.runs import ACTIVE, audit_progress
from annotations.core.errors import DomainError, ImportFailed
from annotations.core.inputs import accepts_upload
from annotations.core.sqlite_locks import while_sqlite_locked
from estimators.nodata.kappa import MIN_KAPPA_MINORITY

AI_FIELDS = ("ai_base_url", "ai_model", "ai_strategy", "prompt_system", "prompt_user")


def _list_context(study) -> dict:
    audits = audits_of(study)
    return {"study": study, "rubrics": rubrics_of(study),
            "audits": [(a, audit_progress(a)) for a in audits],
            "active": any(a.status in ACTIVE for a in audits),
            "aggregators": Rubric.Aggregator.choices,
            "ai_systems": list(study.ai_systems.order_by("ordinal")),
            "strategies": Audit.Strategy.choices, "uploads": audit_upload_jobs(study)}


@accepts_upload  # the commitments, datapoints and rubric files
@login_required
@require_http_methods(["GET", "POST"])
def audits(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study's audits: start one (rubric, evaluator — a commitments file or an AI system
    through the provider —, data set, r, φ, seed) or import a rubric file. A file with
    problems changes nothing; the page lists every one."""
    from annotations.audit.services.rubrics import rubric_import
    from annotations.audit.services.runs import audit_start
    from annotations.audit.services.uploads import audit_upload_submit

    study = audit_study(user=request.user, study_id=study_id)
    if request.method == "GET" and request.htmx and request.GET.get("list"):
        return while_sqlite_locked(
            lambda: render(request, "audit/_audits.html", _list_context(study)))
    errors: list[str] = []
    form = request.POST if request.method == "POST" else request.GET  # ?rubric= preselects
    if request.method == "POST":
        action = form.get("action", "")
        try:
            if action == "start":
                rubric = Rubric.objects.filter(study=study, pk=_int(form.get("rubric"))).first()
                commitments = request.FILES.get("commitments")
                upload = request.FILES.get("datapoints")
                by_ai = form.get("evaluator") == Audit.Evaluator.AI
                if rubric is None:
                    errors = ["Choose a rubric (define one in the admin or import a file)."]
                elif commitments is None and not by_ai:
                    errors = ["Choose the evaluator's commitments file (JSONL)."]
                elif form.get("dataset") == "upload" and upload is None:
                    errors = ["Choose a file of datapoints, or audit the study's items."]
                elif not by_ai or form.get("dataset") == "upload":
                    # files are checked by an import job, never in this request
                    job = audit_upload_submit(
                        study=study, rubric=rubric,
                        commitments=None if by_ai else _upload(commitments),
                        datapoints=_upload(upload) if form.get("dataset") == "upload"
                        else None,
                        fields={"rounds": form.get("rounds", ""), "phi": form.get("phi", ""),
                                "seed": form.get("seed", ""),
                                "verifier": form.get("verifier") or "",
                                "ai_system": form.get("ai_system") or "",
                                "evaluator": Audit.Evaluator.AI if by_ai
                                else Audit.Evaluator.COMMITMENTS,
                                "ai": {f: form.get(f, "") for f in AI_FIELDS} if by_ai
                                else None},
                        by=request.user)
                    return redirect("audit-upload", study_id=study.pk, job_id=job.pk)
                else:  # no file: an AI evaluator on the study's items
                    audit = audit_start(
                        study=study, rubric=rubric, evaluator=Audit.Evaluator.AI,
                        ai={f: form.get(f, "") for f in AI_FIELDS},
                        verifier=form.get("verifier") or Audit.Verifier.PROGRAMMATIC,
                        rounds=form.get("rounds", ""), phi=form.get("phi", ""),
                        seed=form.get("seed", ""), by=request.user,
                        ai_system_id=form.get("ai_system") or None)
                    messages.info(request, f"Audit #{audit.pk} started.")
                    return redirect("audit-detail", study_id=study.pk, audit_id=audit.pk)
            elif action == "rubric":
                upload = request.FILES.get("file")
                if upload is None:
                    errors = ["Choose a rubric file (JSONL)."]
                else:
                    rubric = rubric_import(study=study, name=form.get("name", ""),
                                           aggregator=form.get("aggregator", ""),
                                           data=upload.read(), source=upload.name)
                    messages.success(request, f"Rubric {rubric.name} imported "
                                              f"({rubric.criteria.count()} criteria).")
                    return redirect("audits", study_id=study.pk)
            else:
                errors = ["Unknown action."]
        except ImportFailed as exc:
            errors = exc.errors
        except DomainError as exc:
            errors = [exc.message]
    return render(request, "audit/audits.html",
                  {**_list_context(study), "errors": errors, "form": form},
                  status=400 if errors else 200)


def _upload(upload):
    """An uploaded file as the service takes it (read here: the job stores the bytes)."""
    from annotations.audit.services.uploads import Upload

    return Upload(name=upload.name, data=upload.read())


@login_required
@require_GET
def audit_upload(request: HttpRequest, study_id: int, job_id: int) -> HttpResponse:
    """The job checking an audit's uploaded files: its progress (htmx polls the fragment
    every second until the job ends), then every problem of both files, or the summary
    that names the audit started."""
    from annotations.audit.selectors import audit_upload_job
    from annotations.core.selectors import import_job_progress
    from annotations.core.services.import_jobs import import_jobs_expire

    study = audit_study(user=request.user, study_id=study_id)
    job = while_sqlite_locked(lambda: (import_jobs_expire(study=study),
                                       audit_upload_job(study=study, job_id=job_id))[1])
    context = {"study": study, "job": job, "progress": import_job_progress(job=job),
               "poll_url": request.path,
               "links": _upload_links(study, job)}
    page = "audit/_upload.html" if request.htmx else "audit/upload.html"
    return render(request, page, context)


def _upload_links(study, job) -> list[tuple[str, str]]:
    """What to do next, as links: follow the audit started; start another."""
    from django.urls import reverse

    links = []
    audit_id = (job.summary or {}).get("audit_id")
    if audit_id:
        links.append((f"Follow audit #{audit_id}",
                      reverse("audit-detail", args=[study.pk, audit_id])))
    links.append(("All audits", reverse("audits", args=[study.pk])))
    return links


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _pct(x) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


CHALLENGE_NAMES = {"1": "1 — equality up to permutation (total rubric)",
                   "2": "2 — equality up to isomorphism (C(x′) = C(x))",
                   "none": "none — the evaluator had no usable commitment"}


def _detail_context(audit: Audit) -> dict:
    s = audit.summary or {}
    by_challenge = s.get("failures_by_challenge", {})
    lo, hi = s.get("interval") or (None, None)
    shown = {"rate": _pct(s.get("success_rate")), "lo": _pct(lo), "hi": _pct(hi),
             "flip_rate": _pct(s.get("flip_rate")),
             "lie": f"{s.get('lie_pass_bound', 0):.4g}",
             "factor": f"{s.get('error_factor', 0):.4f}",
             "theorem1": [(f"{a:.1f}", f"{1 - a:.2f}", f"{(1 - a) * s.get('error_factor', 0):.4f}",
                           _pct(b)) for a, b in s.get("theorem1", [])]}
    for key in ("kappa", "kappa_final"):
        k = s.get(key)
        if k:
            shown[key] = {"value": "—" if k["kappa"] is None else f"{k['kappa']:.3f}",
                          "lo": "—" if k["lower"] is None else f"{k['lower']:.3f}",
                          "hi": "—" if k["upper"] is None else f"{k['upper']:.3f}",
                          "observed": _pct(k["observed"]), "n": k["n"],
                          # summaries stored before issue 18 carry no minority count
                          "unreliable": k.get("interval_reliable") is False
                          and k["lower"] is not None,
                          "minority": k.get("n_minority")}
    return {"study": audit.study, "audit": audit, "progress": audit_progress(audit),
            "active": audit.status in ACTIVE, "s": s, "shown": shown,
            "kappa_min_minority": MIN_KAPPA_MINORITY,
            "by_challenge": [(CHALLENGE_NAMES.get(k, k), v) for k, v in by_challenge.items()],
            "by_criterion": sorted(s.get("failures_by_criterion", {}).items(),
                                   key=lambda kv: -kv[1]),
            "failed": failed_outcomes(audit) if audit.status == Audit.Status.SUCCEEDED else [],
            "criteria": audit.rubric_snapshot.get("criteria", []),
            "downloads": [("outcomes", "Outcomes per datapoint"), ("rounds", "Every round"),
                          ("summary", "Summary")]}


@login_required
@require_http_methods(["GET", "POST"])
def audit_detail(request: HttpRequest, study_id: int, audit_id: int) -> HttpResponse:
    """One audit: progress while it runs (the live region polls ``?progress=1`` every
    second), cancel, and the result when it has succeeded."""
    from annotations.audit.services.runs import audit_cancel

    study = audit_study(user=request.user, study_id=study_id)
    # the embedded run thread writes the audit while this page polls it: in the test
    # suite's shared-cache SQLite a read then meets a table lock (core.sqlite_locks)
    audit = while_sqlite_locked(lambda: audit_of(study=study, audit_id=audit_id))
    if request.method == "POST":
        if request.POST.get("action") == "cancel":
            try:
                audit_cancel(audit=audit)
                messages.info(request, f"Audit #{audit.pk}: cancel requested.")
            except DomainError as exc:
                messages.error(request, exc.message)
        return redirect("audit-detail", study_id=study.pk, audit_id=audit.pk)
    page = ("audit/_result.html" if request.htmx and request.GET.get("progress")
            else "audit/audit.html")
    return while_sqlite_locked(lambda: render(request, page, _detail_context(audit)))


@require_GET
@login_required
def audit_download(request: HttpRequest, study_id: int, audit_id: int) -> HttpResponse:
    """``?what=`` outcomes, rounds, summary (``?format=csv|jsonl``), commitments or
    datapoints (the files as uploaded, JSONL)."""
    from annotations.audit.services.exports import RAW, WHATS, audit_export
    from annotations.core.exports import download, requested_format

    study = audit_study(user=request.user, study_id=study_id)
    audit = audit_of(study=study, audit_id=audit_id)
    what = request.GET.get("what", "outcomes")
    if what not in WHATS:
        raise Http404("No such download.")
    fmt = "jsonl" if what in RAW else requested_format(request)
    response = download(f"study-{study.pk}-audit-{audit.pk}-{what}.{fmt}", fmt)
    audit_export(audit=audit, what=what, out=response, fmt=fmt)
    return response


@login_required
@require_http_methods(["GET", "POST"])
def verify(request: HttpRequest, study_id: int) -> HttpResponse:
    """A worker's yes/no questions of the study's audits verified by specialists
    (``services.verify``): the datapoint and the question only, Yes / No. For the study's
    workers only (anyone else: 404)."""
    from annotations.audit.services.verify import question_answer, question_next, verifier_study

    study = verifier_study(user=request.user, study_id=study_id)
    error = ""
    if request.method == "POST":
        answer = request.POST.get("answer")
        if answer not in ("yes", "no"):
            error = "Answer yes or no."
        else:
            try:
                question_answer(user=request.user, public_id=request.POST.get("task", ""),
                                answer=answer == "yes")
                return redirect("audit-verify", study_id=study.pk)
            except DomainError as exc:
                error = exc.message
    question = question_next(study=study, user=request.user)
    shown = None
    if question is not None:
        x = question.datapoint
        shown = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False, indent=2)
    return render(request, "audit/verify.html",
                  {"study": study, "question": question, "shown": shown, "error": error},
                  status=400 if error else 200)
