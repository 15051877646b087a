"""An undo racing a lease of the next-level task it removes (issue 27: a 500 from a deferred
foreign-key IntegrityError at commit). The lease is made at the worst moment, deterministically:
just before the undo's statement that deletes the next-level tasks (a
``connection.execute_wrapper`` runs it there). On SQLite (no row locks) it runs in the undo's
own connection, as a database without locks would let it; on PostgreSQL in another
connection, committed before the undo goes on. Either way the undo is refused with the
"too late" message or wins cleanly — never an IntegrityError."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection, connections

from annotations.core.errors import UndoRefused
from annotations.critique.services.answers import critique_undo
from annotations.critique.services.assignment import critique_task_next
from annotations.models import CritiqueOutput, CritiqueTask, CritiqueTaskEvent
from tests.annotations.critique.helpers import answer_next, make_critique_study


@pytest.fixture(autouse=True)
def _window(settings):
    settings.OVERSIGHT_MIN_ANSWER_MS = 0
    settings.OVERSIGHT_UNDO_SECONDS = 30


def _pair_completed():
    """A question whose level-0 pair was just completed by users[1]: one level-1 task,
    never issued; users[2] may lease it."""
    study, users = make_critique_study(n_questions=1, top_level=1, counts=[2, 1])
    answer_next(study, users[0])
    _, output = answer_next(study, users[1])
    [level1] = CritiqueTask.objects.filter(study=study, level=1)
    assert level1.times_issued == 0
    return study, users, output, level1


def _lease_before_the_delete(lease):
    """An execute wrapper that calls ``lease()`` once, just before the first statement
    deleting critique tasks."""
    table = CritiqueTask._meta.db_table
    deleting = re.compile(rf'^\s*DELETE FROM "?{table}"? WHERE', re.IGNORECASE)
    state = {"done": False}

    def wrapper(execute, sql, params, many, context):
        if not state["done"] and deleting.match(sql):
            state["done"] = True
            lease()
        return execute(sql, params, many, context)

    return wrapper


def _undo_with_a_lease_inside(study, users, lease):
    with connection.execute_wrapper(_lease_before_the_delete(lease)):
        try:
            return critique_undo(study=study, user=users[1]), None
        except UndoRefused as exc:
            return None, exc


@pytest.mark.django_db(transaction=True)
def test_a_lease_landing_inside_the_undo_without_row_locks_is_refused_cleanly():
    if connection.vendor == "postgresql":
        pytest.skip("row locks order them on PostgreSQL (the test below)")
    study, users, output, level1 = _pair_completed()
    leased = []
    back, refused = _undo_with_a_lease_inside(
        study, users, lambda: leased.append(critique_task_next(study=study, user=users[2])))
    assert leased and leased[0] is not None and leased[0].pk == level1.pk  # it did land
    assert back is None and refused is not None
    assert "Too late to undo" in refused.message
    # nothing changed: the answer stands, the next level too (the lease, made inside the
    # refused transaction, went with it)
    assert CritiqueOutput.objects.filter(pk=output.pk).exists()
    assert CritiqueTask.objects.filter(pk=level1.pk).exists()
    connection.check_constraints()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_lease_committed_inside_the_undo_on_postgresql_never_breaks_the_commit():
    study, users, output, level1 = _pair_completed()
    leased, errors = [], []

    def lease_elsewhere():
        def run():
            try:
                leased.append(critique_task_next(study=study, user=users[2]))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                connections.close_all()

        other = threading.Thread(target=run)
        other.start()
        other.join(timeout=10)
        assert not other.is_alive(), "the lease waited for the undo"

    back, refused = _undo_with_a_lease_inside(study, users, lease_elsewhere)
    assert errors == [] and len(leased) == 1
    if refused is None:  # the undo won: the task it removed was never leased
        assert back is not None and leased[0] is None
        assert not CritiqueTask.objects.filter(pk=level1.pk).exists()
        assert not CritiqueTaskEvent.objects.filter(task_id=level1.pk).exists()
        assert not CritiqueOutput.objects.filter(pk=output.pk).exists()
    else:  # the lease won: the undo said so and changed nothing
        assert "Too late to undo" in refused.message
        assert leased[0] is not None and leased[0].pk == level1.pk
        assert CritiqueOutput.objects.filter(pk=output.pk).exists()
    with connection.cursor():
        connection.check_constraints()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_undo_waits_for_a_lease_under_way_and_then_refuses():
    """The lease holds the level-1 task's row (its transaction still open) when the undo
    starts: the undo waits for it and then sees it leased."""
    from django.db import transaction

    study, users, output, level1 = _pair_completed()
    holding, release, errors = threading.Event(), threading.Event(), []

    def lease_and_hold():
        try:
            with transaction.atomic():
                task = critique_task_next(study=study, user=users[2])
                assert task is not None and task.pk == level1.pk
                holding.set()
                release.wait(timeout=10)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    other = threading.Thread(target=lease_and_hold)
    other.start()
    assert holding.wait(timeout=10)
    threading.Timer(1.0, release.set).start()  # commits while the undo waits on the row
    with pytest.raises(UndoRefused, match="Too late to undo"):
        critique_undo(study=study, user=users[1])
    other.join(timeout=10)
    assert errors == []
    assert CritiqueOutput.objects.filter(pk=output.pk).exists()
    assert CritiqueTask.objects.get(pk=level1.pk).holder == users[2]
