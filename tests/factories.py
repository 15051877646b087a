"""factory-boy factories and builders that go through the real services."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator

import factory
import numpy as np

from annotations.core.services.studies import membership_add, study_create, study_open
from annotations.models import Study, StudyMembership, User
from annotations.partitioned.services.imports import items_import


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "pw")

    @classmethod
    def _after_postgeneration(cls, instance, create, results=None):
        if create:
            instance.save()


def jsonl(records: list[dict]) -> io.StringIO:
    return io.StringIO("\n".join(json.dumps(r) for r in records))


def make_items(n: int, k: int, *, seed: int = 0, checks: int = 0, strata: int = 1) -> list[dict]:
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n + checks):
        items.append({
            "id": f"i{i}" if i < n else f"c{i - n}",
            "text": f"Question {i}",
            "options": [f"opt {i}.{j}" for j in range(k)],
            "gold_index": int(rng.integers(0, k)),
            "stratum": f"s{i % strata}",
            "quality_check": i >= n,
        })
    return items


def predictions_for(items: list[dict], accuracies: dict[str, float], k: int, *,
                    seed: int = 1, missing: float = 0.0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for it in items:
        if it.get("quality_check"):
            continue
        for name, acc in accuracies.items():
            if rng.random() < missing:
                pred: object = "garbled"
            elif rng.random() < acc:
                pred = it["gold_index"]
            else:
                pred = int(rng.choice([j for j in range(k) if j != it["gold_index"]]))
            field = "prediction" if isinstance(pred, str) else "prediction_index"
            rows.append({"item_id": it["id"], "system": name, field: pred})
    return rows


@contextlib.contextmanager
def built_once(django_db_blocker, build: Callable[[], Study]) -> Iterator[Study]:
    """A study for a module-scoped fixture: ``build()`` run once outside the tests'
    transactions (each test's writes are undone after it, the study stays), deleted after
    the module. Many tests reading one simulated study no longer simulate it each."""
    with django_db_blocker.unblock():
        study = build()
        try:
            yield study
        finally:
            study.delete()


def make_study(*, k: int = 4, n_items: int = 20, queries_per_item: int = 1, checks: int = 0,
               gold_rate: float = 0.0, specialists_per_class: int = 1, open_: bool = True,
               systems: dict[str, float] | None = None, seed: int = 7,
               name: str | None = None, strata: int = 1) -> Study:
    """A study with K classes, items (with gold), specialists per class, a manager, a
    researcher, optional AI systems, opened (routed) unless ``open_`` is False."""
    from annotations.partitioned.services.predictions import predictions_import

    study = study_create(name=name or f"study-{seed}-{k}-{n_items}-{np.random.randint(1e9)}",
                         classes=[f"C{i}" for i in range(k)], queries_per_item=queries_per_item,
                         gold_rate=gold_rate, seed=seed)
    items = make_items(n_items, k, seed=seed, checks=checks, strata=strata)
    items_import(study=study, source=jsonl(items), name="items.jsonl", fmt="jsonl")
    if systems:
        predictions_import(study=study, source=jsonl(predictions_for(items, systems, k)),
                           name="predictions.jsonl", fmt="jsonl")
    for c in range(k):
        for j in range(specialists_per_class):
            user = UserFactory(username=f"{study.pk}-spec{c}-{j}")
            membership_add(study=study, user=user, role=StudyMembership.Role.SPECIALIST,
                           class_index=c)
    membership_add(study=study, user=UserFactory(username=f"{study.pk}-manager"),
                   role=StudyMembership.Role.MANAGER)
    researcher = UserFactory(username=f"{study.pk}-researcher", is_staff=True)
    membership_add(study=study, user=researcher, role=StudyMembership.Role.RESEARCHER)
    if open_:
        study_open(study=study)
    return study


def specialist(study: Study, k: int, j: int = 0) -> User:
    return User.objects.get(username=f"{study.pk}-spec{k}-{j}")


def role_user(study: Study, role: str) -> User:
    return User.objects.get(username=f"{study.pk}-{role}")


def admin_form_data(client, url: str) -> dict:
    """The admin change form at ``url`` as a browser would post it back unchanged (lists and
    objects of JSON fields as JSON text, empty values as "")."""
    import json

    form = client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    return {k: "" if v is None else json.dumps(v) if isinstance(v, list | dict) else v
            for k, v in data.items()}
