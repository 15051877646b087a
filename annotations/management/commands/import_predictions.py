from django.core.management.base import BaseCommand, CommandError

from annotations.errors import ImportFailed
from annotations.management.commands._base import get_study
from assistants.services import predictions_import


class Command(BaseCommand):
    help = (
        "Import AI predictions from CSV or JSONL (atomic). Fields: item_id, system, "
        "prediction (option index from 0 or option text)."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("path")
        parser.add_argument("--format", choices=["csv", "jsonl"])
        parser.add_argument(
            "--update", action="store_true", help="replace predictions that already exist"
        )

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        try:
            result = predictions_import(
                study=study, source=opts["path"], fmt=opts["format"], update=opts["update"]
            )
        except (ImportFailed, FileNotFoundError) as exc:
            raise CommandError(f"Nothing imported.\n{exc}") from exc
        created = (
            f" New systems: {', '.join(result.systems_created)}." if result.systems_created else ""
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"{result.created} predictions created, {result.updated} updated.{created}"
            )
        )
