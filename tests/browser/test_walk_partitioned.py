"""Issue 17, must hold: a partitioned study from an empty database to its raw export, every
step in Chromium. A researcher (a staff account, the only thing made in code) creates the
study with its classes in the admin, adds specialists of every class and a manager on the
Members page (pasted lists; one person joins by the invitation link, the others with their
one-time password, which they must change at once), imports items and predictions from
files, opens the study; each specialist answers one query; the manager reads the dashboard
and downloads the raw export (CSV and JSONL), which holds exactly the answers given."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotations.models import Query, Study, StudyMembership, User
from tests.browser.conftest import login, own_password
from tests.browser.walks import (
    admin_sign_in,
    bulk_add,
    download,
    narrow_too,
    no_sideways_scroll,
    phone,
    via_invitation,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect.set_options(timeout=15_000)

CLASSES = ["Cat", "Dog", "Bird"]
SPECIALISTS = {"Cat": ["cleo"], "Dog": ["dora@example.org"], "Bird": ["bert"]}
INVITED = "bert"  # chooses a password through the invitation link


def _files(tmp_path: Path) -> tuple[Path, Path]:
    """30 named-category items (no options: the class names are the answers) and the
    predictions of two AI systems."""
    items = tmp_path / "photos.csv"
    items.write_text("id,text,gold\n" + "".join(
        f"photo-{i},Photo {i}: which animal is it?,{CLASSES[i % 3]}\n" for i in range(30)))
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(
        json.dumps({"item_id": f"photo-{i}", "system": system,
                    "prediction": CLASSES[(i + (system == "small-model") * (i % 2)) % 3]}) + "\n"
        for i in range(30) for system in ("big-model", "small-model")))
    return items, predictions


def test_a_partitioned_study_from_an_empty_database_to_the_managers_raw_export(
        browser, page, live_server, tmp_path, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.OVERSIGHT_MIN_ANSWER_MS = 0  # the answer rule is test_labelling's; no waiting here
    assert not User.objects.exists() and not Study.objects.exists()
    User.objects.create_user("rita", password="rita-pass-9317", is_staff=True)

    # the researcher creates the study with its classes
    admin_sign_in(page, live_server, "rita", "rita-pass-9317")
    page.get_by_role("link", name="Studies", exact=True).click()
    page.get_by_role("link", name="Add partitioned study").click()
    page.fill("input[name=name]", "Animal photos")
    page.fill("textarea[name=classes]", "\n".join(CLASSES))
    narrow_too(page, "the add-study page")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("created with 3 classes")
    study = Study.objects.get(name="Animal photos")
    narrow_too(page, "the study page")

    # members: a pasted list per class of specialists, then the manager
    page.get_by_role("link", name="Members and accounts").click()
    expect(page.locator("#content h1")).to_contain_text("Members of")
    roles = page.locator("select[name=bulk-role] option").all_inner_texts()
    assert [r.split(" (")[0] for r in roles] == ["Specialist", "Manager", "Reviewer", "Researcher"]
    narrow_too(page, "the members page")
    passwords: dict[str, str] = {}
    invitations: dict[str, str] = {}
    for cls, people in SPECIALISTS.items():
        got = bulk_add(page, people, "specialist", study_class=cls)
        passwords.update({n: p for n, (p, _) in got.items()})
        invitations.update({n: i for n, (_, i) in got.items()})
    got = bulk_add(page, ["mo"], "manager")
    passwords["mo"] = got["mo"][0]
    # a co-researcher through the one-per-row form
    page.fill("input[name=members-0-username]", "rory")
    page.select_option("select[name=members-0-role]", "researcher")
    page.click("input[value='Add these people']")
    passwords["rory"] = page.locator(
        '[data-testid=created] tr[data-username="rory"] code.password').inner_text()
    assert {(m.user.username, m.study_class.name if m.study_class else "")
            for m in StudyMembership.objects.filter(study=study).exclude(role="researcher")
            .select_related("user", "study_class")} == {
        ("cleo", "Cat"), ("dora@example.org", "Dog"), ("bert", "Bird"), ("mo", "")}
    assert set(StudyMembership.objects.filter(study=study, role="researcher")
               .values_list("user__username", flat=True)) == {"rita", "rory"}
    assert User.objects.get(username="rory").is_staff  # a researcher configures in the admin

    # items and predictions through the admin's import pages
    items, predictions = _files(tmp_path)
    page.get_by_role("link", name="Back to the study").first.click()
    page.get_by_role("link", name="Import items").click()
    page.set_input_files("input[name=file]", str(items))
    page.click("input[value=Import]")
    expect(page.get_by_test_id("import-job")).to_contain_text(
        "Imported photos.csv: 30 created, 0 updated.")
    narrow_too(page, "the import job page")
    page.get_by_role("link", name="Back to the study").click()
    page.get_by_role("link", name="Import AI predictions").click()
    expect(page.locator("#content h1")).to_contain_text("Import AI predictions")
    narrow_too(page, "the predictions import page")
    page.set_input_files("input[name=file]", str(predictions))
    page.click("input[value=Import]")
    expect(page.get_by_test_id("import-job")).to_contain_text(
        "Imported predictions.jsonl: 60 predictions created")

    # open it
    page.get_by_role("link", name="Back to the study").click()
    page.get_by_role("link", name="Open the study…").click()
    expect(page.locator("#content")).to_contain_text("cannot go back to draft")
    narrow_too(page, "the open confirmation")
    page.click("input[value='Open the study']")
    expect(page.locator(".messagelist")).to_contain_text("opened, 30 items routed")
    study.refresh_from_db()
    assert study.status == Study.Status.OPEN

    # each specialist, on a phone, signs in and answers one query of their class
    given: dict[str, tuple[str, str]] = {}  # user name -> (query id, answer)
    for cls, (name,) in SPECIALISTS.items():
        with phone(browser) as worker:
            if name == INVITED:
                via_invitation(worker, live_server, invitations[name])
            else:
                # the one-time password leads to the password change before anything else
                login(worker, live_server, name, passwords[name], landing="/accounts/password/")
                worker.goto(f"{live_server.url}/studies/{study.pk}/label/")
                expect(worker).to_have_url(f"{live_server.url}/accounts/password/")
                own_password(worker, passwords[name])
                expect(worker.locator("h1")).to_have_text("Password changed")
                worker.get_by_role("link", name="Back to your studies").click()
            expect(worker).to_have_url(f"{live_server.url}/")
            no_sideways_scroll(worker, "the home page")
            worker.get_by_role("link", name=f"Label as {cls} specialist").click()
            worker.get_by_role("button", name="Get the next query").click()
            card = worker.locator("article.query")
            expect(card).to_be_visible()
            query_id = card.get_attribute("data-query-id")
            no_sideways_scroll(worker, "the labelling page")
            answer = "yes" if cls == "Cat" else "no"
            worker.locator(f"button.answer.{answer}").click()
            expect(worker.get_by_test_id("session-count")).to_have_text("1")
            given[name] = (query_id, answer)
    stored = {q.answered_by.username: (q.public_id, q.answer, q.k) for q in
              Query.objects.filter(study=study, status="answered").select_related("answered_by")}
    assert {n: v[:2] for n, v in stored.items()} == given
    assert {n: CLASSES[v[2]] for n, v in stored.items()} == {
        names[0]: cls for cls, names in SPECIALISTS.items()}

    # the manager: the dashboard from the home page, then the raw export from it
    with phone(browser) as manager:
        login(manager, live_server, "mo", passwords["mo"], landing="/accounts/password/")
        own_password(manager, passwords["mo"])
        manager.goto(f"{live_server.url}/")
        manager.get_by_role("link", name="Dashboard").click()
        expect(manager.get_by_test_id("n-answered")).to_have_text("3")
        no_sideways_scroll(manager, "the dashboard")
        exports = manager.get_by_test_id("raw-exports")
        rows = list(csv.DictReader(download(manager, exports.get_by_role("link", name="CSV"))
                                   .splitlines()))
        lines = [json.loads(line) for line in
                 download(manager, exports.get_by_role("link", name="JSONL")).splitlines()]
        assert len(rows) == len(lines) == 3
        by_query = {q_id: (name, answer) for name, (q_id, answer) in given.items()}
        public = dict(Query.objects.filter(study=study, status="answered")
                      .values_list("pk", "public_id"))
        for row in rows:
            assert by_query[public[int(row["query_id"])]] == (row["specialist"], row["answer"])
        for line in lines:
            assert by_query[public[line["query_id"]]] == (line["specialist"], line["answer"])
        assert {r["class_name"] for r in rows} == set(CLASSES)

    # the co-researcher: their own password, then the study's admin page from the home page
    with phone(browser) as co:
        login(co, live_server, "rory", passwords["rory"], landing="/accounts/password/")
        own_password(co, passwords["rory"])
        co.get_by_role("link", name="Back to your studies").click()
        co.get_by_role("link", name="Configure").click()
        expect(co).to_have_url(f"{live_server.url}/admin/annotations/study/{study.pk}/change/")
        expect(co.locator("section[aria-labelledby=study-steps-title]")).to_contain_text(
            "Status: Open")
