from django.core.management.base import CommandError

from annotations.core.commands import ExportCommand
from annotations.core.models import Study
from annotations.critique.services.exports import WHATS, critique_export


class Command(ExportCommand):
    help = ("Export a critique study: its outputs, its tasks (with timing) or its metrics "
            "(the latest analysis), as CSV or JSONL.")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--what", choices=WHATS, default="outputs")

    def check(self, study) -> None:
        if study.kind != Study.Kind.CRITIQUE:
            raise CommandError(f"Study '{study}' is not a critique study.")

    def export(self, study, out, opts) -> int:
        self.rows = f"{opts['what']} rows"
        return critique_export(study=study, what=opts["what"], out=out, fmt=opts["format"])
