import sys

from django.core.management.base import BaseCommand, CommandError

from annotations.core.commands import get_study
from annotations.core.models import Study
from annotations.critique.services.exports import WHATS, critique_export


class Command(BaseCommand):
    help = ("Export a critique study: its outputs, its tasks (with timing) or its metrics "
            "(the latest analysis), as CSV or JSONL.")

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("--what", choices=WHATS, default="outputs")
        parser.add_argument("--format", choices=["csv", "jsonl"], default="csv")
        parser.add_argument("--output", "-o", help="file to write (default: standard output)")

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        if study.kind != Study.Kind.CRITIQUE:
            raise CommandError(f"Study '{study}' is not a critique study.")
        if opts["output"]:
            with open(opts["output"], "w", newline="", encoding="utf-8") as out:
                n = critique_export(study=study, what=opts["what"], out=out, fmt=opts["format"])
            self.stderr.write(f"{n} {opts['what']} rows written to {opts['output']}")
        else:
            critique_export(study=study, what=opts["what"], out=sys.stdout, fmt=opts["format"])
