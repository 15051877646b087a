"""The researcher's admin screens in Chromium: the whole path from an empty database to a
labelled study, the list, import with errors, open a study."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from annotations.models import Item, Query, Study, StudyMembership, User
from assistants.models import AISystem, Prediction
from tests.browser.conftest import login, own_password
from tests.factories import make_study, role_user, specialist

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def admin_login(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()


def test_researcher_imports_items_fixes_an_error_and_opens_the_study(page, shots, live_server,
                                                                   tmp_path, settings):
    """Imports are jobs: the upload lands on the job's page, which shows the errors (and
    the form to upload again), or a progress bar that htmx polls until the summary."""
    settings.OVERSIGHT_IMPORT_RUNNER = "thread"  # the embedded default: the page does not wait
    settings.OVERSIGHT_IMPORT_PROGRESS_SECONDS = 0.1
    study = make_study(k=3, n_items=0, open_=False, seed=61, name="Radiology triage")
    admin_login(page, live_server, role_user(study, "researcher").username)
    page.goto(f"{live_server.url}/admin/annotations/study/")
    row = page.locator("#result_list tr", has_text="Radiology triage")
    expect(row).to_be_visible()
    page.screenshot(path=str(shots / "admin-studies.png"))

    bad = tmp_path / "scans.csv"
    bad.write_text("id,text,gold\nscan-1,First scan,C0\nscan-2,Second scan,C9\n")
    row.get_by_role("link", name="Import items").click()
    page.set_input_files("input[name=file]", str(bad))
    page.click("input[value=Import]")
    expect(page.locator(".errorlist")).to_contain_text(
        "scans.csv:3: gold: 'C9' is not one of the options")
    page.screenshot(path=str(shots / "admin-import-error.png"))
    assert Item.objects.filter(study=study).count() == 0  # nothing half-done

    # fixed, and large enough to watch: the job page's progress bar, then the summary
    n = 60_000
    lines = ["id,text,gold", "scan-1,First scan,C0", "scan-2,Second scan,C2"]
    lines += [f"scan-{i},Scan {i},C{i % 3}" for i in range(3, n + 1)]
    bad.write_text("\n".join(lines) + "\n")
    page.set_input_files("input[name=file]", str(bad))  # the form under the errors
    page.click("input[value=Import]")
    job = page.get_by_test_id("import-job")
    expect(page.locator("progress")).to_be_visible()
    # the line names the phase the job is in; on a fast database reading and writing may
    # fall between two polls, so any phase of a running job (the order and the percentages
    # are test_import_jobs.py's)
    expect(page.get_by_test_id("import-phase")).to_have_text(re.compile(
        r"Waiting to start…|Starting…|Reading and checking scans\.csv|Writing [0-9,]+ of"
        r"|Committing"))
    # a picture for the guide once the bar has moved (if the import is still running)
    page.wait_for_function("""() => { const bar = document.querySelector('progress');
        return !bar || bar.value > 0; }""", timeout=120_000)
    if page.locator("progress").count():
        page.screenshot(path=str(shots / "admin-import-progress.png"))
    expect(job).to_have_attribute("data-status", "succeeded", timeout=120_000)
    expect(job).to_contain_text(f"Imported scans.csv: {n} created, 0 updated.")
    expect(page.get_by_test_id("created")).to_have_text(f"{n:,}")
    expect(page.locator("progress")).to_have_count(0)
    page.screenshot(path=str(shots / "admin-import-done.png"))
    assert Item.objects.filter(study=study).count() == n

    page.goto(f"{live_server.url}/admin/annotations/study/")
    page.locator("#result_list tr", has_text="Radiology triage").locator(
        "input.action-select").check()
    page.select_option("select[name=action]", "open_studies")
    # routing 60 000 items takes 1.5 s on a quiet machine, over 10 s on a loaded CI one
    page.click("button[name=index]", timeout=60_000)
    expect(page.locator(".messagelist")).to_contain_text(f"opened, {n} items routed")
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN
    assert Query.objects.filter(study=study).count() == n


def test_specialist_home_lists_their_studies(page, shots, live_server):
    study = make_study(k=3, n_items=6, seed=62, name="Contract clauses")
    login(page, live_server, specialist(study, 1).username)
    expect(page.get_by_role("link", name="Label as C1 specialist")).to_be_visible()
    page.screenshot(path=str(shots / "home.png"))


def test_from_an_empty_database_to_a_labelled_study_and_its_dashboard(browser, page, shots,
                                                                      live_server, tmp_path,
                                                                      settings):
    """One superuser creates a researcher account; the researcher creates a study with its
    classes, creates specialists and a manager, imports items and predictions, opens the
    study from its page; a specialist answers one query; the manager sees the dashboard."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    User.objects.create_superuser("admin", password="admin-pass-4821")

    # the superuser creates a researcher account (staff status: may create studies)
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "admin-pass-4821")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_have_text("Oversight")
    page.goto(f"{live_server.url}/admin/annotations/user/add/")
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password1]", "rita-pass-9317")
    page.fill("input[name=password2]", "rita-pass-9317")
    page.check("input[name=is_staff]")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("rita")
    assert User.objects.get(username="rita").is_staff
    page.context.clear_cookies()

    # the researcher: a study with its classes, in one form
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("input[name=username]", "rita")
    page.fill("input[name=password]", "rita-pass-9317")
    page.click("input[type=submit]")
    page.get_by_role("link", name="Studies", exact=True).click()
    page.get_by_role("link", name="Add partitioned study").click()
    page.fill("input[name=name]", "Capital cities")
    page.fill("textarea[name=classes]", "A\nB\nC\nD")
    page.screenshot(path=str(shots / "admin-add-study.png"), full_page=True)
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("created with 4 classes")
    study = Study.objects.get(name="Capital cities")
    expect(page.locator("section[aria-labelledby=study-steps-title]")).to_contain_text("Still missing")

    # members: four specialists (one per class) and a manager, accounts created here
    page.get_by_role("link", name="Members and accounts").click()
    people = [(f"spec-{c.lower()}", "specialist", c) for c in "ABCD"] + [
        ("mo", "manager", "")]
    for i, (name, role, cls) in enumerate(people):
        page.fill(f"input[name=members-{i}-username]", name)
        page.select_option(f"select[name=members-{i}-role]", role)
        if cls:
            page.select_option(f"select[name=members-{i}-study_class]", label=cls)
    page.click("input[value='Add these people']")
    expect(page.locator(".passwords")).to_contain_text("only now")
    passwords = {name: page.locator(f".passwords tr[data-username='{name}'] code.password")
                 .inner_text() for name, _, _ in people}
    page.screenshot(path=str(shots / "admin-members-created.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(tmp_path / "members-phone.png"), full_page=True)
    members_width = page.evaluate("document.documentElement.scrollWidth")
    page.set_viewport_size({"width": 1200, "height": 900})
    assert StudyMembership.objects.filter(study=study, role="specialist").count() == 4

    # items and predictions from files, from the study page's buttons
    cities = [("France", "Paris", "Lyon", "Nice", "Lille"),
              ("Italy", "Milan", "Rome", "Turin", "Naples"),
              ("Spain", "Seville", "Valencia", "Madrid", "Bilbao"),
              ("Portugal", "Porto", "Braga", "Faro", "Lisbon")] * 3
    items = tmp_path / "capitals.csv"
    rows = ["id,text,options,gold"]
    golds = {"France": "Paris", "Italy": "Rome", "Spain": "Madrid", "Portugal": "Lisbon"}
    for i, (country, *options) in enumerate(cities):
        cell = json.dumps(options).replace('"', '""')
        rows.append(f'q{i},What is the capital of {country}?,"{cell}",{golds[country]}')
    items.write_text("\n".join(rows) + "\n")
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("\n".join(
        json.dumps({"item_id": f"q{i}", "system": system,
                    "prediction": golds[country] if system == "big-model" or i % 3 else
                    options[0]})
        for i, (country, *options) in enumerate(cities) for system in ("big-model",
                                                                       "small-model")) + "\n")
    page.get_by_role("link", name="Back to the study").click()
    page.get_by_role("link", name="Import items").click()
    page.set_input_files("input[name=file]", str(items))
    page.click("input[value=Import]")
    expect(page.get_by_test_id("import-job")).to_contain_text(
        "Imported capitals.csv: 12 created, 0 updated.")
    page.get_by_role("link", name="Back to the study").click()
    page.get_by_role("link", name="Import AI predictions").click()
    page.set_input_files("input[name=file]", str(predictions))
    page.click("input[value=Import]")
    expect(page.get_by_test_id("import-job")).to_contain_text(
        "Imported predictions.jsonl: 24 predictions created")
    expect(page.get_by_test_id("unparseable")).to_have_text("none")
    page.get_by_role("link", name="Back to the study").click()
    assert AISystem.objects.filter(study=study).count() == 2
    assert Prediction.objects.filter(system__study=study).count() == 24
    expect(page.locator("section[aria-labelledby=study-steps-title]")).not_to_contain_text("Still missing")
    page.screenshot(path=str(shots / "admin-study-page.png"), full_page=True)

    # open it from the button, after the confirmation page
    page.get_by_role("link", name="Open the study…").click()
    expect(page.locator("#content")).to_contain_text("cannot go back to draft")
    page.screenshot(path=str(shots / "admin-open-confirm.png"), full_page=True)
    page.click("input[value='Open the study']")
    expect(page.locator(".messagelist")).to_contain_text("opened, 12 items routed")
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN
    assert Query.objects.filter(study=study).count() == 12
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(shots / "admin-study-page-phone.png"), full_page=True)
    width = page.evaluate("document.documentElement.scrollWidth")
    page.set_viewport_size({"width": 1200, "height": 900})

    # a specialist of a class with a waiting query answers it with the password shown once
    k = Query.objects.filter(study=study).order_by("rank").first().k
    name = f"spec-{'abcd'[k]}"
    specialist_page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    # a one-time password leads to the password change before anything else (issue 17)
    login(specialist_page, live_server, name, passwords[name], landing="/accounts/password/")
    specialist_page.goto(f"{live_server.url}/studies/{study.pk}/label/")
    expect(specialist_page).to_have_url(f"{live_server.url}/accounts/password/")
    own_password(specialist_page, passwords[name])
    expect(specialist_page.locator("h1")).to_have_text("Password changed")
    specialist_page.screenshot(path=str(tmp_path / "password-changed.png"))
    specialist_page.get_by_role("link", name="Back to your studies").click()
    specialist_page.get_by_role("link", name=f"Label as {'ABCD'[k]} specialist").click()
    specialist_page.get_by_role("button", name="Get the next query").click()
    card = specialist_page.locator("article.query")
    expect(card).to_be_visible()
    query_id = card.get_attribute("data-query-id")
    specialist_page.wait_for_timeout(1500)  # a query must be on screen a moment first
    specialist_page.locator("button.answer.no").click()
    expect(specialist_page.get_by_test_id("session-count")).to_have_text("1")
    assert Query.objects.get(public_id=query_id).answer == "no"
    specialist_page.context.close()

    # the manager reads the dashboard
    manager_page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    login(manager_page, live_server, "mo", passwords["mo"], landing="/accounts/password/")
    own_password(manager_page, passwords["mo"])
    manager_page.goto(f"{live_server.url}/studies/{study.pk}/dashboard/")
    expect(manager_page.get_by_test_id("n-answered")).to_have_text("1", timeout=10_000)
    expect(manager_page.locator("table.estimates tr[data-system=big-model]")).to_have_count(1)
    manager_page.context.close()
    assert width <= 390 + 1, f"the study page scrolls sideways at 390 px ({width} px wide)"
    assert members_width <= 390 + 1, f"the members page is {members_width} px wide at 390 px"


@pytest.mark.parametrize("width", [390, 1280])
def test_the_study_page_and_members_page_do_not_scroll_sideways(page, live_server, width):
    """At 1280 px the classes and members inlines (description and guidelines boxes)
    made the study's admin page 1 386 px wide; at 800–1024 px the members form did the
    same. Wide tables now scroll inside their box."""
    study = make_study(k=5, n_items=4, seed=67, name="A study with five classes")
    page.set_viewport_size({"width": width, "height": 900})
    admin_login(page, live_server, role_user(study, "researcher").username)
    for url in (f"/admin/annotations/study/{study.pk}/change/",
                f"/admin/annotations/study/{study.pk}/members/"):
        page.goto(live_server.url + url)
        expect(page.locator("#content")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width, url
    page.set_viewport_size({"width": 800, "height": 900})
    assert page.evaluate("document.documentElement.scrollWidth") <= 800


def test_the_sampling_progress_on_an_assisted_study_page_updates_by_itself(page, live_server):
    """The progress block polls (htmx) while a sampling run is under way; before, the admin
    page never loaded htmx and the block stayed at its first figures until a reload."""
    from django.utils import timezone

    from annotations.models import Sentence
    from assistants.models import SamplingRun, SentenceSampling
    from tests.annotations.assisted.helpers import make_assisted_study
    from tests.factories import role_user

    # given: a run of two sentences, none sampled yet
    study = make_assisted_study(n_sentences=2, traces=False, open_=False)
    run = SamplingRun.objects.create(study=study, n_samples=3,
                                     config={"model": "m", "endpoint": "http://127.0.0.1:9/v1"})
    for sentence in Sentence.objects.filter(study=study):
        SentenceSampling.objects.create(run=run, sentence=sentence)
    user = role_user(study, "researcher")
    user.set_password("pw")
    user.save()
    login(page, live_server, user.username)
    page.goto(f"{live_server.url}/admin/annotations/assistedstudy/{study.pk}/change/")
    progress = page.get_by_test_id("sampling-progress")
    expect(progress).to_contain_text("0 / 2")
    # when: the worker finishes both sentences
    SentenceSampling.objects.filter(run=run).update(status="done", finished_at=timezone.now())
    SamplingRun.objects.filter(pk=run.pk).update(finished_at=timezone.now())
    # then: the page says so without a reload
    expect(progress).to_contain_text("2 / 2", timeout=8_000)
    expect(progress).to_contain_text("finished")
