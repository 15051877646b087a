"""``manage.py seed_demo``: the demo studies of every type (once) and their accounts, listed
as one block — by study, each account with its password, role and the page it starts on.
``dev.py serve`` has the block written to a file (``--accounts-file``) and prints it once
the site answers, after the server's start-up logs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from annotations.core.models import Study, User
from annotations.core.words import counted
from annotations.partitioned.services.demo import demo_seed, targeted_demo_seed


@dataclass(frozen=True)
class DemoAccount:
    study: Study
    user: str
    password: str
    role: str
    path: str  # the page the account starts on


def accounts_block(accounts: list[DemoAccount], base_url: str) -> str:
    """The demo accounts as one block of text: a heading per study (in the order first
    listed), then a line per account: ``user / password``, role, the page's full URL."""
    base = base_url.rstrip("/")
    logins = [f"{a.user} / {a.password}" for a in accounts]
    login_width = max(map(len, logins), default=0)
    role_width = max((len(a.role) for a in accounts), default=0)
    by_study: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for account, login in zip(accounts, logins, strict=True):
        names[account.study.pk] = account.study.name
        by_study.setdefault(account.study.pk, []).append(
            f"  {login:{login_width}}  {account.role:{role_width}}  {base}{account.path}")
    lines = [f"Demo accounts (user / password) — log in at {base}/"]
    for pk, rows in by_study.items():
        lines += ["", f"#{pk} {names[pk]}", *rows]
    return "\n".join(lines) + "\n"


def _staff_rows(study: Study, *, researcher: bool = True) -> list[DemoAccount]:
    from annotations.core.views import study_page_url

    rows = [DemoAccount(study, "admin", "admin", "researcher", study_page_url(study))]
    rows.append(DemoAccount(study, "manager", "manager", "manager",
                            reverse("dashboard", args=[study.pk])))
    return rows if researcher else rows[1:]


class Command(BaseCommand):
    help = ("Create the demo accounts and studies of every type (once), simulate some "
            "answers and list the accounts.")

    def add_arguments(self, parser):
        parser.add_argument("--items", type=int, default=3000)
        parser.add_argument("--answers", type=int, default=1500)
        parser.add_argument("--base-url", default="http://127.0.0.1:8000",
                            help="The site's address, for the accounts' page URLs.")
        parser.add_argument("--accounts-file", type=Path,
                            help="Write the accounts block to this file instead of printing "
                                 "it (dev.py serve prints it once the site answers).")

    def handle(self, *args, **opts):
        if not settings.OVERSIGHT_DEMO_ALLOWED:
            raise CommandError(
                "seed_demo creates accounts with known passwords (admin/admin …) and refuses "
                f"to run under production settings ({settings.SETTINGS_MODULE}).")
        self.stderr.write("Seeding the demo study (first run takes a little while)…")
        study, accounts, result = demo_seed(n_items=opts["items"], answers=opts["answers"])
        if result:
            answered = counted(result.answered, "query")
            self.stderr.write(f"Simulated specialists answered {answered} in "
                              f"{result.seconds:.1f} s.")
        self.stdout.write(self.style.SUCCESS(f"Demo study #{study.pk}: {study.name}"))
        targeted = targeted_demo_seed(n_items=min(800, opts["items"]),
                                      answers=min(400, opts["answers"]))
        self.stdout.write(self.style.SUCCESS(f"Demo study #{targeted.pk}: {targeted.name}"))
        rows = _staff_rows(study)
        label = reverse("label", args=[study.pk])
        rows += [DemoAccount(study, user, password, role, label)
                 for role, user, password in accounts.credentials
                 if role.startswith("specialist")]
        targeted_label = reverse("label", args=[targeted.pk])
        rows += _staff_rows(targeted)
        rows += [DemoAccount(targeted, user, password, role, targeted_label)
                 for role, user, password in accounts.credentials
                 if role.startswith("specialist")]
        assisted, assisted_rows = self._assisted()
        self.stdout.write(self.style.SUCCESS(f"Demo study #{assisted.pk}: {assisted.name}"))
        rows += assisted_rows
        rows += self._critique_demo()
        self._audit_demo(study)
        block = accounts_block(rows, opts["base_url"])
        if opts["accounts_file"]:
            opts["accounts_file"].write_text(block, encoding="utf-8")
        else:
            self.stdout.write("\n" + block)

    def _assisted(self) -> tuple[Study, list[DemoAccount]]:
        """The assisted demo beside the partitioned one (once): the same admin and manager,
        and two raters for visitors, one in the blind arm and one in an assisted arm."""
        from annotations.assisted.services.demo import assisted_demo_seed, demo_raters_place
        from annotations.core.models import StudyMembership
        from annotations.partitioned.services.demo import _user

        roles = StudyMembership.Role
        members = {roles.RESEARCHER: [User.objects.get(username="admin")],
                   roles.MANAGER: [User.objects.get(username="manager")]}
        self.stderr.write("Seeding the assisted demo study…")
        study, _ = assisted_demo_seed(members=members)
        placed = demo_raters_place(study=study, blind=_user("rater-blind", "rater-blind"),
                                   assisted=_user("rater-assisted", "rater-assisted"))
        rate = reverse("rate", args=[study.pk])
        rows = _staff_rows(study)
        for user, arm in placed.items():
            kind = "assisted arm" if arm.components else "blind arm"
            rows.append(DemoAccount(study, user.username, user.username,
                                    f"rater, {kind} ({arm.name})", rate))
        return study, rows

    def _critique_demo(self) -> list[DemoAccount]:
        """The recursive-critique demo studies: an annotator per level each."""
        from annotations.critique.services.demo import critique_demo_seed
        from annotations.critique.services.task_view import level_name

        demo = critique_demo_seed()
        rows = []
        for study in demo.studies:
            self.stdout.write(self.style.SUCCESS(f"Demo study #{study.pk}: {study.name}"))
            rows += _staff_rows(study)
            work = reverse("critique-work", args=[study.pk])
            for role, user, password, s, level in demo.credentials:
                if s == study:
                    words = level_name(level, plural=True).lower()
                    rows.append(DemoAccount(study, user, password,
                                            f"{role}, level {level} ({words})", work))
        return rows

    def _audit_demo(self, study) -> None:
        """Two audited AI raters of the partitioned demo study, one passing, one failing
        (issue 19; once)."""
        from annotations.audit.services.demo import audit_demo_seed

        for audit in audit_demo_seed(study):
            self.stdout.write(self.style.SUCCESS(
                f"Demo audit #{audit.pk}: {audit.evaluator_name} — {audit.successes}/"
                f"{audit.total} successes"))
