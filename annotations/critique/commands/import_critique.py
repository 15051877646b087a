from django.core.management.base import CommandError

from annotations.core.commands import ImportCommand
from annotations.core.models import Study
from annotations.critique.services.ai_outputs import critique_ai_outputs_import
from annotations.critique.services.questions import critique_questions_import


class Command(ImportCommand):
    help = ("Import a critique study's questions (CSV or JSONL) or AI outputs (JSONL); all or "
            "nothing, errors name file, line and field.")

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--what", choices=["questions", "outputs"], default="questions")

    def check(self, study) -> None:
        if study.kind != Study.Kind.CRITIQUE:
            raise CommandError(f"Study '{study}' is not a critique study.")

    def run(self, study, opts):
        if opts["what"] == "outputs":
            return critique_ai_outputs_import(study=study, source=opts["path"])
        return critique_questions_import(study=study, source=opts["path"], fmt=opts["format"])
