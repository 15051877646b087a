"""``manage.py check_estimates [study ids…] [--no-repair]``: hold partitioned studies'
maintained statistics to the full recompute (``services.consistency``; without ids, those
touched since their last check), print each result, and exit 1 when any differed."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotations.partitioned.services.consistency import tallies_check_all


class Command(BaseCommand):
    help = ("Compare every partitioned study's estimates from its maintained statistics with "
            "the full recompute from its answers (to 1e-9); a difference is logged, reported "
            "on /healthz and the dashboard, and repaired by a rebuild unless --no-repair.")

    def add_arguments(self, parser):
        parser.add_argument("study_ids", nargs="*", type=int)
        parser.add_argument("--no-repair", action="store_true",
                            help="report a difference without rebuilding the statistics")

    def handle(self, *args, **opts):
        checks = tallies_check_all(study_ids=opts["study_ids"] or None,
                                   repair=not opts["no_repair"])
        for check in checks:
            verdict = "same" if check.ok else f"DIFFERENT ({check.detail})"
            self.stdout.write(f"study {check.study_id}: {verdict}; largest relative "
                              f"difference {check.difference:.3g}")
        differed = [c.study_id for c in checks if not c.ok]
        self.stdout.write(f"{len(checks)} studies checked, {len(differed)} differed")
        if differed:
            raise CommandError(f"studies {differed} differed from the full recompute")
