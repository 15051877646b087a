"""Study life cycle: create with classes, add members (creating their accounts), open (routes
items), close. Opening and closing happen only here: forms never write ``Study.status``."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotations.core.errors import InvalidStudy, NotPermitted
from annotations.core.events import STUDY_EVENT_KINDS, StudyEvent
from annotations.core.models import Study, StudyClass, StudyMembership, User
from annotations.core.selectors import study_name_taken
from annotations.core.services.notices import study_notice


@transaction.atomic
def study_create(*, name: str, classes: Sequence[str | tuple[str, str]], description: str = "",
                 queries_per_item: int = 1, lease_minutes: int = 10,
                 shuffle_options: bool = True, gold_rate: float = 0.0,
                 seed: int | None = None,
                 interval_method: str = Study.IntervalMethod.AUTO,
                 created_by: User | None = None) -> Study:
    """Create a draft study with K named classes (name or (name, description) pairs)."""
    extra = {"seed": seed} if seed is not None else {}
    study = Study(
        name=name, description=description, queries_per_item=queries_per_item,
        lease_minutes=lease_minutes, shuffle_options=shuffle_options, gold_rate=gold_rate,
        interval_method=interval_method, created_by=created_by, **extra,
    )
    return study_insert(study=study, classes=classes)


def study_name_check(*, study: Study) -> None:
    """InvalidStudy unless the study has a name its creator uses for no other study (names
    are unique per creator: another researcher's names are neither refused nor told)."""
    if not study.name.strip():
        raise InvalidStudy("name: a study needs a name.", field="name")
    if study_name_taken(name=study.name, created_by=study.created_by, exclude_pk=study.pk):
        raise InvalidStudy(f"name: you already have a study named “{study.name}”.",
                           field="name")


@transaction.atomic
def study_insert(*, study: Study, classes: Sequence[str | tuple[str, str]]) -> Study:
    """Save the unsaved ``study`` as a draft with its K classes, in order (class 0 first).

    ``study_create`` builds the instance from arguments; the admin's add form builds it from
    the form. Refused: fewer than 2 classes, repeated or empty names, a name its creator
    already uses, settings out of range."""
    if study.pk is not None:
        raise InvalidStudy(f"Study '{study}' is already saved.", field="classes")
    study_name_check(study=study)
    if len(classes) < 2:
        raise InvalidStudy(f"A study needs at least 2 classes (K = {len(classes)}).",
                           field="classes")
    if study.queries_per_item < 1:
        raise InvalidStudy("queries_per_item must be at least 1.", field="queries_per_item")
    if not 0.0 <= study.gold_rate <= 0.5:
        raise InvalidStudy("gold_rate must be between 0 and 0.5.", field="gold_rate")
    if study.interval_method not in Study.IntervalMethod.values:
        raise InvalidStudy(f"interval_method must be one of "
                           f"{', '.join(Study.IntervalMethod.values)}.", field="interval_method")
    pairs = [(c, "") if isinstance(c, str) else c for c in classes]
    names = [n.strip() for n, _ in pairs]
    if not all(names):
        raise InvalidStudy("Every class needs a name.", field="classes")
    if len({n.casefold() for n in names}) != len(names):
        raise InvalidStudy("Class names must be distinct.", field="classes")
    study.status = Study.Status.DRAFT
    study.save()
    StudyClass.objects.bulk_create(
        StudyClass(study=study, index=i, name=n, description=d.strip())
        for i, (n, (_, d)) in enumerate(zip(names, pairs, strict=True))
    )
    return study


def membership_add(*, study: Study, user: User, role: str,
                   class_index: int | None = None) -> StudyMembership:
    study_class = None
    if role == StudyMembership.Role.SPECIALIST:
        if class_index is None:
            raise InvalidStudy("A specialist needs a class.", field="class_index")
        study_class = study.classes.filter(index=class_index).first()
        if study_class is None:
            raise InvalidStudy(f"Study '{study}' has no class {class_index}.",
                               field="class_index")
    membership, _ = StudyMembership.objects.get_or_create(
        study=study, user=user, role=role, defaults={"study_class": study_class}
    )
    if role == StudyMembership.Role.RESEARCHER:
        researchers_staff_ensure(study=study)
    return membership


def researchers_staff_ensure(*, study: Study) -> int:
    """Researchers configure studies in the admin, which needs staff status: grant it to
    every researcher of ``study`` (the admin inline calls this after saving members)."""
    return User.objects.filter(
        memberships__study=study, memberships__role=StudyMembership.Role.RESEARCHER,
        is_staff=False,
    ).update(is_staff=True)


def study_event_record(*, study: Study, kind: str, by: User | None = None,
                       detail: dict | None = None) -> StudyEvent:
    """Add one row to the study's audit trail (``StudyEvent``) in the caller's transaction.
    ``kind`` must be registered (``study_event_kind_register``; opened, items_routed,
    closed, threshold_changed are built in); ``by`` is the acting user, None for the
    system."""
    if kind not in STUDY_EVENT_KINDS:
        raise InvalidStudy(f"Unknown study event kind '{kind}'; register it first.",
                           field="kind")
    return StudyEvent.objects.create(study=study, kind=kind, actor=by, detail=detail or {})


_OPENED_WORDS: dict[str, tuple[str, str]] = {}
_OPENERS: dict[str, Callable[..., int]] = {}


_CREATORS: dict[str, tuple[Callable[..., Study], frozenset[str]]] = {}


def study_creator_register(kind: str, create: Callable[..., Study],
                           settings: frozenset[str]) -> None:
    """Make :func:`study_create_any` create studies of ``kind`` with ``create(name=,
    created_by=, **settings)``, which takes exactly ``settings`` (each study type registers
    its ``*_study_create`` from its ``hooks``)."""
    _CREATORS[kind] = (create, frozenset(settings))


@transaction.atomic
def study_create_any(*, kind: str, name: str, by: User, settings: dict) -> Study:
    """A draft study of ``kind`` made by ``by`` (an active staff account or a superuser),
    who becomes its researcher (a superuser sees every study already). Refused with the
    field named: an unknown kind, a setting the type does not take, and whatever the
    type's own creation refuses (a name in use, fewer than 2 classes …)."""
    if not (by.is_active and (by.is_staff or by.is_superuser)):
        raise NotPermitted("Only staff accounts create studies.")
    if kind not in _CREATORS:
        raise InvalidStudy(f"kind: one of {', '.join(sorted(_CREATORS))}, not '{kind}'.",
                           field="kind")
    create, known = _CREATORS[kind]
    unknown = sorted(set(settings) - known)
    if unknown:
        raise InvalidStudy(f"settings: a {kind} study takes {', '.join(sorted(known))}; "
                           f"not {', '.join(unknown)}.", field="settings")
    study = create(name=name, created_by=by, **settings)
    if not by.is_superuser and not StudyMembership.objects.filter(
            study=study, user=by, role=StudyMembership.Role.RESEARCHER).exists():
        membership_add(study=study, user=by, role=StudyMembership.Role.RESEARCHER)
    return study


def study_opener_register(kind: str, opener: Callable[..., int],
                          made: tuple[str, str] = ("item", "routed")) -> None:
    """Make :func:`study_open` open studies of ``kind`` with ``opener(study=, by=)`` (each
    study type registers its ``*_study_open`` from its ``hooks``; idempotent). ``made``:
    what the number it returns counts, as (noun, participle) — ("task", "made") reads
    "3 tasks made" (:func:`study_opened_words`)."""
    _OPENERS[kind] = opener
    _OPENED_WORDS[kind] = made


def study_opened_words(kind: str, made: int) -> str:
    """What opening a study of ``kind`` made, in words: "3 items routed", "1 task made"."""
    from annotations.core.words import counted

    noun, participle = _OPENED_WORDS.get(kind, ("item", "routed"))
    return f"{counted(made, noun)} {participle}"


def study_open(*, study: Study, by: User | None = None) -> int:
    """Open a draft (or re-open an open) study of any type through its type's opener, which
    makes its first tasks and returns how many (partitioned: ``partitioned_study_open``,
    items routed; assisted: ``assisted_study_open``, sentences routed; critique:
    ``critique_study_open``, its level-0 tasks). Every opener goes through
    :func:`study_opening` (lock, refusals, audit)."""
    return _OPENERS[study.kind](study=study, by=by)


@transaction.atomic
def study_opening(*, study: Study, by: User | None, check: Callable[[Study], None],
                  first_tasks: Callable[[Study], int], counted: str = "routed") -> int:
    """The opening every study type shares; its ``*_open`` service passes what differs.
    In one transaction: the study's row locked and ``study`` refreshed from it; a closed
    study refused (it stays closed); the type's ``check`` (raises InvalidStudy); status
    open, the first opening time kept; ``first_tasks`` makes the type's tasks and returns
    how many; audited — ``opened`` from a draft, ``items_routed`` when an open study got
    new tasks (nothing when it got none) — with ``{counted: n, "from": status before}``."""
    locked = Study.objects.select_for_update().get(pk=study.pk)
    study.status, study.opened_at = locked.status, locked.opened_at
    if study.status == Study.Status.CLOSED:
        raise InvalidStudy(f"Study '{study}' is closed; a closed study stays closed.",
                           field="status")
    check(study)
    was = study.status
    study.status = Study.Status.OPEN
    study.opened_at = study.opened_at or timezone.now()
    study.save(update_fields=["status", "opened_at"])
    made = first_tasks(study)
    if was != Study.Status.OPEN or made:
        study_event_record(study=study, kind="opened" if was != Study.Status.OPEN
                           else "items_routed", by=by, detail={counted: made, "from": was})
    if was != Study.Status.OPEN:
        study_notice(study.pk, "study.opened", {"status": "open", counted: made})
    return made


@transaction.atomic
def study_close(*, study: Study, by: User | None = None) -> None:
    """Close a study of any type: no task is offered or answered any more. Closing twice is
    refused. Audited (``closed``) in the same transaction."""
    locked = Study.objects.select_for_update().get(pk=study.pk)
    study.status, study.closed_at = locked.status, locked.closed_at
    if study.status == Study.Status.CLOSED:
        raise InvalidStudy(f"Study '{study}' is already closed.", field="status")
    was = study.status
    study.status = Study.Status.CLOSED
    study.closed_at = timezone.now()
    study.save(update_fields=["status", "closed_at"])
    study_event_record(study=study, kind="closed", by=by, detail={"from": was})
    study_notice(study.pk, "study.closed", {"status": "closed", "from": was})


# --- member accounts created by researchers ------------------------------------------------
USERNAME_MAX = User._meta.get_field("username").max_length
PASSWORD_ALPHABET = "abcdefghjkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/l/I


@dataclass(frozen=True)
class NewMember:
    """One person to add: a user name (new or already a member of one of your studies), a
    role and, for specialists, the class index."""

    username: str
    role: str
    class_index: int | None = None
    email: str = ""


@dataclass(frozen=True)
class MemberAdded:
    membership: StudyMembership
    password: str | None  # the new account's password: returned once, stored only hashed
    invitation: str | None = None  # the path of a link to choose a password instead


# The roles each study type uses, with the words its Members page says them in: registered
# by each type's ``hooks`` (partitioned: specialists; assisted: raters; critique: annotators;
# every type: managers, reviewers and researchers).
_ROLES: dict[str, list[tuple[str, str]]] = {}


EVERY_TYPE_ROLES = [(StudyMembership.Role.MANAGER, "Manager (reads the dashboard)"),
                    (StudyMembership.Role.REVIEWER, "Reviewer (accepts or rejects answers)"),
                    (StudyMembership.Role.RESEARCHER, "Researcher (configures the study)")]


def study_roles_register(kind: str, worker: tuple[str, str]) -> None:
    """The role of the people who do a study type's work, with its words (e.g. raters:
    ``(ANNOTATOR, "Rater (rates sentences)")``); managers and researchers come with it."""
    _ROLES[kind] = [worker, *EVERY_TYPE_ROLES]


def study_roles(kind: str) -> list[tuple[str, str]]:
    """(role, label) of every role a study of ``kind`` uses."""
    return _ROLES.get(kind, EVERY_TYPE_ROLES)


def invitation_path(user: User) -> str:
    """A link's path where ``user`` chooses their password (instead of the one handed out):
    Django's password-reset token, so it works once, until the password changes, and for
    PASSWORD_RESET_TIMEOUT (3 days)."""
    from django.contrib.auth.tokens import default_token_generator
    from django.urls import reverse
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    return reverse("invitation", args=[urlsafe_base64_encode(force_bytes(user.pk)),
                                       default_token_generator.make_token(user)])


def researcher_may_configure(*, user: User, study: Study) -> bool:
    return user.is_superuser or StudyMembership.objects.filter(
        study=study, user=user, role=StudyMembership.Role.RESEARCHER).exists()


def accounts_visible_to(*, user: User) -> QuerySet[User]:
    """Accounts a researcher may see and add: members of the studies they research
    (superusers: all). Nobody else's name, role or study leaks through the member pages."""
    if user.is_superuser:
        return User.objects.all()
    studies = StudyMembership.objects.filter(
        user=user, role=StudyMembership.Role.RESEARCHER).values("study_id")
    return User.objects.filter(memberships__study_id__in=studies).distinct()


def _password_new() -> str:
    """14 characters of the 55 of PASSWORD_ALPHABET (81 bits), from one random number."""
    n, letters = secrets.randbelow(len(PASSWORD_ALPHABET) ** 14), []
    for _ in range(14):
        n, i = divmod(n, len(PASSWORD_ALPHABET))
        letters.append(PASSWORD_ALPHABET[i])
    return "".join(letters)


TAKEN = "The user name '{}' is taken; choose another one."  # look-alikes too


@transaction.atomic
def members_add(*, study: Study, members: Sequence[NewMember], by: User) -> list[MemberAdded]:
    """Add people to ``study`` (all or nothing), creating an account for each new user name
    with a random one-time password that is returned once and stored only hashed
    (``accounts.OneTimePasswordHasher``: it signs in once, so no slow hash; a paste of
    10 000 names is a few queries and no per-name hashing cost), and its invitation link.

    ``by`` must research the study (or be a superuser). A name a reader cannot tell from an
    existing account's (``usernames.username_key``: case, NFKC, look-alike letters such as
    a Cyrillic а) is that account: added if ``by`` may see it (``accounts_visible_to``) and
    it is the same name up to case, refused otherwise with the same words as a name in use,
    so no account outside ``by``'s studies is revealed or changed. Two pasted names that look
    alike are refused."""
    from annotations.core.accounts import one_time_password_encode
    from annotations.core.selectors import username_look_alikes
    from annotations.core.usernames import username_key

    if not researcher_may_configure(user=by, study=study):
        raise NotPermitted("Only the study's researchers may add its members.")
    classes = {c.index: c for c in study.classes.all()}
    roles = {role for role, _ in study_roles(study.kind)}
    validate = UnicodeUsernameValidator()
    checked: list[tuple[NewMember, str, str]] = []  # (member, user name, key)
    seen: dict[str, str] = {}
    for m in members:
        username = m.username.strip()
        if len(username) > USERNAME_MAX:
            raise InvalidStudy(f"User name '{username[:40]}…' is longer than {USERNAME_MAX} "
                               f"characters.", field="username")
        try:
            validate(username)
        except ValidationError as exc:
            raise InvalidStudy(f"User name '{username}': {exc.messages[0]}",
                               field="username") from None
        key = username_key(username)
        if key in seen:
            again = ("is given twice" if seen[key].casefold() == username.casefold()
                     else f"looks like '{seen[key]}', given too")
            raise InvalidStudy(f"User name '{username}' {again}.", field="username")
        seen[key] = username
        if m.role not in roles:
            raise InvalidStudy(f"{username}: a {study.get_kind_display()} study has no role "
                               f"'{m.role}'.", field="role")
        is_specialist = m.role == StudyMembership.Role.SPECIALIST
        if is_specialist and m.class_index not in classes:
            raise InvalidStudy(f"{username}: a specialist needs one of this study's classes.",
                               field="class_index")
        if not is_specialist and m.class_index is not None:
            raise InvalidStudy(f"{username}: only specialists have a class.",
                               field="class_index")
        checked.append((m, username, key))
    existing = username_look_alikes(names=[username for _, username, _ in checked])
    visible = set(accounts_visible_to(user=by).filter(
        pk__in=[u.pk for u in existing.values()]).values_list("pk", flat=True))
    for _, username, key in checked:
        user = existing.get(key)
        if user is not None and (
                user.pk not in visible or user.is_superuser and not by.is_superuser
                or user.username.casefold() != username.casefold()):
            raise InvalidStudy(TAKEN.format(username), field="username")
    held = set(StudyMembership.objects.filter(
        study=study, user_id__in=[u.pk for u in existing.values()])
        .values_list("user_id", "role"))
    for m, username, key in checked:
        user = existing.get(key)
        if user is not None and (user.pk, m.role) in held:
            raise InvalidStudy(f"{username} is already a {m.role} of this study.",
                               field="username")
    passwords: dict[str, str] = {}
    new_users = []
    for m, username, key in checked:
        if key not in existing:
            passwords[key] = _password_new()
            new_users.append(User(username=username, username_key=key,
                                  email=m.email.strip(), password_must_change=True,
                                  password=one_time_password_encode(passwords[key])))
    for user in User.objects.bulk_create(new_users, batch_size=500):
        existing[user.username_key] = user
    memberships = StudyMembership.objects.bulk_create([
        StudyMembership(study=study, user=existing[key], role=m.role,
                        study_class=classes[m.class_index]
                        if m.role == StudyMembership.Role.SPECIALIST else None)
        for m, _, key in checked], batch_size=500)
    added = [MemberAdded(membership=membership, password=passwords.get(key),
                         invitation=invitation_path(membership.user) if key in passwords
                         else None)
             for membership, (_, _, key) in zip(memberships, checked, strict=True)]
    researchers_staff_ensure(study=study)
    return added


@transaction.atomic
def member_password_reset(*, study: Study, user: User, by: User) -> str:
    """Give ``user`` a new random password (returned once). ``by`` must research ``study``;
    ``user`` must be a member of it, not staff or superuser, and member of no study ``by``
    does not research — a researcher never takes over an account used elsewhere."""
    if not researcher_may_configure(user=by, study=study):
        raise NotPermitted("Only the study's researchers may reset its members' passwords.")
    if not StudyMembership.objects.filter(study=study, user=user).exists():
        raise NotPermitted(f"{user} is not a member of this study.")
    if not by.is_superuser:
        mine = StudyMembership.objects.filter(
            user=by, role=StudyMembership.Role.RESEARCHER).values("study_id")
        elsewhere = StudyMembership.objects.filter(user=user).exclude(study_id__in=mine)
        if user.is_staff or user.is_superuser or elsewhere.exists():
            raise NotPermitted(f"{user}'s account is used outside your studies (or is an "
                               f"administrator's); ask an administrator to reset it.")
    from annotations.core.accounts import one_time_password_encode

    password = _password_new()
    user.password = one_time_password_encode(password)
    user.password_must_change = True
    user.one_time_password_used_at = None  # the new one signs in once
    user.save(update_fields=["password", "password_must_change", "one_time_password_used_at"])
    return password


def study_classes_change_check(*, study: Study, deleting: int = 0, adding: int = 0,
                               reindexing: int = 0) -> None:
    """Refuse deleting, adding or renumbering classes of a study that is not a draft
    (renaming and describing them stays allowed)."""
    if study.status == Study.Status.DRAFT or not (deleting or adding or reindexing):
        return
    k = study.classes.count()
    state = "open" if study.status == Study.Status.OPEN else "closed"
    raise InvalidStudy(
        f"The study is {state}: its classes are fixed (K = {k} is part of every routed query). "
        "Close it and start a new study to change the classes.", field="classes")


@transaction.atomic
def study_class_delete(*, study_class: StudyClass) -> None:
    """Delete a class of a draft study (its specialists' memberships go with it)."""
    study = Study.objects.select_for_update().get(pk=study_class.study_id)
    study_classes_change_check(study=study, deleting=1)
    study_class.delete()


@transaction.atomic
def membership_remove(*, study: Study, membership_id: int, by: User) -> StudyMembership:
    """Take one role of one person off ``study`` (the Members page's *Remove*); returns the
    removed membership (unsaved). ``by`` must research the study; the study keeps at least
    one researcher. Their answers stay (the study's record); tasks they hold of the study go
    back to the pool at once (``engine.leases_return``, reason "removed from the study")
    when they keep no worker role in it. To change a role or class: remove, then add."""
    from annotations.core.engine import leases_return, task_kinds
    from annotations.core.task_models import TaskStatus

    if not researcher_may_configure(user=by, study=study):
        raise NotPermitted("Only the study's researchers may remove its members.")
    membership = (StudyMembership.objects.select_for_update()
                  .filter(study=study, pk=membership_id).select_related("user").first())
    if membership is None:
        raise InvalidStudy("That person is no longer a member of this study.",
                           field="membership")
    researcher = StudyMembership.Role.RESEARCHER
    if membership.role == researcher and not StudyMembership.objects.filter(
            study=study, role=researcher).exclude(pk=membership.pk).exists():
        raise InvalidStudy("A study keeps at least one researcher: add another first.",
                           field="membership")
    membership.delete()
    workers = (StudyMembership.Role.SPECIALIST, StudyMembership.Role.ANNOTATOR)
    if not StudyMembership.objects.filter(study=study, user=membership.user,
                                          role__in=workers).exists():
        for kind in task_kinds():
            if any(f.name == "study" for f in kind.model._meta.fields):
                leases_return(kind, kind.model.objects.select_for_update().filter(
                    study=study, holder=membership.user, status=TaskStatus.LEASED),
                    reason="removed from the study")
    return membership
