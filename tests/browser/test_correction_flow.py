"""Correcting a released question in a real browser, across the three roles (issue 29): a researcher
opens a correction on the question's page, an annotator finds it in the corrections list and fixes
the answer, an inspector accepts it; the next release carries the fix with its diff, and the
published release still holds the question as it was."""

import pytest

from annotation import releases
from annotation.models import CandidateSet, Correction, Question
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in, open_page
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def person_page(browser, live_server, username, landing):
    page = open_page(browser, live_server.url, timeout_ms=20000)
    log_in(page, username, PASSWORD)
    page.wait_for_url(landing)
    return page


def build(candidate, user):
    release = releases.start_release(candidate_set=candidate, by=user)
    assert execute_job(release.job_id) == Job.Status.SUCCEEDED, Job.objects.get(pk=release.job_id).error
    release.refresh_from_db()
    return release


def test_a_released_question_is_corrected_by_three_roles_and_the_next_release_carries_it(
    browser, live_server, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path / "media"
    researcher = make_person("rita", Role.RESEARCHER)
    make_person("alice", Role.ANNOTATOR)
    make_person("ivan", Role.INSPECTOR)
    questions = [make_question(researcher) for _ in range(2)]
    Question.objects.update(status=Question.Status.AUDITED)
    candidate = CandidateSet.objects.create(name="draw", seed=1, bank_fingerprint="x")
    candidate.questions.set(questions)
    v1 = releases.publish_release(release=build(candidate, researcher), by=researcher)
    question = questions[0]

    # The researcher opens the correction on the released question's page.
    rita = person_page(browser, live_server, "rita", "**/research/")
    rita.goto(f"/annotate/questions/{question.hash_id}/")
    assert rita.get_attribute("#corrections", "data-released-in") == "1"
    rita.fill("#correction-problem", "答案应为 C：$x=3$ 时才满足题意。")
    rita.fill("#correction-proposal", "把答案改为 C。")
    with rita.expect_navigation():
        rita.click("#submit-correction")
    assert rita.get_attribute("#correction", "data-state") == "open"
    correction = Correction.objects.get()

    # The annotator finds it in the corrections list and fixes the answer.
    alice = person_page(browser, live_server, "alice", "**/annotate/")
    assert alice.get_attribute("#corrections-waiting", "data-count") == "1"
    alice.click("#nav-corrections")
    alice.wait_for_url("**/annotate/corrections/")
    with alice.expect_navigation():
        alice.click(f'#correction-list tr[data-correction="{correction.pk}"] a')
    assert "答案应为 C" in alice.text_content("#correction-problem")
    alice.fill("#fix-answers", "C")
    with alice.expect_navigation():
        alice.click("#save-fix")
    assert alice.get_attribute("#correction", "data-state") == "fixed"
    # Values read as the question editor shows them (field_value), never as Python lists.
    assert alice.text_content('#correction-diff tr[data-field="answers"] .after') == "C"

    # The inspector checks it and accepts.
    ivan = person_page(browser, live_server, "ivan", "**/inspect/")
    ivan.goto("/annotate/corrections/?state=fixed")
    with ivan.expect_navigation():
        ivan.click(f'#correction-list tr[data-correction="{correction.pk}"] a')
    with ivan.expect_navigation():
        ivan.click("#accept-fix")
    assert ivan.get_attribute("#correction", "data-state") == "accepted"
    assert Question.objects.get(pk=question.pk).answers == ["C"]

    # The next release carries the fix with its diff; the published one is as it was.
    v2 = build(candidate, researcher)
    rita.goto(f"/annotate/benchmark/releases/v{v2.version}/")
    row = rita.locator(f'#release-corrections tr[data-hash-id="{question.hash_id}"][data-field="answers"]')
    assert row.locator(".before").text_content() == "B" and row.locator(".after").text_content() == "C"
    assert "rita" in row.text_content() and "alice" in row.text_content() and "ivan" in row.text_content()
    with rita.expect_download() as download:
        rita.click("#download-corrections")
    assert '"after": [\n    "C"\n   ]' in download.value.path().read_text(encoding="utf-8")
    rita.goto(f"/annotate/benchmark/releases/v{v1.version}/")
    assert rita.locator("#release-corrections").count() == 0
    assert v1.items.get(hash_id=question.hash_id).content["answers"] == ["B"]
    for page in (rita, alice, ivan):
        assert page.problems == []
