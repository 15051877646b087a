"""``manage.py evaluation_example``: the offline digits search through the evaluation service
(``annotations.evaluation.services.example``; docs/evaluation-example.md)."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = ("Search classifiers of scikit-learn's digits scored only through the evaluation "
            "service, against a gold-guided search and the default baseline, over seeds.")

    def add_arguments(self, parser):
        parser.add_argument("--seeds", type=int, default=3)
        parser.add_argument("--candidates", type=int, default=16)
        parser.add_argument("--svg", type=Path, default=None, help="write the plot here")

    def handle(self, *args, **opts):
        from annotations.evaluation.services.example import markdown, run_seed, svg

        started = time.perf_counter()
        results = [run_seed(seed, opts["candidates"]) for seed in range(opts["seeds"])]
        self.stdout.write(markdown(results))
        if opts["svg"]:
            opts["svg"].write_text(svg(results), encoding="utf-8")
        self.stderr.write(f"{opts['seeds']} seeds × {opts['candidates']} candidates: "
                          f"{time.perf_counter() - started:.1f} s")
