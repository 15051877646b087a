"""``manage.py coverage_tables FAMILY [TABLE OPTIONS]``: the coverage tables of
docs/coverage.md that the estimator families compute (each family's
``estimators.<family>.coverage.main``, which takes the same options), run from the
project's one command line. ``--write docs/coverage.md`` puts the table's section in place
(``estimators.numerics.coverage_doc``); without it the section is printed. The partitioned
ML grids are ``manage.py validate_estimators --grid``.

    .venv/bin/python manage.py coverage_tables assisted --reliance --write docs/coverage.md
    .venv/bin/python manage.py coverage_tables critique --help
"""

from __future__ import annotations

import argparse
import contextlib
import importlib

from django.core.management.base import BaseCommand, CommandError

FAMILIES = ("partitioned", "assisted", "critique", "nodata")


class Command(BaseCommand):
    help = ("Compute one coverage table of docs/coverage.md: FAMILY is one of "
            f"{', '.join(FAMILIES)}; the options that follow are the family's own "
            "(`coverage_tables FAMILY --help` lists its tables; --write PATH puts the "
            "section in place).")

    def add_arguments(self, parser):
        parser.add_argument("family", choices=FAMILIES)
        parser.add_argument("options", nargs=argparse.REMAINDER,
                            help="the family's options, e.g. --reliance --write "
                                 "docs/coverage.md")

    def handle(self, *args, **o):
        main = importlib.import_module(f"estimators.{o['family']}.coverage").main
        with contextlib.redirect_stdout(self.stdout):
            try:
                code = main(list(o["options"]))
            except SystemExit as exc:  # argparse: --help, or options it refuses
                if exc.code:
                    raise CommandError(f"coverage_tables {o['family']}: see the message "
                                       "above") from exc
                return
        if code:
            raise CommandError(f"coverage_tables {o['family']} ended with {code}")


__all__ = ["FAMILIES", "Command"]
