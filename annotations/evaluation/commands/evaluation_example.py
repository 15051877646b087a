"""``manage.py evaluation_example``: the offline search through the evaluation service on a
generated task where search pays, under uniform and targeted routing at several answer
budgets (``annotations.evaluation.services.example``; docs/evaluation-example.md)."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = ("Search classifiers of a generated 5-class task scored only through the "
            "evaluation service, against a gold-guided search and the default baseline, "
            "under uniform and targeted routing at several answer budgets, over seeds.")

    def add_arguments(self, parser):
        from annotations.evaluation.services.example import BUDGETS, DESIGNS

        parser.add_argument("--seeds", type=int, default=3)
        parser.add_argument("--candidates", type=int, default=16)
        parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS),
                            help="answers per study (a study of that many items, one "
                            "answer each)")
        parser.add_argument("--designs", nargs="+", default=list(DESIGNS),
                            choices=list(DESIGNS))
        parser.add_argument("--svg", type=Path, default=None, help="write the plot here")

    def handle(self, *args, **opts):
        from annotations.evaluation.services.example import markdown, run_seed, svg

        started = time.perf_counter()
        results = []
        for seed in range(opts["seeds"]):
            results += run_seed(seed, opts["candidates"], opts["budgets"], opts["designs"])
            self.stderr.write(f"seed {seed}: {time.perf_counter() - started:.1f} s")
        self.stdout.write(markdown(results))
        if opts["svg"]:
            opts["svg"].write_text(svg(results), encoding="utf-8")
        self.stderr.write(f"{opts['seeds']} seeds × {opts['candidates']} candidates × "
                          f"{len(opts['budgets'])} budgets × {len(opts['designs'])} designs: "
                          f"{time.perf_counter() - started:.1f} s")
