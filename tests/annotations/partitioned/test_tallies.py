"""The maintained statistics (services/tallies.py, the triggers of migration 0036) against
the full recompute: random sequences of answers, undos, skips, withdrawals and their
reversal, rejections and their undo, item re-imports, prediction imports and design
changes, with the estimates from the statistics equal to those counted from the queries
after every step (hypothesis; this module runs on SQLite and again on PostgreSQL in CI's
second pass). Also: a build from the queries equals the folded groups exactly, a fold
takes only the new entries, and a check reports and repairs a difference."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotations.core.reviews.services import answer_rejection_undo, answer_review
from annotations.core.services.flags import flag_resolve
from annotations.core.services.studies import study_open
from annotations.models import Item, ItemFlag, Query, TallyEntry, TallyGroup, TallyState
from annotations.partitioned.models import TallyKey
from annotations.partitioned.selectors import study_item_labels, uniform_part_only
from annotations.partitioned.services.consistency import payload_difference, tallies_check
from annotations.partitioned.services.designs import routing_design_set
from annotations.partitioned.services.estimates import recompute_payload
from annotations.partitioned.services.labels import label_submit, label_undo
from annotations.partitioned.services.predictions import prediction_set
from annotations.partitioned.services.routing import query_lease_next, query_skip
from annotations.partitioned.services.scope_estimates import labels_moment_sums
from annotations.partitioned.services.tallies import (
    tallies_build,
    tallies_current,
    tallies_fold,
)
from annotations.partitioned.services.tally_designs import (
    design_counts_read,
    signature,
    steps_read,
    types_of,
)
from assistants.models import AISystem
from tests.factories import make_study, role_user, specialist

pytestmark = pytest.mark.django_db

K = 3


class Rollback(Exception):
    """Ends an example: its writes are undone with the savepoint."""


def _groups(study) -> dict:
    return {tuple(r[:len(TallyKey.KEY)]): (r[-2], r[-1]) for r in TallyGroup.objects.filter(
        study=study).values_list(*TallyKey.KEY, "n", "codes")}


def _fresh_sums(study, banded: bool = False) -> dict:
    """The clustered variance's sums counted afresh from the labels, per part."""
    systems = list(AISystem.objects.filter(study=study).order_by("ordinal"))
    ordinals = [s.ordinal for s in systems]
    columns = [j for j, s in enumerate(systems) if s.band_edges] if banded else None
    k = study.classes.count()
    out = {}
    for part in ("all", "uniform"):
        with uniform_part_only() if part == "uniform" else contextlib.nullcontext():
            labels = study_item_labels(study=study, ordinals=ordinals, bands=banded)
            out[part] = labels_moment_sums(labels, k, columns)
    return out


def _agree(study, banded: bool = False) -> None:
    """The estimates from the statistics are the full recompute's, exactly; with several
    queries per item the kept sums are those counted afresh, integer for integer."""
    tallies = tallies_current(study_id=study.pk)
    from_tallies = recompute_payload(study, tallies)
    reference = recompute_payload(study, None)
    difference, detail = payload_difference(from_tallies, reference)
    assert not detail, detail
    # the counts' figures bit for bit; the design-weighted ones (sums over types, each
    # counted, against sums over the items: another order of the same additions) to 1e-12
    weighted, _ = payload_difference(_design_cells(from_tallies), _design_cells(reference))
    assert difference == 0 or difference == weighted <= 1e-12
    if study.queries_per_item > 1:
        assert (tallies.moments["all"].band_first is not None) == banded
        assert tallies.moments == _fresh_sums(study, banded)
    _types_agree(study, tallies)


def _design_cells(payload: dict) -> list:
    """The payload's design-weighted figures (the systems' ``design`` cells)."""
    return [row.get("design") for row in payload.get("systems", [])]


def _types_agree(study, tallies) -> None:
    """With a targeted design, the kept design types (read by the estimates, not the
    answers) are those of every item typed afresh: the same keys, each with as many items,
    and the same steps and items in all."""
    sig = signature(study.pk)
    if sig is None:
        assert tallies.design is None
        return
    assert tallies.design is not None and tallies.design.signature == sig
    kept, fresh = tallies.design.types, types_of(steps_read(study, sig))
    assert dict(zip(kept.key.tolist(), kept.count.tolist(), strict=True)) == dict(
        zip(fresh.key.tolist(), fresh.count.tolist(), strict=True))
    assert (kept.answers, kept.items) == (fresh.answers, fresh.items)
    counted = {}
    for rows in design_counts_read(study.pk).values():
        for d, answered, open_ in rows:
            a, o = counted.get(int(d) or None, (0, 0))
            counted[int(d) or None] = (a + int(answered), o + int(open_))
    assert tallies.design.types.design_counts() == counted


def _steps_agree(study, steps, banded: bool = False) -> None:
    """Fold, then after every step the statistics agree (:func:`_agree`), kept by the
    folds: no step made them rebuild from the queries."""
    tallies_fold(study_id=study.pk)
    built = TallyState.objects.get(study=study).built_at
    for operation, where, value in steps:
        operation(study, where, value)
        _agree(study, banded)
        assert TallyState.objects.get(study=study).built_at == built


# --- the operations ------------------------------------------------------------------------
def answer(study, c: int, value: str) -> None:
    user = specialist(study, c)
    query = query_lease_next(study=study, user=user)
    if query is not None:
        label_submit(user=user, answer=value, query_id=query.pk)


def undo(study, c: int, _value) -> None:
    with contextlib.suppress(Exception), transaction.atomic():
        label_undo(study=study, user=specialist(study, c))


def skip(study, c: int, _value) -> None:
    user = specialist(study, c)
    query = query_lease_next(study=study, user=user)
    if query is not None:
        query_skip(user=user, query_id=query.pk)


def _item(study, i: int) -> Item:
    items = list(Item.objects.filter(study=study, is_quality_check=False).order_by("pk"))
    return items[i % len(items)]


def withdraw(study, i: int, _value) -> None:
    item = _item(study, i)
    researcher = role_user(study, "researcher")
    ItemFlag.objects.get_or_create(study=study, item_id=item.pk, user=researcher,
                                   defaults={"reason": ItemFlag.Reason.BROKEN})
    flag_resolve(study=study, item_id=item.pk, resolution=ItemFlag.Resolution.WITHDRAWN,
                 user=researcher)


def restore(study, i: int, _value) -> None:
    """A withdrawal taken back (the flags of the item dismissed)."""
    ItemFlag.objects.filter(study=study, item_id=_item(study, i).pk).update(
        resolution=ItemFlag.Resolution.DISMISSED, resolved_at=timezone.now())


def reject(study, i: int, accept: bool) -> None:
    answered = list(Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                         is_quality_check=False).order_by("pk"))
    if not answered:
        return
    query = answered[i % len(answered)]
    researcher = role_user(study, "researcher")
    if accept is None:
        with contextlib.suppress(Exception), transaction.atomic():
            answer_rejection_undo(study=study, answer_id=query.pk, by=researcher)
        return
    answer_review(study=study, answer_id=query.pk, accept=accept, reason="checked",
                  by=researcher)


def restratify(study, i: int, stratum: str) -> None:
    """An item re-imported into another stratum (what an update import writes)."""
    item = _item(study, i)
    Item.objects.filter(pk=item.pk).update(stratum=stratum)
    Query.objects.filter(item=item).update(stratum=stratum)


def predict(study, i: int, option) -> None:
    system = AISystem.objects.filter(study=study).order_by("ordinal")[i % 2]
    prediction_set(system=system, item=_item(study, i), option=option)


def design(study, _i: int, epsilon) -> None:
    Query.objects.filter(study=study, status=Query.Status.LEASED).update(
        status=Query.Status.PENDING, holder=None, lease_expires_at=None)
    with contextlib.suppress(Exception), transaction.atomic():
        routing_design_set(study=study, kind="uniform" if epsilon is None else "targeted",
                           epsilon=epsilon)


STEPS = st.one_of(
    st.tuples(st.just(answer), st.integers(0, K - 1),
              st.sampled_from(["yes", "no", "no", "unsure"])),
    st.tuples(st.just(undo), st.integers(0, K - 1), st.none()),
    st.tuples(st.just(skip), st.integers(0, K - 1), st.none()),
    st.tuples(st.just(withdraw), st.integers(0, 20), st.none()),
    st.tuples(st.just(restore), st.integers(0, 20), st.none()),
    st.tuples(st.just(reject), st.integers(0, 20), st.sampled_from([False, True, None])),
    st.tuples(st.just(restratify), st.integers(0, 20), st.sampled_from(["s0", "s1", "s2"])),
    st.tuples(st.just(predict), st.integers(0, 20), st.sampled_from([None, 0, 1, 2])),
    st.tuples(st.just(design), st.integers(0, 1), st.sampled_from([None, 0.3, 1.0])),
)


@pytest.fixture
def base_study(db):
    return make_study(k=K, n_items=8, queries_per_item=2, systems={"a": 0.8, "b": 0.5},
                      strata=2, seed=3)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(steps=st.lists(STEPS, min_size=1, max_size=14))
def test_estimates_from_the_statistics_equal_the_full_recompute_after_every_step(
        base_study, steps):
    study = base_study
    with contextlib.suppress(Rollback), transaction.atomic():
        _steps_agree(study, steps)
        folded = _groups(study)
        tallies_build(study_id=study.pk)
        assert _groups(study) == folded  # the folds add up to a build from the queries
        raise Rollback


@pytest.fixture
def banded_study(db):
    """Three queries per item, K = 4, one system with confidence bands and one without."""
    from annotations.partitioned.services.imports import items_import
    from annotations.partitioned.services.predictions import (
        confidence_bands_set,
        predictions_import,
    )
    from tests.factories import jsonl, make_items

    study = make_study(k=4, n_items=0, queries_per_item=3, seed=5, open_=False)
    items = make_items(10, 4, seed=5, strata=2)
    items_import(study=study, source=jsonl(items), name="items.jsonl", fmt="jsonl")
    confidence_bands_set(study=study, scheme="fixed", edges=[0.5, 0.8])
    rng = np.random.default_rng(5)
    rows = [{"item_id": it["id"], "system": name, "prediction_index": int(rng.integers(0, 4)),
             **({"confidence": round(float(rng.uniform(0.2, 1.0)), 3)} if name == "c" else {})}
            for it in items if not it["quality_check"] for name in ("c", "plain")]
    predictions_import(study=study, source=jsonl(rows), name="p.jsonl", fmt="jsonl")
    study_open(study=study)
    return study


MANY_ANSWERS = st.one_of(
    st.tuples(st.just(answer), st.integers(0, 3), st.sampled_from(["yes", "no", "no"])),
    st.tuples(st.just(answer), st.integers(0, 3), st.sampled_from(["no", "unsure"])),
    STEPS,
)


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(steps=st.lists(MANY_ANSWERS, min_size=4, max_size=16))
def test_the_kept_sums_of_a_banded_study_follow_every_step(banded_study, steps):
    """The clustered variance's sums (K = 4, three queries per item, per band and cut of
    the banded system) kept fold by fold equal those counted afresh after every step."""
    with contextlib.suppress(Rollback), transaction.atomic():
        _steps_agree(banded_study, steps, banded=True)
        raise Rollback


def test_sums_kept_before_a_system_was_added_are_not_read(base_study):
    """Statistics read just before a system is added: the estimates read the labels for
    the clustered variance (the sums have a column fewer) and equal the full recompute."""
    from assistants.systems import system_create

    study = base_study
    answer(study, 0, "no")
    tallies = tallies_current(study_id=study.pk)
    system_create(study=study, name="late")
    assert not tallies.moment_sums().fits(3, 0)
    difference, detail = payload_difference(recompute_payload(study, tallies),
                                            recompute_payload(study, None))
    assert not detail and difference == 0, detail


def test_a_fold_takes_only_the_new_entries(base_study):
    study = base_study
    tallies_fold(study_id=study.pk)
    assert TallyState.objects.get(study=study).built_at is not None
    assert not TallyEntry.objects.filter(study_id=study.pk).exists()
    answer(study, 0, "yes")
    answer(study, 1, "yes")
    # an answer writes two entries (−1 at "open", +1 at its answer)
    assert TallyEntry.objects.filter(study_id=study.pk).count() == 4
    answer(study, 2, "no")  # and a "no" routes a follow-up query: +1 at "open"
    assert tallies_fold(study_id=study.pk) == 7
    assert not TallyEntry.objects.filter(study_id=study.pk).exists()
    _agree(study)


def test_a_lease_writes_no_entry(base_study):
    study = base_study
    tallies_fold(study_id=study.pk)
    assert query_lease_next(study=study, user=specialist(study, 0)) is not None
    assert not TallyEntry.objects.filter(study_id=study.pk).exists()


def test_a_check_reports_a_difference_and_rebuilds_with_a_log_line(base_study, caplog):
    study = base_study
    answer(study, 0, "yes")
    assert tallies_check(study_id=study.pk).ok
    group = TallyGroup.objects.filter(study=study, state="yes").first()
    TallyGroup.objects.filter(pk=group.pk).update(n=group.n + 5)  # a corrupted count
    check = tallies_check(study_id=study.pk)
    assert not check.ok and "n_answered" in check.detail or "classes" in check.detail
    state = TallyState.objects.get(study=study)
    assert state.check_ok is False and state.check_detail == check.detail[:2000]
    assert "differ from the full recompute" in caplog.text
    assert tallies_check(study_id=study.pk).ok  # rebuilt


def test_entries_of_a_deleted_study_are_dropped(base_study):
    from annotations.partitioned.services.tallies import orphan_entries_drop

    study_id = base_study.pk
    base_study.delete()
    assert TallyEntry.objects.filter(study_id=study_id).exists()  # its queries' −1 entries
    assert orphan_entries_drop() > 0
    assert not TallyEntry.objects.filter(study_id=study_id).exists()


def test_the_check_command_reports_each_study_and_fails_on_a_difference(base_study):
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    study = base_study
    answer(study, 0, "yes")
    out = StringIO()
    call_command("check_estimates", str(study.pk), stdout=out)
    assert f"study {study.pk}: same" in out.getvalue()
    TallyGroup.objects.filter(study=study, state="yes").update(n=99)
    out = StringIO()
    with pytest.raises(CommandError, match=str(study.pk)):
        call_command("check_estimates", str(study.pk), "--no-repair", stdout=out)
    assert "DIFFERENT" in out.getvalue()
    assert TallyGroup.objects.filter(study=study, state="yes", n=99).exists()  # not repaired
    with pytest.raises(CommandError):
        call_command("check_estimates", str(study.pk), stdout=StringIO())  # repairs
    out = StringIO()
    call_command("check_estimates", str(study.pk), stdout=out)
    assert "1 studies checked, 0 differed" in out.getvalue()


@pytest.mark.parametrize("stray_match", [False, True])
def test_the_build_counts_the_same_codes_however_it_reads_them(base_study, stray_match):
    # PostgreSQL counts an unbanded study's codes in the server (one SUM per system and
    # mask); the rows' bits read whole (binary COPY) or row by row must give the same
    # groups — and a match bit without its present bit (code 2) sends the build to them
    from django.db import connection

    from annotations.partitioned.selectors import codes_fetched
    from annotations.partitioned.services.tallies import (
        _code_counts,
        _codes_summed,
        _flag_key,
        _key_sql,
        _ordinals,
        _rows_copied,
    )

    study = base_study
    for c in range(4):
        answer(study, c % K, "yes" if c % 2 else "no")
    if stray_match:
        row = Query.objects.filter(study=study, status="answered").first()
        sign = -(1 << 63)  # ordinal 63: the masks' sign bit
        Query.objects.filter(pk=row.pk).update(match_mask=row.match_mask | sign,
                                               present_mask=row.present_mask & ~sign)
    # a third system, of the highest ordinal, whose bit the stray match sets
    AISystem.objects.create(study=study, name="c", ordinal=63)
    ordinals = _ordinals(study.pk)
    where = "FROM annotations_query WHERE study_id = %s AND NOT is_quality_check"
    keys_sql = _key_sql(study.pk)

    def by_group(keys, sizes, codes):
        return {tuple(k): (int(n), codes[g].tolist())
                for g, (k, n) in enumerate(zip(keys, sizes, strict=True))}

    def from_rows(keys, sizes, columns):
        group = np.repeat(np.arange(len(keys)), sizes).astype(np.int64)
        return by_group(keys, sizes, _code_counts(group, len(keys), columns, ordinals))

    fetched = from_rows(*codes_fetched(keys_sql, where, [study.pk]))
    assert sum(n for n, _ in fetched.values()) == Query.objects.filter(
        study=study, is_quality_check=False).count()
    # code 2 (match, no present) for system c exactly where the stray bit was set
    assert sum(codes[63][2] for _, codes in fetched.values()) == int(stray_match)
    if connection.vendor == "postgresql":
        assert from_rows(*_rows_copied(keys_sql, where, [study.pk], True)) == fetched
        summed = _codes_summed(keys_sql, where, [study.pk], ordinals)
        if stray_match:
            assert summed is None
        else:
            assert by_group(*summed) == fetched
    tallies_build(study_id=study.pk)
    expected = {}
    for raw, (n, codes) in fetched.items():
        key = _flag_key(raw)
        expected[key] = (n, {str(o): {str(c): codes[j][c] for c in range(1, len(codes[j]))
                                      if codes[j][c]}
                             for j, o in enumerate(ordinals)
                             if key[2] in ("yes", "no", "unsure") and any(codes[j][1:])})
    built = {key: value for key, value in _groups(study).items() if key[2] != "skip"}
    assert built == expected


@pytest.fixture
def targeted_study(base_study):
    """The base study under a targeted design (ε = 0.3) before any answer."""
    design(base_study, 0, 0.3)
    return base_study


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(steps=st.lists(st.one_of(
    st.tuples(st.just(answer), st.integers(0, K - 1), st.sampled_from(["yes", "no", "no"])),
    STEPS), min_size=4, max_size=16))
def test_the_design_types_of_a_targeted_study_follow_every_step(targeted_study, steps):
    """Under a targeted design the design-weighted estimates come from the kept types,
    and after every step those are the types of every item counted afresh and the
    estimates those of the full recompute."""
    with contextlib.suppress(Rollback), transaction.atomic():
        _steps_agree(targeted_study, steps)
        raise Rollback


def test_a_prediction_moved_between_wrong_classes_moves_the_design_types(targeted_study):
    """A prediction changed from one class to another where neither was asked moves no
    query's bits (no entry of the queries' triggers) but the item's weights: the
    predictions' trigger logs the item and the fold reads it again."""
    study = targeted_study
    for c in range(K):
        answer(study, c, "no")
    tallies_fold(study_id=study.pk)
    query = Query.objects.filter(study=study, status=Query.Status.ANSWERED,
                                 is_quality_check=False).order_by("pk").first()
    system = AISystem.objects.filter(study=study).order_by("ordinal").first()
    before = tallies_current(study_id=study.pk).design.types
    item = Item.objects.get(pk=query.item_id)
    asked = {q.k for q in Query.objects.filter(item=item)}
    free = [c for c in range(K) if c not in asked]
    option = next(o for o in range(K) if item.position_of(o) == free[0])
    prediction_set(system=system, item=item, option=option)
    assert TallyEntry.objects.filter(study_id=study.pk, state="touch",
                                     item_id=item.pk).exists()
    tallies = tallies_current(study_id=study.pk)
    assert not np.array_equal(tallies.design.types.key, before.key)
    payload = recompute_payload(study, tallies)
    assert payload["design"]["answers"] == K and all(
        row["design"]["se"] > 0 for row in payload["systems"])
    _agree(study)
