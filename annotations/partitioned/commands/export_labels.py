import sys

from django.core.management.base import BaseCommand

from annotations.core.commands import get_study
from annotations.partitioned.services.exports import labels_export


class Command(BaseCommand):
    help = "Export every answered query of a study with its routing metadata (CSV or JSONL)."

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("--format", choices=["csv", "jsonl"], default="csv")
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        if opts["output"]:
            with open(opts["output"], "w", newline="", encoding="utf-8") as out:
                n = labels_export(study=study, out=out, fmt=opts["format"])
            self.stderr.write(f"{n} labels written to {opts['output']}")
        else:
            labels_export(study=study, out=sys.stdout, fmt=opts["format"])
