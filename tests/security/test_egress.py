"""AI endpoints cannot be turned against the platform (issue 15): keys go only to their own
endpoints, internal addresses are refused at save and at request time (after name
resolution), redirects are not followed, and a failed call's body is never shown.

Every listener here is a real HTTP server on the loopback (tests/assistants/standin.py).
Addresses of the other refused ranges are never connected to: they reach the code only
through a scripted resolver, and are refused before any connection is made."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotations.core.errors import InvalidStudy
from annotations.critique.services.studies import critique_settings_update
from annotations.models import AssistedSettings, CritiqueRun, CritiqueSettings
from assistants.egress import EgressPolicy, EndpointRefused, endpoint_check, resolve
from assistants.endpoints import ai_endpoint_check
from assistants.provider import ProviderConfig, ProviderError, complete
from tests.annotations.assisted.helpers import make_assisted_study
from tests.annotations.critique.helpers import make_critique_study
from tests.assistants.standin import reply, status

pytestmark = pytest.mark.django_db

SITE_KEY = "sk-site-SECRET-15"
STUDY_KEY = "sk-study-OWN-15"
MESSAGES = [{"role": "user", "content": "hi"}]

# One address of every refused range: (address, the reason the refusal names).
REFUSED = {
    "127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback",
    "10.1.2.3": "private", "172.16.0.9": "private", "192.168.1.1": "private",
    "fc00::5": "private", "fd12:3456::1": "private",
    "169.254.169.254": "cloud metadata", "169.254.10.1": "link-local",
    "fe80::1": "link-local", "100.64.0.1": "shared", "100.100.100.200": "shared",
    "0.0.0.0": "unspecified", "::": "unspecified", "224.0.0.251": "multicast",
    "::ffff:127.0.0.1": "loopback", "::ffff:10.0.0.1": "private",
    "64:ff9b::a9fe:a9fe": "cloud metadata", "240.0.0.1": "reserved",
    "198.18.0.1": "private", "192.0.0.8": "reserved", "fec0::1": "site-local",
    "2002:7f00:1::": "loopback", "2002:a00:1::5": "private",
}
PUBLIC = "93.184.216.34"


@pytest.fixture(autouse=True)
def _inline(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the task runs in-process, even with a broker
    settings.OVERSIGHT_AI_MAX_RETRIES = 0


@pytest.fixture
def site(settings, standin):
    """The site's endpoint (a listener with the site's key configured for it)."""
    server = standin([reply("Answer: B")])
    settings.OVERSIGHT_AI_BASE_URL = server.base_url
    settings.OVERSIGHT_AI_MODEL = "site-model"
    settings.OVERSIGHT_AI_API_KEY = SITE_KEY
    return server


def scripted(mapping: dict[str, list[str]]):
    """A resolver answering from ``mapping`` (host → addresses; a list of lists is read one
    answer per call, the last repeating), other names through the system's resolver."""
    calls: dict[str, int] = {}

    def resolver(host: str, port: int) -> list[str]:
        if host not in mapping:
            return resolve(host, port)
        answers = mapping[host]
        if answers and isinstance(answers[0], list):
            n = calls.get(host, 0)
            calls[host] = n + 1
            return answers[min(n, len(answers) - 1)]
        return answers

    return resolver


def researcher(study) -> Client:
    """A client logged in as a researcher of ``study`` (staff, not a superuser)."""
    from annotations.core.services.studies import membership_add
    from annotations.models import StudyMembership, User

    user = User.objects.filter(username=f"{study.pk}-researcher").first()
    if user is None:
        user = User.objects.create_user(f"{study.pk}-researcher", is_staff=True)
        membership_add(study=study, user=user, role=StudyMembership.Role.RESEARCHER)
    assert not user.is_superuser
    client = Client()
    client.force_login(user)
    return client


def keys_seen(server) -> list[str]:
    """The Authorization header of every request the server received ('' for none)."""
    return [next((v for k, v in r.headers.items() if k.lower() == "authorization"), "")
            for r in server.requests]


# ------------------------------------------------------------------------ keys

def _pointed_at(kind: str, url: str):
    """A study of ``kind`` whose own endpoint is ``url`` (key left empty), and the request
    a researcher makes to call it: the assisted study's "sample", the critique run."""
    if kind == "assisted":
        study = make_assisted_study(n_sentences=1, traces=False, open_=False,
                                    ai_base_url=url, ai_model="m")
        return study, reverse("admin:annotations_assistedstudy_sample", args=[study.pk]), {}
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below")
    critique_settings_update(study=study, ai_base_url=url, ai_model="m")
    return study, reverse("admin:annotations_critiquesettings_ai_run", args=[study.pk]), {}


@pytest.mark.parametrize("kind", ["assisted", "critique"])
def test_the_site_key_never_reaches_a_studys_own_endpoint(
        site, standin, kind, django_capture_on_commit_callbacks):
    # given: a researcher (not a superuser) points the study at a listener of theirs and
    # leaves the key empty
    listener = standin([reply("Answer: accurate")])
    study, url, data = _pointed_at(kind, listener.base_url)
    client = researcher(study)
    # when: they press "sample" / "write the missing AI outputs"
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, data)
    # then: the listener was asked, without the site's key; the site endpoint was not asked
    assert listener.requests
    assert set(keys_seen(listener)) == {"Bearer not-needed"}  # the client's placeholder
    assert all(SITE_KEY not in str(r.headers) + str(r.body) for r in listener.requests)
    assert site.requests == []


def test_the_site_key_goes_to_the_site_endpoint_and_a_studys_key_to_its_endpoint(
        site, standin, django_capture_on_commit_callbacks):
    # given: one study on the site's endpoint, one with its own endpoint and key
    on_site = make_assisted_study(n_sentences=1, traces=False, open_=False)
    listener = standin([reply("Answer: accurate")])
    own = make_assisted_study(n_sentences=1, traces=False, open_=False,
                              ai_base_url=listener.base_url, ai_model="m", ai_api_key=STUDY_KEY)
    # when
    for study in (on_site, own):
        with django_capture_on_commit_callbacks(execute=True):
            researcher(study).post(reverse("admin:annotations_assistedstudy_sample",
                                           args=[study.pk]))
    # then
    assert site.requests and set(keys_seen(site)) == {f"Bearer {SITE_KEY}"}
    assert listener.requests and set(keys_seen(listener)) == {f"Bearer {STUDY_KEY}"}


def test_a_saved_key_does_not_follow_the_endpoint_when_it_changes(standin):
    # given: a critique study with its own endpoint and key
    first, second = standin([reply("x")]), standin([reply("x")])
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below")
    critique_settings_update(study=study, ai_base_url=first.base_url, ai_model="m",
                             ai_api_key=STUDY_KEY)
    # when: the endpoint changes without a key (the admin's "leave empty to keep")
    critique_settings_update(study=study, ai_base_url=second.base_url)
    # then: the saved key is gone; a key typed with the change is kept
    assert CritiqueSettings.objects.get(study=study).ai_api_key == ""
    critique_settings_update(study=study, ai_base_url=first.base_url, ai_api_key="sk-new")
    assert CritiqueSettings.objects.get(study=study).ai_api_key == "sk-new"


def test_the_admin_form_drops_the_saved_key_when_the_endpoint_changes(standin):
    from tests.annotations.assisted.test_admin import change_url, posted

    first, second = standin([reply("x")]), standin([reply("x")])
    study = make_assisted_study(n_sentences=1, open_=False, ai_base_url=first.base_url,
                                ai_api_key=STUDY_KEY)
    client = researcher(study)
    page = client.get(change_url(study))
    # the same endpoint, key box empty (the browser never fills it in): kept
    empty = {"assisted-0-ai_api_key": ""}
    assert client.post(change_url(study), posted(page, **empty)).status_code == 302
    assert AssistedSettings.objects.get(study=study).ai_api_key == STUDY_KEY
    # another endpoint, key box empty: dropped
    data = posted(client.get(change_url(study)), **empty,
                  **{"assisted-0-ai_base_url": second.base_url})
    assert client.post(change_url(study), data).status_code == 302
    saved = AssistedSettings.objects.get(study=study)
    assert (saved.ai_base_url, saved.ai_api_key) == (second.base_url, "")


# ------------------------------------------------------------- refused ranges

@pytest.mark.parametrize(("address", "why"), REFUSED.items(), ids=REFUSED.keys())
def test_every_internal_range_is_refused_when_saved(settings, address, why):
    settings.OVERSIGHT_AI_ALLOWED_HOSTS = ["*"]
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(InvalidStudy, match=why) as caught:
        ai_endpoint_check(f"http://{host}:8000/v1")
    assert caught.value.field == "ai_base_url"


@pytest.mark.parametrize(("address", "why"), REFUSED.items(), ids=REFUSED.keys())
def test_every_internal_range_is_refused_at_request_time_after_resolution(address, why):
    # given: a name the operator allows, which resolves to an internal address
    policy = EgressPolicy.parse(["*"], resolver=scripted({"models.example": [address]}))
    config = ProviderConfig(base_url="http://models.example:8000/v1", model="m",
                            max_retries=2, backoff=0)
    # when / then: refused before any connection, and not retried
    with pytest.raises(ProviderError, match=f"endpoint refused: .*{why}") as caught:
        complete(config, MESSAGES, policy=policy)
    assert caught.value.attempts == 1 and not caught.value.retryable


def test_a_loopback_listener_is_never_reached_unless_its_address_is_listed(standin):
    # given: a real listener on the loopback, named by the allowed name 'localhost'
    listener = standin([reply("ok")])
    url = listener.base_url.replace("127.0.0.1", "localhost")
    config = ProviderConfig(base_url=url, model="m", max_retries=0)
    # when: the name is allowed, its addresses are not
    named = EgressPolicy.parse(["localhost"])
    with pytest.raises(EndpointRefused, match="loopback"):
        endpoint_check(url, policy=named)
    with pytest.raises(ProviderError, match="loopback"):
        complete(config, MESSAGES, policy=named)
    # then: nothing arrived; listing the address opens it
    assert listener.requests == []
    listed = EgressPolicy.parse(["localhost", "127.0.0.0/8", "::1"])
    endpoint_check(url, policy=listed)
    assert complete(config, MESSAGES, policy=listed).text == "ok"
    assert len(listener.requests) == 1


def test_a_name_re_pointed_at_an_internal_address_after_the_save_is_refused(standin):
    # given: at the save the name resolves to a public address; at the request, to the
    # listener on the loopback (DNS rebinding)
    listener = standin([reply("ok")])
    port = listener.base_url.split(":")[2].split("/")[0]
    policy = EgressPolicy.parse(["models.example"], resolver=scripted(
        {"models.example": [[PUBLIC], ["127.0.0.1"]]}))
    url = f"http://models.example:{port}/v1"
    endpoint_check(url, policy=policy)  # saved
    # when / then
    with pytest.raises(ProviderError, match="loopback"):
        complete(ProviderConfig(base_url=url, model="m", max_retries=0), MESSAGES,
                 policy=policy)
    assert listener.requests == []


def test_a_name_with_one_internal_address_among_public_ones_is_refused():
    policy = EgressPolicy.parse(["*"], resolver=scripted(
        {"models.example": [PUBLIC, "10.0.0.7"]}))
    with pytest.raises(EndpointRefused, match="10.0.0.7.*private"):
        endpoint_check("https://models.example/v1", policy=policy)


def test_by_default_only_the_sites_own_endpoint_is_allowed(settings):
    # given: no allow-list; the site's endpoint is a hosted API
    settings.OVERSIGHT_AI_ALLOWED_HOSTS = None
    settings.OVERSIGHT_AI_BASE_URL = "https://api.models.example/v1"
    # then: another host is refused, the site's host (resolved as any) is allowed, and the
    # site's exact endpoint needs no resolution
    with pytest.raises(InvalidStudy, match="not among the AI endpoint hosts"):
        ai_endpoint_check("https://evil.example/v1")
    with pytest.raises(InvalidStudy, match="not among"):
        ai_endpoint_check("http://127.0.0.1:6379/v1")  # the broker
    ai_endpoint_check("https://api.models.example/v1/")


@pytest.mark.parametrize("site", ["http://127.0.0.1:8000/v1", "http://[::1]:8000/v1",
                                  "http://localhost:8000/v1"])
def test_a_site_endpoint_on_the_loopback_opens_that_endpoint_only(settings, site):
    # given: the allow-list unset and a local model server as the site's endpoint
    settings.OVERSIGHT_AI_ALLOWED_HOSTS = None
    settings.OVERSIGHT_AI_BASE_URL = site
    host = site.split("//")[1].rsplit(":", 1)[0]
    # then: the site's endpoint is fine; the broker, the database and the site's other
    # paths on the same host are not
    ai_endpoint_check(site)
    for other in (f"http://{host}:6379/v1", f"http://{host}:5432/", f"http://{host}:8000/admin"):
        with pytest.raises(InvalidStudy):
            ai_endpoint_check(other)


@pytest.mark.parametrize(("url", "why"), [
    ("file:///etc/passwd", "not an http"), ("gopher://127.0.0.1:6379/_INFO", "not an http"),
    ("http://user:secret@127.0.0.1:9/v1", "user name or password"),
    ("http:///v1", "names no host"), ("http://127.0.0.1:99999/v1", "invalid port"),
])
def test_urls_that_are_not_plain_http_endpoints_are_refused(url, why):
    with pytest.raises(InvalidStudy, match=why):
        ai_endpoint_check(url)


def test_refused_endpoints_are_refused_in_both_study_types_save_paths(settings):
    settings.OVERSIGHT_AI_ALLOWED_HOSTS = ["*"]
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], open_=False)
    with pytest.raises(InvalidStudy, match="metadata"):
        critique_settings_update(study=study, ai_base_url="http://169.254.169.254/v1")
    assert CritiqueSettings.objects.get(study=study).ai_base_url == ""
    with pytest.raises(InvalidStudy, match="loopback"):
        make_assisted_study(n_sentences=0, open_=False, ai_base_url="http://127.0.0.1:5432/v1")


def test_the_admin_form_names_the_refusal_on_the_endpoint_field(settings, standin):
    from tests.annotations.assisted.test_admin import change_url, posted

    settings.OVERSIGHT_AI_ALLOWED_HOSTS = ["*"]
    study = make_assisted_study(n_sentences=1, open_=False)
    client = researcher(study)
    data = posted(client.get(change_url(study)),
                  **{"assisted-0-ai_base_url": "http://10.0.0.1:8000/v1"})
    page = client.post(change_url(study), data).content.decode()
    assert "10.0.0.1 is a private address" in page
    assert AssistedSettings.objects.get(study=study).ai_base_url == ""


def test_an_endpoint_removed_from_the_allow_list_after_the_save_is_refused_at_start(
        settings, standin, django_capture_on_commit_callbacks):
    listener = standin([reply("Answer: B")])
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below")
    critique_settings_update(study=study, ai_base_url=listener.base_url, ai_model="m")
    settings.OVERSIGHT_AI_ALLOWED_HOSTS = ["models.example"]
    page = researcher(study).post(reverse("admin:annotations_critiquesettings_ai_run",
                                          args=[study.pk]), follow=True).content.decode()
    assert "AI endpoint refused" in page and "not among the AI endpoint hosts" in page
    assert not CritiqueRun.objects.filter(study=study).exists()
    assert listener.requests == []
    with pytest.raises(ProviderError, match="not among"):
        complete(ProviderConfig(base_url=listener.base_url, model="m"), MESSAGES)
    assert listener.requests == []


# ----------------------------------------------------------- redirects, bodies

@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed(standin, code):
    # given: an allowed endpoint that redirects to another listener (307 and 308 would
    # repeat the POST there, key and all)
    target = standin([reply("followed")])
    server = standin([status(code, b"", headers=[
        ("Location", f"{target.base_url}/chat/completions")])])
    # when / then
    with pytest.raises(ProviderError, match=f"HTTP {code} .*redirects are not followed") as caught:
        complete(ProviderConfig(base_url=server.base_url, model="m", max_retries=3), MESSAGES)
    assert caught.value.attempts == 1 and len(server.requests) == 1
    assert not caught.value.retryable  # the sampling task does not ask again either
    assert target.requests == []


@pytest.mark.parametrize("code", [400, 404, 500])
def test_a_failed_calls_body_is_never_shown_on_the_study_page(
        standin, code, django_capture_on_commit_callbacks):
    # given: an endpoint answering with another service's secrets
    body = b'{"error": "SECRET-INTERNAL-ANSWER redis_version:7.0.15"}'
    server = standin([status(code, body)])
    study, _ = make_critique_study(n_questions=1, top_level=1, counts=[2, 1], mode="ai_below")
    critique_settings_update(study=study, ai_base_url=server.base_url, ai_model="m")
    client = researcher(study)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("admin:annotations_critiquesettings_ai_run", args=[study.pk]))
    # then: the page says the status, the error class and the time, not the body
    page = client.get(reverse("admin:annotations_critiquesettings_change",
                              args=[study.pk])).content.decode()
    run = CritiqueRun.objects.get(study=study)
    assert run.status == "failed"
    assert f"HTTP {code} (" in run.errors[0] and " UTC" in run.errors[0]
    assert f"HTTP {code} (" in page
    assert "SECRET-INTERNAL-ANSWER" not in page and "redis_version" not in page
    assert "SECRET-INTERNAL-ANSWER" not in str(run.errors)


def test_a_non_completion_200_is_described_not_shown(standin):
    from tests.assistants.standin import garbage

    server = standin([garbage(b"+OK SECRET-INTERNAL-ANSWER\r\n")])
    with pytest.raises(ProviderError) as caught:
        complete(ProviderConfig(base_url=server.base_url, model="m", max_retries=0), MESSAGES)
    assert "not JSON (28 bytes)" in str(caught.value)
    assert "SECRET" not in str(caught.value)


def test_a_typo_in_the_allow_list_stops_the_server(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.OVERSIGHT_AI_ALLOWED_HOSTS = ["models.example", "10.0.0.0/33"]
    with pytest.raises(SystemCheckError, match="10.0.0.0/33"):
        call_command("check")
