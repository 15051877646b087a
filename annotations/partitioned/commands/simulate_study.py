from django.core.management.base import BaseCommand, CommandError

from annotations.core.commands import get_study
from annotations.core.errors import DomainError
from annotations.partitioned.services.simulation import study_simulate


class Command(BaseCommand):
    help = ("Simulated specialists answer a study's queries through the real routing service, "
            "using the items' hidden gold labels as truth.")

    def add_arguments(self, parser):
        parser.add_argument("study", help="study id or name")
        parser.add_argument("--answers", type=int, help="stop after this many (default: all)")
        parser.add_argument("--error-rate", type=float, default=0.0)
        parser.add_argument("--unsure-rate", type=float, default=0.0)
        parser.add_argument("--per-class", type=int, default=1,
                            help="simulated specialists per class")
        parser.add_argument("--rate", type=float, default=0.0,
                            help="answers per second (0: as fast as possible)")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **opts):
        study = get_study(opts["study"])
        total = opts["answers"]

        def progress(done: int) -> None:
            self.stderr.write(f"\r{done}{'/' + str(total) if total else ''} answered", ending="")

        try:
            result = study_simulate(
                study=study, answers=total, error_rate=opts["error_rate"],
                unsure_rate=opts["unsure_rate"], per_class=opts["per_class"],
                rate=opts["rate"], seed=opts["seed"], progress=progress,
                recompute_every=10 if opts["rate"] else 500,
            )
        except DomainError as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write("")
        self.stdout.write(self.style.SUCCESS(
            f"{result.answered} answered ({result.yes} yes, {result.no} no, {result.unsure} "
            f"not sure) in {result.seconds:.1f} s."))
