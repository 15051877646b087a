"""An audit's uploaded files (datapoints and commitments) as an import job (issue 27).

The page's request only stores the files: ``audit_upload_submit`` checks what costs nothing
to check — a rubric chosen, each file within the upload limit
(``OVERSIGHT_IMPORT_MAX_BYTES``), the study's audit files within its quota
(``OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES``) — and hands both files, one after the other, to
the platform's import job (``core.services.import_jobs``, kind "audit"), with the audit's
settings as the job's options. The job (``audit_upload_import``, on a worker or the web
process's import thread) reads both files line by line, checks every field of every line of
both — the datapoints first, then the commitments against them and r — and lists every
problem in line order, file after file, as "file:line: field: message"; with any problem
nothing is stored. Otherwise it starts the audit (``services.runs.audit_start``) in the
job's transaction, and the job's summary names the audit to follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from django.conf import settings
from django.db.models import Sum
from django.db.models.functions import Coalesce, Length

from annotations.audit.models import MAX_ROUNDS, Audit, AuditFile, Rubric
from annotations.audit.services.datasets import read_datapoints, study_datapoints
from annotations.audit.services.files import jsonl_stream
from annotations.core.errors import ImportFailed
from annotations.core.inputs import file_too_large_message
from annotations.core.models import ImportJob, Study, User
from annotations.core.services.import_jobs import import_job_submit, import_kind_register
from annotations.core.services.progress import (
    progress_part,
    progress_phase,
    progress_reporting,
)
from annotations.core.services.records import line_count
from annotations.core.words import counted
from estimators.nodata.commitments import commitments_from_records

KIND = ImportJob.Kind.AUDIT
# the audit's settings the job carries to ``audit_start`` (the form's names)
SETTINGS = ("rounds", "phi", "seed", "verifier", "ai_system", "evaluator", "ai")


@dataclass(frozen=True)
class Upload:
    """One uploaded file: its name and bytes."""

    name: str
    data: bytes


@dataclass(frozen=True)
class AuditImportResult:
    """What an audit upload made: one audit, started, over ``datapoints`` datapoints with
    ``commitments`` commitments (0 for an AI evaluator)."""

    created: int
    updated: int
    audit_id: int
    datapoints: int
    commitments: int

    def summary(self) -> str:
        return (f"audit #{self.audit_id} started on {counted(self.datapoints, 'datapoint')}"
                + (f" with {counted(self.commitments, 'commitment')}."
                   if self.commitments else "."))

    def details(self) -> list[tuple[str, str]]:
        return [("Datapoints", f"{self.datapoints:,}"),
                ("Commitments", f"{self.commitments:,}")]

    def next_step(self) -> str:
        return (f"Follow audit #{self.audit_id} on its page: its progress, then its result "
                f"(a long audit goes on without you).")


def study_audit_bytes(study: Study) -> int:
    """Bytes of audit files the study holds: its audits' stored files and the files of its
    audit uploads still queued or running."""
    stored = AuditFile.objects.filter(audit__study=study).aggregate(
        n=Coalesce(Sum(Length("commitments")), 0) + Coalesce(Sum(Length("datapoints")), 0))
    waiting = ImportJob.objects.filter(study=study, kind=KIND,
                                       status__in=ImportJob.ACTIVE).aggregate(
        n=Coalesce(Sum("size"), 0))
    return int(stored["n"] or 0) + int(waiting["n"] or 0)


def quota_message(names: str, adding: int, held: int) -> str:
    quota = settings.OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES
    return (f"{names}: {adding:,} bytes would bring this study's audit files to "
            f"{held + adding:,} bytes, over its quota of {quota:,} bytes "
            f"(OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES; {held:,} bytes held now): delete audits "
            f"the study no longer needs, or ask the operator to raise the quota")


def audit_upload_submit(*, study: Study, rubric: Rubric, commitments: Upload | None,
                        datapoints: Upload | None, fields: dict, by: User | None = None
                        ) -> ImportJob:
    """Queue the job that checks the uploaded files and starts the audit (module
    docstring); returns the job (already ended with the "request" runner). Refused at once,
    nothing stored (ImportFailed naming the file): a file over ``OVERSIGHT_IMPORT_MAX_BYTES``,
    files that would take the study's audit files over ``OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES``.
    ``fields``: the audit's settings as the page sends them (``SETTINGS``)."""
    if rubric.study_id != study.pk:
        raise ImportFailed(["rubric: the rubric belongs to another study."])
    files = [(role, f) for role, f in (("datapoints", datapoints),
                                       ("commitments", commitments)) if f is not None]
    if not files:
        raise ImportFailed(["Choose the evaluator's commitments file or a datapoints file."])
    too_large = [file_too_large_message(f.name, len(f.data)) for _, f in files
                 if len(f.data) > settings.OVERSIGHT_IMPORT_MAX_BYTES]
    if too_large:
        raise ImportFailed(too_large)
    adding = sum(len(f.data) for _, f in files)
    held = study_audit_bytes(study)
    if held + adding > settings.OVERSIGHT_AUDIT_STUDY_QUOTA_BYTES:
        raise ImportFailed([quota_message(" and ".join(f.name for _, f in files), adding,
                                          held)])
    options = {"rubric": rubric.pk, **{k: fields.get(k) for k in SETTINGS if k in fields},
               "files": [[role, f.name[:255], len(f.data)] for role, f in files],
               "by": by.pk if by is not None else None}
    name = " + ".join(f.name for _, f in files)
    job, _ = import_job_submit(
        study=study, kind=KIND, data=b"".join(f.data for _, f in files), name=name, user=by,
        fmt="jsonl", options=options,
        max_bytes=settings.OVERSIGHT_IMPORT_MAX_BYTES * len(files))
    return job


class _Part:
    """Bytes ``start`` to ``start + size`` of ``source`` as a file of their own (what
    ``read_records`` streams: lines, blocks, tell and seek); several parts share the one
    source, so each is rewound (``seek(0)``) before it is read."""

    def __init__(self, source: IO[bytes], start: int, size: int) -> None:
        self.source, self.start, self.end = source, start, start + size

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.source.tell() - self.start

    def seek(self, position: int) -> None:
        self.source.seek(self.start + position)

    def _left(self) -> int:
        return max(self.end - self.source.tell(), 0)

    def read(self, n: int | None = -1) -> bytes:
        left = self._left()
        return self.source.read(left if n is None or n < 0 else min(n, left))

    def __iter__(self):
        while (left := self._left()) > 0:
            line = self.source.readline(left)
            if not line:
                return
            yield line


def _rounds(value) -> int | None:
    try:
        rounds = int(value)
    except (TypeError, ValueError):
        return None
    return rounds if 1 <= rounds <= MAX_ROUNDS else None


def audit_files_check(*, study: Study, parts: dict[str, tuple[str, _Part]],
                      rounds) -> tuple[int, int]:
    """Every problem of both files in one pass (datapoints, then commitments checked
    against those datapoints — or the study's items — and r), or ImportFailed listing them
    all in line order. Returns (datapoints, commitments) counted."""
    problems: list[str] = []
    lines = {}
    for role, (_, part) in parts.items():
        part.seek(0)
        lines[role] = line_count(part)
    total = sum(lines.values())  # both files are one "reading" phase on the job's page
    if "datapoints" in parts:
        name, source = parts["datapoints"]
        source.seek(0)
        with progress_part(before=0, total=total):
            items = [d.item for d in read_datapoints(source, name=name, problems=problems)]
    else:
        items = [d.item for d in study_datapoints(study)]
    n_commitments = 0
    if "commitments" in parts:
        name, source = parts["commitments"]
        source.seek(0)
        counter = [0]

        def counted_records():
            for record in jsonl_stream(source, name=name, problems=problems):
                counter[0] += 1
                yield record

        # the commitments' items are checked against the datapoints' readable lines (a
        # datapoints file with problems still names the data set)
        with progress_part(before=lines.get("datapoints", 0), total=total):
            commitments_from_records(counted_records(), source=name, problems=problems,
                                     rounds=_rounds(rounds), items=items, keep=False)
        n_commitments = counter[0]
    if problems:
        raise ImportFailed(problems)
    return len(items), n_commitments


def audit_upload_import(*, study: Study, source: IO[bytes], name: str, fmt: str = "jsonl",
                        update: bool = False, options: dict) -> AuditImportResult:
    """The job's service: check both files (``audit_files_check``), then start the audit
    with ``audit_start`` (its own checks — the rubric, r, φ, the seed, the evaluator — are
    the job's errors too). All in the job's transaction: nothing is stored on a problem."""
    from annotations.audit.services.runs import audit_start

    parts: dict[str, tuple[str, _Part]] = {}
    start = 0
    for role, file_name, size in options.get("files", []):
        parts[role] = (file_name, _Part(source, start, size))
        start += size
    rubric = Rubric.objects.filter(study=study, pk=options.get("rubric")).first()
    if rubric is None:
        raise ImportFailed(["rubric: it was deleted after the upload; choose another one."])
    n_datapoints, n_commitments = audit_files_check(study=study, parts=parts,
                                                    rounds=options.get("rounds"))
    progress_phase("writing", total=0)
    data = {role: _whole(part) for role, (_, part) in parts.items()}
    evaluator = options.get("evaluator") or Audit.Evaluator.COMMITMENTS
    with progress_reporting(lambda p: None):  # its second reading is no progress to show
        audit = audit_start(
            study=study, rubric=rubric, commitments=data.get("commitments"),
            commitments_name=parts["commitments"][0] if "commitments" in parts else "",
            datapoints=data.get("datapoints"),
            datapoints_name=parts["datapoints"][0] if "datapoints" in parts else "",
            rounds=options.get("rounds"), phi=options.get("phi"), seed=options.get("seed"),
            evaluator=evaluator, ai=options.get("ai"),
            verifier=options.get("verifier") or Audit.Verifier.PROGRAMMATIC,
            ai_system_id=options.get("ai_system") or None,
            by=User.objects.filter(pk=options.get("by")).first())
    return AuditImportResult(created=1, updated=0, audit_id=audit.pk,
                             datapoints=n_datapoints, commitments=n_commitments)


def _whole(part: _Part) -> bytes:
    part.seek(0)
    return part.read()


def register() -> None:
    """Jobs of kind "audit" run ``audit_upload_import`` with their options."""
    import_kind_register(KIND, audit_upload_import, options=True)
