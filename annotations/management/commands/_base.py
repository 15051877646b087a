"""Shared bits of the management commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from django.core.management.base import CommandError

from annotations.models import Study
from annotations.services.progress import Progress

# Seconds between two progress lines of an import command.
PROGRESS_SECONDS = 2.0


def get_study(ref: str) -> Study:
    """A study by id or exact name."""
    study = Study.objects.filter(pk=int(ref)).first() if ref.isdigit() else None
    study = study or Study.objects.filter(name=ref).first()
    if study is None:
        raise CommandError(f"No study with id or name '{ref}'.")
    return study


def progress_printer(out: TextIO, label: str) -> Callable[[Progress], None]:
    """A progress sink for the import commands: one line per report on ``out`` (stderr),
    e.g. 'items.jsonl: reading 50,000 of about 200,000 rows'."""

    def show(p: Progress) -> None:
        about = "about " if p.phase == "reading" else ""
        out.write(f"{label}: {p.phase} {p.done:,} of {about}{p.total:,} rows\n")

    return show
