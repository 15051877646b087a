"""Fuzz every operation of the API's OpenAPI schema: bodies shaped like its request schemas
(and not), with NUL characters, over-long strings, huge numbers, nested values, wrong types.
Whatever comes in, the API answers JSON and never a 500."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token

from annotations.models import Query
from tests.factories import make_study, role_user, specialist

pytestmark = pytest.mark.django_db

SCHEMA = None


def schema() -> dict:
    global SCHEMA
    if SCHEMA is None:
        SCHEMA = SchemaGenerator().get_schema(request=None, public=True)
    return SCHEMA


def operations() -> list[tuple[str, str]]:
    return sorted((method.upper(), path) for path, ops in schema()["paths"].items()
                  for method in ops)


def body_schema(method: str, path: str) -> dict:
    """The operation's JSON request body schema (its items' when it is a list)."""
    op = schema()["paths"][path][method.lower()]
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    ref = body.get("schema", {})
    ref = ref.get("items", ref).get("$ref", "")
    if not ref:
        return {"properties": {}, "required": []}
    return schema()["components"]["schemas"][ref.rsplit("/", 1)[1]]


def plausible(prop: dict):
    """A value the schema accepts, so that a record gets past validation to the database."""
    ref = prop.get("$ref") or next((r["$ref"] for r in prop.get("allOf", []) if "$ref" in r), "")
    if ref:
        return st.sampled_from(schema()["components"]["schemas"][ref.rsplit("/", 1)[1]]["enum"])
    kind = prop.get("type")
    word = st.text(alphabet="abcdefghij0123456789", min_size=1, max_size=12)
    if kind == "array":
        return st.lists(word, min_size=3, max_size=3)
    if kind == "object":
        return st.dictionaries(word, word, max_size=2)
    if kind == "boolean":
        return st.booleans()
    return word


NASTY = st.sampled_from(["\x00", "a\x00b", "x" * 201, "x" * 5000, "", " ", "yes", "no", "i0",
                         "C0", "0", "-1", "3.0", "NaN", "null", "[]", "{}", "💥", "\ud7ff"])
LEAF = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
                 st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40), NASTY)


# Values of the fuzz study (make_study's item ids) where a random word would only be refused.
KNOWN = {"item_id": st.sampled_from(["i0", "i1", "i2"])}


def values(body: dict):
    """Bodies: a record with the schema's required fields valid and one or two fields made
    nasty (nested values, NUL, long strings, wrong types), lists of such records, or any
    JSON at all."""
    props = body["properties"]
    keys = st.one_of(st.sampled_from(list(props) or ["x"]), st.text(max_size=6), NASTY)
    nested = st.recursive(LEAF, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(keys, inner, max_size=4), max_leaves=12)
    nasty = st.one_of(NASTY, nested, st.dictionaries(keys, NASTY, min_size=1, max_size=2),
                      st.lists(NASTY, min_size=1, max_size=3))
    valid = st.fixed_dictionaries({name: KNOWN[name] if name in KNOWN else plausible(props[name])
                                   for name in body.get("required", [])})
    bad_fields = st.dictionaries(st.sampled_from(list(props)) if props else keys, nasty,
                                 min_size=1, max_size=2)
    record = st.builds(lambda base, bad: {**base, **bad}, valid, bad_fields)
    return st.one_of(nested, record, st.lists(record, min_size=1, max_size=3))


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        study = make_study(k=3, n_items=6, systems={"sys": 0.7}, name="fuzz-study")
        researcher = Token.objects.get_or_create(user=role_user(study, "researcher"))[0]
        spec = Token.objects.get_or_create(user=specialist(study, 0))[0]
        query = Query.objects.filter(study=study, k=0).first()
    yield {"study": study.pk, "query": query.pk, "researcher": researcher.key,
           "specialist": spec.key}
    with django_db_blocker.unblock():
        study.delete()


@pytest.mark.parametrize(("method", "path"), operations())
def test_fuzzed_requests_never_give_a_500(world, method, path):
    body = body_schema(method, path)
    token = world["specialist"] if "/queries/" in path else world["researcher"]
    client = Client(HTTP_AUTHORIZATION=f"Token {token}", raise_request_exception=False)
    ids = st.one_of(st.just(world["study"] if "study_id" in path else world["query"]),
                    st.integers(min_value=0, max_value=2 ** 70))

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow])
    @given(data=values(body), object_id=ids, cut=st.integers(0, 9))
    def check(data, object_id, cut):
        url = path.replace("{study_id}", str(object_id)).replace("{query_id}", str(object_id))
        payload = json.dumps(data)
        if cut == 0:  # now and then a body that is not JSON at all
            payload = payload[: len(payload) // 2]
        response = (client.get(url) if method == "GET" else
                    client.post(url, payload, content_type="application/json"))
        assert response.status_code < 500, (url, payload[:300], response.content[:300])
        if response.status_code != 204:  # the type the schema documents (errors: JSON)
            documented = (schema()["paths"][path][method.lower()]["responses"]
                          .get(str(response.status_code), {}).get("content", {}))
            expected = (set(documented) if response.status_code < 400 and documented
                        else {"application/json"})
            assert response["Content-Type"].split(";")[0] in expected, (
                url, response.content[:200])

    check()
