from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotations.partitioned.services.demo import demo_seed


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
        assisted, _ = self._assisted(accounts)
        self.stdout.write(self.style.SUCCESS(f"Demo study #{assisted.pk}: {assisted.name}"))
        self.stdout.write("Accounts (user / password):")
        for role, user, password in accounts.credentials:
            self.stdout.write(f"  {role:28s} {user} / {password}")
        self._critique_demo()
        self._audit_demo(study)

    def _critique_demo(self) -> None:
        """The recursive-critique demo studies (issue 10)."""
        from annotations.critique.services.demo import critique_demo_seed

        demo = critique_demo_seed()
        for study in demo.studies:
            self.stdout.write(self.style.SUCCESS(f"Demo study #{study.pk}: {study.name}"))
        for role, user, password in demo.credentials:
            self.stdout.write(f"  {role:28s} {user} / {password}")


    def _assisted(self, accounts):
        """The assisted demo beside the partitioned one (once; annotations.services.
        demo_assisted): the same admin and manager, and a rater account for visitors."""
        from annotations.assisted.services.demo import assisted_demo_seed
        from annotations.core.models import StudyMembership, User
        from annotations.partitioned.services.demo import _user

        rater = _user("rater", "rater")
        accounts.credentials.append(("rater (assisted study)", "rater", "rater"))
        roles = StudyMembership.Role
        members = {roles.RESEARCHER: [User.objects.get(username="admin")],
                   roles.MANAGER: [User.objects.get(username="manager")],
                   roles.ANNOTATOR: [rater]}
        self.stderr.write("Seeding the assisted demo study…")
        return assisted_demo_seed(members=members)

    def _audit_demo(self, study) -> None:
        """Two audited AI raters of the partitioned demo study, one passing, one failing
        (issue 19; once)."""
        from annotations.audit.services.demo import audit_demo_seed

        for audit in audit_demo_seed(study):
            self.stdout.write(self.style.SUCCESS(
                f"Demo audit #{audit.pk}: {audit.evaluator_name} — {audit.successes}/"
                f"{audit.total} successes"))
