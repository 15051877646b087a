"""An assisted study's rating page in Chromium: a rater drawn into an evidence arm passes the
quiz, reads the assistant's warning, expands the evidence, opens a source, and rates with
the keyboard; what they saw and did is stored. Screenshots for docs/rater.md.

The manager's reliance chart is the assisted dashboard's (another module): it listens to
``rating_recorded``, which this test checks is sent once the rating commits."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotations.assisted.services.design import DEFAULT_QUIZ
from annotations.assisted.services.imports import sentences_import, traces_import
from annotations.assisted.services.signals import rating_recorded
from annotations.models import Exposure, Interaction, Rating, RatingTask
from tests.annotations.assisted.helpers import add_rater, jsonl, make_assisted_study
from tests.assistants.conftest import good_trace
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

READ_MS = 700  # a little over the default minimum time on screen

SENTENCES = [
    {"id": "straw-1", "prompt": "Are strawberries a good source of vitamin C?",
     "response": "Yes. Strawberries are rich in vitamin C. A cup of them covers an adult's "
                 "daily need.", "sentence": "Strawberries are rich in vitamin C.",
     "gold": "accurate"},
    {"id": "straw-2", "prompt": "How much vitamin C do adults need?",
     "response": "Adults need about 40 mg of vitamin C a day. Strawberries are rich in "
                 "vitamin C.", "sentence": "Strawberries are rich in vitamin C.",
     "gold": "accurate"},
]


def realistic_study(**kwargs):
    """Two sentences about strawberries, each with three sampled traces (two argue
    Accurate, one Inaccurate: AI confidence 2/3, shown as "low (67%)")."""
    study = make_assisted_study(n_sentences=0, traces=False, open_=False, **kwargs)
    sentences_import(study=study, source=jsonl(SENTENCES), name="sentences.jsonl")
    traces = [{"sentence": s["id"], "sample": k,
               "trace": good_trace(verdict=v, claims=[{**c, "verdict": v}
                                                      for c in good_trace()["claims"]])}
              for s in SENTENCES for k, v in enumerate(("Accurate", "Accurate",
                                                        "Inaccurate"))]
    traces_import(study=study, source=jsonl(traces), name="traces.jsonl")
    return study
expect.set_options(timeout=15_000)


def test_evidence_rater_passes_the_quiz_expands_evidence_and_rates_by_keyboard(
        page, shots, live_server, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    from annotations.core.services.studies import study_open

    study = realistic_study(seed=21, arms={"Evidence": ["search", "evidence"]})
    study.name = "Demo: fact-checking AI sentences"
    study.save(update_fields=["name"])
    study_open(study=study)
    user = None
    while user is None:  # join raters until one is drawn into the evidence arm
        candidate = add_rater(study, ready=False)
        if candidate.rater_assignments.get().arm.name == "Evidence":
            user = candidate
    received = []

    def listener(sender, study_id, rating_id, **kwargs):
        received.append(rating_id)

    rating_recorded.connect(listener)
    page.context.route("https://example.org/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body="<title>source</title><p>A source page.</p>"))
    try:
        login(page, live_server, user.username)
        page.goto(f"{live_server.url}/studies/{study.pk}/rate/")
        expect(page.get_by_test_id("tutorial")).to_be_visible()
        # a wrong answer first: feedback, no way in
        for i, q in enumerate(DEFAULT_QUIZ):
            wrong = (q["answer"] + 1) % len(q["options"])
            page.locator(f'input[name="q{i}"][value="{wrong}"]').check()
        page.get_by_role("button", name="Check my answers").click()
        expect(page.get_by_test_id("quiz-failed")).to_be_visible()
        for i, q in enumerate(DEFAULT_QUIZ):
            page.locator(f'input[name="q{i}"][value="{q["answer"]}"]').check()
        page.screenshot(path=str(shots / "rater-quiz.png"), full_page=True)
        page.get_by_role("button", name="Check my answers").click()
        expect(page.get_by_test_id("assistant-warning")).to_be_visible()
        page.get_by_role("button", name="I understand: start rating").click()
        expect(page.get_by_role("button", name="Get the next sentence")).to_be_visible()
        page.wait_for_load_state("load")
        page.keyboard.press("Enter")
        card = page.locator("article.rating")
        expect(card).to_be_visible()
        task_id = card.get_attribute("data-query-id")
        panel = page.get_by_test_id("ai-panel")
        expect(panel).to_contain_text("Be careful")
        evidence = panel.locator('details[data-section="evidence"]')
        expect(evidence).not_to_have_attribute("open", "")
        # expand the evidence; its event is stored before the link is opened (two events
        # sent at once may reach the server in either order)
        with page.expect_response(lambda r: r.url.endswith(f"/{task_id}/events/")
                                  and r.request.method == "POST"):
            page.keyboard.press("v")
        expect(evidence).to_have_attribute("open", "")
        with page.context.expect_page() as opened:
            evidence.locator("a[data-link]").first.click()
        opened.value.close()
        page.wait_for_timeout(READ_MS)
        page.keyboard.press("a")  # Accurate
        page.keyboard.press("3")  # mostly confident
        page.keyboard.press("8")  # somewhat helpful
        expect(page.locator('input[name="label"][value="accurate"]')).to_be_checked()
        page.screenshot(path=str(shots / "rater-rating.png"), full_page=True)
        page.keyboard.press("Enter")
        expect(page.get_by_test_id("recorded")).to_have_text("Recorded: Accurate")
        expect(page.locator(f'article.rating:not([data-query-id="{task_id}"])')).to_be_visible()
        expect(page.get_by_test_id("rated-count")).to_have_text("1")
        # issue 17: a rater undoes the last rating (z) and rates the sentence again
        page.keyboard.press("z")
        expect(page.get_by_test_id("message")).to_contain_text("Undone")
        expect(page.locator(f'article.rating[data-query-id="{task_id}"]')).to_be_visible()
        expect(page.get_by_test_id("rated-count")).to_have_text("0")
        page.wait_for_timeout(READ_MS)
        for key in ("a", "3", "8", "Enter"):
            page.keyboard.press(key)
        expect(page.get_by_test_id("recorded")).to_have_text("Recorded: Accurate")
        expect(page.get_by_test_id("rated-count")).to_have_text("1")
        # issue 17: "can't confidently assess" asks no confidence
        second = page.locator("article.rating").get_attribute("data-query-id")
        confidence = page.locator('article.rating input[name="confidence"]').first
        page.keyboard.press("3")  # a confidence first, then the label that takes it back
        page.wait_for_timeout(READ_MS)
        page.keyboard.press("c")
        expect(confidence).to_be_disabled()
        expect(page.locator('input[name="confidence"]:checked')).to_have_count(0)
        page.keyboard.press("a")  # another label asks for a confidence again
        expect(confidence).to_be_enabled()
        expect(confidence).to_have_attribute("required", "")
        page.keyboard.press("c")
        expect(confidence).to_be_disabled()
        page.keyboard.press("2")  # ignored: nothing to choose
        expect(page.locator('input[name="confidence"]:checked')).to_have_count(0)
        page.keyboard.press("7")  # not at all helpful
        page.keyboard.press("Enter")
        expect(page.get_by_test_id("recorded")).to_have_text("Recorded: Can't confidently assess")
        expect(page.get_by_test_id("rated-count")).to_have_text("2")
    finally:
        rating_recorded.disconnect(listener)
    cant = Rating.objects.get(rater=user, task__public_id=second)
    assert (cant.label, cant.confidence, cant.helpfulness) == ("cant_assess", None, 0)
    rating = Rating.objects.get(rater=user, task__public_id=task_id)
    assert (rating.label, rating.confidence, rating.helpfulness) == ("accurate", 2, 1)
    assert rating.task.public_id == task_id and rating.time_on_task_ms >= READ_MS
    exposure = rating.exposure
    assert exposure.components == ["search", "evidence"] and len(exposure.trace_ids) == 1
    kinds = list(Interaction.objects.filter(task__public_id=task_id).order_by("pk")
                 .values_list("kind", "section", "target"))
    assert kinds == [("expand", "evidence", ""), ("open_link", "evidence", "evidence:1")]
    assert received[-2:] == [rating.pk, cant.pk]  # the hook the reliance chart listens to
    # shown twice (the undo gave it back under a second lease): one exposure per lease
    assert list(Exposure.objects.filter(task__public_id=task_id, via="page")
                .order_by("lease").values_list("lease", flat=True)) == [1, 2]
    assert RatingTask.objects.get(public_id=task_id).status == "answered"


def test_researcher_previews_an_arm(page, shots, live_server):
    """The researcher's study page and the preview of an arm (pictures of the guide)."""
    from annotations.models import Arm
    from tests.factories import role_user

    study = realistic_study(seed=23, arms={
        "Evidence": ["search", "evidence"],
        "Full trace": ["search", "evidence", "reasoning", "judgments", "confidence"]})
    login(page, live_server, role_user(study, "researcher").username)
    page.goto(f"{live_server.url}/admin/annotations/assistedstudy/{study.pk}/change/")
    expect(page.get_by_test_id("arms")).to_contain_text("Full trace")
    page.screenshot(path=str(shots / "assisted-study.png"), full_page=True)
    arm = Arm.objects.get(study=study, name="Full trace")
    page.goto(f"{live_server.url}/admin/annotations/assistedstudy/{study.pk}/arms/"
              f"{arm.pk}/preview/")
    preview = page.get_by_test_id("preview")
    expect(preview.get_by_test_id("ai-confidence")).to_have_text("low (67%)")
    preview.locator('details[data-section="reasoning"] summary').click()
    expect(preview).to_contain_text("Predicted verdict for claim (could be incorrect)")
    page.screenshot(path=str(shots / "assisted-preview.png"), full_page=True)


def test_a_researcher_adds_raters_in_the_browser_and_one_joins_by_invitation(
        page, browser, live_server, shots):
    # issue 17: raters could not be added to an assisted study without a shell
    study = realistic_study(seed=23)
    from annotations.core.services.studies import study_open

    study_open(study=study)
    login(page, live_server, f"{study.pk}-researcher")
    page.goto(f"{live_server.url}/admin/annotations/assistedstudy/{study.pk}/change/")
    page.get_by_role("link", name="Members: raters, managers, researchers").click()
    roles = page.locator("select[name=bulk-role] option").all_inner_texts()
    assert [r.split(" (")[0] for r in roles] == ["Rater", "Manager", "Reviewer", "Researcher"]
    page.fill("textarea[name=bulk-people]", "ada@example.org\ngrace")
    page.select_option("select[name=bulk-role]", "annotator")
    page.get_by_role("button", name="Add them all").click()
    created = page.get_by_test_id("created")
    expect(created).to_contain_text("ada@example.org")
    expect(created.locator("tr[data-username=grace]")).to_contain_text("Rater")
    page.screenshot(path=str(shots / "admin-members-raters.png"), full_page=True)
    link = created.locator("tr[data-username=grace] code.invitation").inner_text()
    assert Rating.objects.count() == 0
    rater = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    rater.goto(link)
    rater.fill("input[name=new_password1]", "grace-own-secret-5510")
    rater.fill("input[name=new_password2]", "grace-own-secret-5510")
    rater.get_by_role("button", name="Set my password").click()
    expect(rater).to_have_url(f"{live_server.url}/")
    rater.goto(f"{live_server.url}/studies/{study.pk}/rate/")
    expect(rater.get_by_test_id("tutorial")).to_be_visible()  # a rater, signed in
    rater.goto(link)
    expect(rater.get_by_test_id("invitation-invalid")).to_be_visible()  # once only
    rater.context.close()
