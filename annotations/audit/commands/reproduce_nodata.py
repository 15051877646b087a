"""``manage.py reproduce_nodata``: the paper's synthetic experiments (Tables 2 and 3) through
``estimators.nodata.reproduce`` — the same options as ``python -m estimators.nodata.reproduce``
and the same JSON (docs/nodata.md)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Reproduce the No-Data Algorithm paper's Tables 2 and 3 on the shipped data "
            "(estimators.nodata.reproduce) and write the JSON to --json PATH.")

    def add_arguments(self, parser):
        parser.add_argument("--json", type=Path, required=True, help="write the results here")
        parser.add_argument("--seeds", type=int, default=20, help="number of seeds (default 20)")
        parser.add_argument("--rounds", type=int, default=3, help="EV rounds r (default 3)")
        parser.add_argument("--markdown", action="store_true", help="print the docs tables")

    def handle(self, *args, **opts):
        from estimators.nodata.reproduce import markdown, reproduce

        try:
            result = reproduce(seeds=opts["seeds"], rounds=opts["rounds"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        path: Path = opts["json"]
        try:
            path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n",
                            encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--json {path}: {exc.strerror or exc}") from None
        if opts["markdown"]:
            self.stdout.write(markdown(result))
        self.stderr.write(f"{opts['seeds']} seeds, r = {opts['rounds']}: "
                          f"{result['meta']['elapsed_s']:.2f} s → {path}")
