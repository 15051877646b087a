from django.core.management.base import BaseCommand, CommandError

from annotations.core.commands import (
    PROGRESS_SECONDS,
    get_study,
    progress_printer,
)
from annotations.core.errors import ImportFailed
from annotations.core.services.progress import progress_reporting
from annotations.partitioned.services.imports import items_import


class Command(BaseCommand):
    help = ("Import items into a study from CSV or JSONL (atomic; progress on stderr). "
            "Fields: id, text, options, stratum, gold (the right option's text) or "
            "gold_index (its 0-based index), quality_check, metadata.")

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("path")
        parser.add_argument("--format", choices=["csv", "jsonl"])
        parser.add_argument("--quiet", action="store_true",
                            help="no progress lines (on stderr) while importing")
        parser.add_argument("--update", action="store_true",
                            help="rewrite items whose ids already exist")

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        show = (lambda p: None) if opts["quiet"] else progress_printer(self.stderr, opts["path"])
        try:
            with progress_reporting(show, interval=PROGRESS_SECONDS):
                result = items_import(study=study, source=opts["path"], fmt=opts["format"],
                                      update=opts["update"])
        except (ImportFailed, FileNotFoundError) as exc:
            raise CommandError(f"Nothing imported.\n{exc}") from exc
        self.stdout.write(self.style.SUCCESS(f"Items: {result.summary()}"))
