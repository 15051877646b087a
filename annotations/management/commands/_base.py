"""Shared bits of the management commands."""

from __future__ import annotations

from django.core.management.base import CommandError

from annotations.models import Study


def get_study(ref: str) -> Study:
    """A study by id or exact name."""
    study = Study.objects.filter(pk=int(ref)).first() if ref.isdigit() else None
    study = study or Study.objects.filter(name=ref).first()
    if study is None:
        raise CommandError(f"No study with id or name '{ref}'.")
    return study
