from django.core.management.base import BaseCommand, CommandError

from annotations.errors import ImportFailed
from annotations.management.commands._base import get_study
from annotations.services.imports import items_import


class Command(BaseCommand):
    help = ("Import items into a study from CSV or JSONL (atomic). Fields: id, text, options, "
            "stratum, gold, quality_check, metadata.")

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("path")
        parser.add_argument("--format", choices=["csv", "jsonl"])
        parser.add_argument("--update", action="store_true",
                            help="rewrite items whose ids already exist")

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        try:
            result = items_import(study=study, source=opts["path"], fmt=opts["format"],
                                  update=opts["update"])
        except (ImportFailed, FileNotFoundError) as exc:
            raise CommandError(f"Nothing imported.\n{exc}") from exc
        self.stdout.write(self.style.SUCCESS(f"Items: {result.summary()}"))
