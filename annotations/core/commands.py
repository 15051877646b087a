"""Shared bits of the management commands."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from django.core.management.base import BaseCommand, CommandError

from annotations.core.errors import ImportFailed
from annotations.core.exports import FORMATS
from annotations.core.models import Study
from annotations.core.services.progress import Progress, progress_reporting

# Seconds between two progress lines of an import command.
PROGRESS_SECONDS = 2.0


def get_study(ref: str) -> Study:
    """A study by id or exact name; a name several studies bear (names are unique per
    creator only) is refused with their ids."""
    study = Study.objects.filter(pk=int(ref)).first() if ref.isdigit() else None
    if study is not None:
        return study
    named = list(Study.objects.filter(name=ref).select_related("created_by").order_by("pk")[:10])
    if len(named) > 1:
        ids = ", ".join(f"{s.pk} by {s.created_by or 'no one'}" for s in named)
        raise CommandError(f"{len(named)} studies are named '{ref}' (ids {ids}): give the id.")
    if not named:
        raise CommandError(f"No study with id or name '{ref}'.")
    return named[0]


def progress_printer(out: TextIO, label: str) -> Callable[[Progress], None]:
    """A progress sink for the import commands: one line per report on ``out`` (stderr),
    e.g. 'items.jsonl: reading 50,000 of about 200,000 rows'."""

    def show(p: Progress) -> None:
        about = "about " if p.phase == "reading" else ""
        out.write(f"{label}: {p.phase} {p.done:,} of {about}{p.total:,} rows\n")

    return show


class ExportCommand(BaseCommand):
    """A raw export: ``<study> [--format csv|jsonl] [--output FILE]`` (standard output by
    default; the count of rows to stderr when written to a file). A study type's command
    says what it writes in ``export`` (returns the count) and names its rows in ``rows``."""

    rows = "rows"

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("--format", choices=FORMATS, default="csv")
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")

    def check(self, study: Study) -> None:
        """Refuse a study this export does not apply to (``CommandError``), before any
        file is opened."""

    def export(self, study: Study, out: TextIO, opts: dict) -> int:
        raise NotImplementedError

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        self.check(study)
        if not opts["output"]:
            self.export(study, sys.stdout, opts)
            return
        with open(opts["output"], "w", newline="", encoding="utf-8") as out:
            n = self.export(study, out, opts)
        self.stderr.write(f"{n} {self.rows} written to {opts['output']}")


class ImportCommand(BaseCommand):
    """An import: ``<study> <path> [--format csv|jsonl] [--quiet]`` (and ``--update`` where
    ``update_help`` says what it does). All or nothing: on any problem nothing is imported
    and the command fails with every problem, named by file, line and field; progress lines
    go to stderr. A study type's command gives ``run`` (the import service's call, returning
    a result with ``summary()``)."""

    update_help: str | None = None
    formats: tuple[str, ...] = FORMATS
    summary_prefix = ""

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("path")
        if len(self.formats) > 1:
            parser.add_argument("--format", choices=self.formats)
        parser.add_argument("--quiet", action="store_true",
                            help="no progress lines (on stderr) while importing")
        if self.update_help:
            parser.add_argument("--update", action="store_true", help=self.update_help)

    def check(self, study: Study) -> None:
        """Refuse a study this import does not apply to (``CommandError``)."""

    def run(self, study: Study, opts: dict):
        raise NotImplementedError

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        self.check(study)
        show = (lambda p: None) if opts["quiet"] else progress_printer(self.stderr, opts["path"])
        try:
            with progress_reporting(show, interval=PROGRESS_SECONDS):
                result = self.run(study, opts)
        except (ImportFailed, FileNotFoundError) as exc:
            raise CommandError(f"Nothing imported.\n{exc}") from exc
        self.stdout.write(self.style.SUCCESS(self.summary_prefix + result.summary()))
