from django.core.management.base import BaseCommand, CommandError

from annotations.core.commands import get_study
from annotations.core.errors import ImportFailed
from annotations.core.models import Study
from annotations.critique.services.ai_outputs import critique_ai_outputs_import
from annotations.critique.services.questions import critique_questions_import


class Command(BaseCommand):
    help = ("Import a critique study's questions (CSV or JSONL) or AI outputs (JSONL); all or "
            "nothing, errors name file, line and field.")

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("path")
        parser.add_argument("--what", choices=["questions", "outputs"], default="questions")

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        if study.kind != Study.Kind.CRITIQUE:
            raise CommandError(f"Study '{study}' is not a critique study.")
        service = (critique_questions_import if opts["what"] == "questions"
                   else critique_ai_outputs_import)
        try:
            result = service(study=study, source=opts["path"])
        except ImportFailed as exc:
            raise CommandError("Nothing was imported:\n" + "\n".join(exc.errors)) from None
        self.stdout.write(self.style.SUCCESS(result.summary()))
