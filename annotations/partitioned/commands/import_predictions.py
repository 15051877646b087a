from django.core.management.base import BaseCommand, CommandError

from annotations.core.commands import (
    PROGRESS_SECONDS,
    get_study,
    progress_printer,
)
from annotations.core.errors import ImportFailed
from annotations.core.services.progress import progress_reporting
from annotations.partitioned.services.predictions import predictions_import


class Command(BaseCommand):
    help = (
        "Import AI predictions from CSV or JSONL (atomic; progress on stderr). Fields: "
        "item_id, system, prediction (the option's text; a number is read as its text) or "
        "prediction_index (0-based option index). Predictions naming no option are counted "
        "per system."
    )

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("path")
        parser.add_argument("--format", choices=["csv", "jsonl"])
        parser.add_argument("--quiet", action="store_true",
                            help="no progress lines (on stderr) while importing")
        parser.add_argument(
            "--update", action="store_true", help="replace predictions that already exist"
        )

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        show = (lambda p: None) if opts["quiet"] else progress_printer(self.stderr, opts["path"])
        try:
            with progress_reporting(show, interval=PROGRESS_SECONDS):
                result = predictions_import(study=study, source=opts["path"],
                                            fmt=opts["format"], update=opts["update"])
        except (ImportFailed, FileNotFoundError) as exc:
            raise CommandError(f"Nothing imported.\n{exc}") from exc
        self.stdout.write(self.style.SUCCESS(result.summary()))
