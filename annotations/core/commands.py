"""Shared bits of the management commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from django.core.management.base import CommandError

from annotations.core.models import Study
from annotations.core.services.progress import Progress

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
