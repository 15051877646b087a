"""Reads of audits. Every page and download of an audit starts at ``audit_study``: the
study's researchers (and superusers) only — anyone else gets 404, as if the study had no
audits, so no audit of another study can be probed."""

from __future__ import annotations

from django.http import Http404

from annotations.audit.models import Audit, AuditOutcome, Rubric
from annotations.core.models import Study, User
from annotations.core.services.studies import researcher_may_configure


def audit_study(*, user: User, study_id: int) -> Study:
    """The study whose audits ``user`` asks for; Http404 unless they research it."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None or not user.is_authenticated or not researcher_may_configure(
            user=user, study=study):
        raise Http404("No such study.")
    return study


def audit_of(*, study: Study, audit_id: int) -> Audit:
    audit = Audit.objects.filter(study=study, pk=audit_id).select_related("rubric").first()
    if audit is None:
        raise Http404("No such audit.")
    return audit


def audits_query(study: Study):
    """The study's audits, newest first (``Audit.Meta.ordering``), with their rubrics."""
    return Audit.objects.filter(study=study).select_related("rubric", "ai_system")


def audits_of(study: Study, limit: int = 50) -> list[Audit]:
    return list(audits_query(study)[:limit])


def rubrics_of(study: Study) -> list[Rubric]:
    return list(Rubric.objects.filter(study=study).prefetch_related("criteria"))


def outcomes_of(audit: Audit):
    return AuditOutcome.objects.filter(audit=audit).order_by("position")


def failed_outcomes(audit: Audit, limit: int = 50) -> list[AuditOutcome]:
    return list(outcomes_of(audit).filter(success=False)[:limit])


def latest_audit(*, ai_system_id: int | None) -> Audit | None:
    """The AI system's latest finished (succeeded) audit, or None: what its page, the
    assisted dashboard and the trust gate read."""
    if ai_system_id is None:
        return None
    return (Audit.objects.filter(ai_system_id=ai_system_id, status=Audit.Status.SUCCEEDED)
            .order_by("-finished_at", "-id").select_related("study").first())


def audit_upload_job(*, study: Study, job_id: int):
    """The study's import job of audit files ``job_id``; Http404 for any other."""
    from annotations.core.models import ImportJob

    job = ImportJob.objects.filter(study=study, pk=job_id, kind=ImportJob.Kind.AUDIT).first()
    if job is None:
        raise Http404("No such upload.")
    return job


def audit_upload_jobs(study: Study, limit: int = 5) -> list:
    """The study's latest uploads of audit files (newest first)."""
    from annotations.core.models import ImportJob

    return list(ImportJob.objects.filter(study=study, kind=ImportJob.Kind.AUDIT)
                .order_by("-created_at", "-id")[:limit])
