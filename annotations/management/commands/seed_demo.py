from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotations.services.demo import demo_seed


class Command(BaseCommand):
    help = "Create the demo accounts and study (once) and simulate some answers."

    def add_arguments(self, parser):
        parser.add_argument("--items", type=int, default=3000)
        parser.add_argument("--answers", type=int, default=1500)

    def handle(self, *args, **opts):
        if not settings.OVERSIGHT_DEMO_ALLOWED:
            raise CommandError(
                "seed_demo creates accounts with known passwords (admin/admin …) and refuses "
                f"to run under production settings ({settings.SETTINGS_MODULE}).")
        self.stderr.write("Seeding the demo study (first run takes a little while)…")
        study, accounts, result = demo_seed(n_items=opts["items"], answers=opts["answers"])
        if result:
            self.stderr.write(f"Simulated specialists answered {result.answered} queries in "
                              f"{result.seconds:.1f} s.")
        self.stdout.write(self.style.SUCCESS(f"Demo study #{study.pk}: {study.name}"))
        self.stdout.write("Accounts (user / password):")
        for role, user, password in accounts.credentials:
            self.stdout.write(f"  {role:28s} {user} / {password}")
