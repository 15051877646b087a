"""The Content-Security-Policy is on every HTML page of the URL configuration, and no page
holds what the policy refuses: an inline script or <style> without the request's nonce, an
inline event handler (onclick=…), a style attribute. The browser side — the pages work under
the policy and report no violation — is tests/browser/test_csp.py."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse

from annotations.models import Arm, ImportJob, Query, Study
from annotations.partitioned.services.estimates import study_recompute
from tests.annotations.assisted.helpers import make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.factories import UserFactory, make_study

pytestmark = pytest.mark.django_db

POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],  # + the nonce where the page has inline code
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}


def directives(header: str) -> dict[str, list[str]]:
    parts = [d.split() for d in header.split(";") if d.strip()]
    return {p[0]: p[1:] for p in parts}


class InlineCode(HTMLParser):
    """What the policy would refuse in a page whose nonce is ``nonce``."""

    def __init__(self, nonce: str | None):
        super().__init__()
        self.nonce, self.refused, self._tag = nonce, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self._tag = (tag, attrs)
        handlers = sorted(name for name in attrs if name.startswith("on"))
        if handlers:
            self.refused.append(f"<{tag} {handlers[0]}=…>")
        if "style" in attrs:
            self.refused.append(f"<{tag} style=\"{attrs['style']}\">")
        if any(str(v or "").lstrip().lower().startswith("javascript:") for v in attrs.values()):
            self.refused.append(f"<{tag}> with a javascript: URL")

    def handle_data(self, data):
        if self._tag is None or not data.strip():
            return
        tag, attrs = self._tag
        inline = tag == "style" or (tag == "script" and "src" not in attrs
                                    and attrs.get("type", "text/javascript") in (
                                        "text/javascript", "module"))
        if inline and (self.nonce is None or attrs.get("nonce") != self.nonce):
            self.refused.append(f"<{tag}> without the nonce: {data.strip()[:60]}")

    def handle_endtag(self, tag):
        self._tag = None


def refused_inline(html: str, header: str) -> list[str]:
    nonces = [s.removeprefix("'nonce-").removesuffix("'")
              for s in directives(header).get("script-src", []) if s.startswith("'nonce-")]
    parser = InlineCode(nonces[0] if nonces else None)
    parser.feed(html)
    return parser.refused


@pytest.fixture
def studies():
    partitioned = make_study(k=3, n_items=12, systems={"m-a": 0.8, "m-b": 0.6}, seed=3)
    study_recompute(study_id=partitioned.pk)
    assisted = make_assisted_study(n_sentences=3, arms={"Evidence": ["search", "evidence"]})
    critique, _ = make_critique_study(n_questions=2, n_annotators=2)
    return [partitioned, assisted, critique]


def _object_id(url_name: str) -> str:
    """A row of the admin page's model (its change, history and delete pages)."""
    for model in admin.site._registry:
        prefix = f"admin:{model._meta.app_label}_{model._meta.model_name}_"
        if url_name.startswith(prefix):
            row = model._default_manager.order_by("pk").first()
            return str(row.pk) if row is not None else "1"
    return "1"


def _urls(studies: list[Study]) -> list[str]:
    """Every named GET route of the URL configuration, with its ids filled in from the three
    study types (a route with a study id: once per study)."""
    first = {"query_id": Query.objects.order_by("pk").values_list("pk", flat=True).first(),
             "job_id": ImportJob.objects.order_by("pk").values_list("pk", flat=True).first(),
             "arm_id": Arm.objects.order_by("pk").values_list("pk", flat=True).first()}
    fixed = {"public_id": "x", "task_id": "1", "id": "1", "page": "manager", "name": "x",
             "figure": "arms", "action": "open", "app_label": "annotations",
             **{k: str(v or 1) for k, v in first.items()}}
    urls: set[str] = set()

    def walk(resolver, namespace: str) -> None:
        for p in resolver.url_patterns:
            if isinstance(p, URLResolver):
                walk(p, namespace + (f"{p.namespace}:" if p.namespace else ""))
                continue
            if not p.name:
                continue
            name = namespace + p.name
            keys = set(p.pattern.regex.groupindex)
            if keys - {*fixed, "study_id", "object_id"}:
                continue  # view-on-site redirects (content type, url)
            ids = [str(s.pk) for s in studies] if "study_id" in keys else [None]
            for study_id in ids:
                kwargs = {k: fixed[k] for k in keys & set(fixed)}
                if study_id:
                    kwargs["study_id"] = study_id
                if "object_id" in keys:
                    kwargs["object_id"] = _object_id(name)
                urls.add(reverse(name, kwargs=kwargs))

    walk(get_resolver(), "")
    return sorted(urls)


def test_every_html_page_has_the_policy_and_nothing_it_refuses(studies):
    # given: a superuser (every page of every study opens for them) and a visitor
    root = Client()
    root.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    urls = _urls(studies)
    assert len(urls) > 150  # the walk found the admin's pages and the studies' pages
    pages = 0
    problems = []
    for client, url in [(root, u) for u in urls] + [(Client(), "/accounts/login/"),
                                                    (Client(), "/no-such-page/")]:
        response = client.get(url)
        if not response.get("Content-Type", "").startswith("text/html"):
            continue
        pages += 1
        header = response.get("Content-Security-Policy")
        if header is None:
            problems.append(f"{url} ({response.status_code}): no Content-Security-Policy")
            continue
        got = directives(header)
        want = {**POLICY, **{k: [*v, *[s for s in got.get(k, []) if s.startswith("'nonce-")]]
                             for k, v in POLICY.items() if k in ("script-src", "style-src")}}
        if got != want:
            problems.append(f"{url}: {header}")
        body = b"".join(response) if response.streaming else response.content
        problems += [f"{url}: {p}" for p in refused_inline(body.decode(), header)]
    assert pages > 120
    assert problems == []


def test_the_api_docs_page_runs_its_script_from_a_file_and_nonces_its_rules():
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    response = client.get("/api/docs/")
    header = response["Content-Security-Policy"]
    nonce = next(s for s in directives(header)["style-src"] if s.startswith("'nonce-"))
    html = response.content.decode()
    assert f'<style nonce="{nonce[7:-1]}">' in html
    assert '<script src="/api/docs/?script="></script>' in html
    assert refused_inline(html, header) == []
    script = client.get("/api/docs/?script=")
    assert script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle(" in script.content.decode()


def test_a_rendered_page_without_the_nonce_would_be_caught():
    """The parser above finds each kind of refused inline code."""
    header = "script-src 'self' 'nonce-abc'; style-src 'self' 'nonce-abc'"
    html = ('<script>alert(1)</script><script nonce="abc">ok()</script><style>p{}</style>'
            '<a onclick="x()">a</a><i style="width:1%"></i><a href="javascript:x()">b</a>'
            '<script type="application/json">{"data": 1}</script>')
    assert refused_inline(html, header) == [
        "<script> without the nonce: alert(1)", "<style> without the nonce: p{}",
        "<a onclick=…>", '<i style="width:1%">', "<a> with a javascript: URL"]
