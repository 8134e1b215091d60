"""An annotator's day in the browser: a narrowed queue with accept-and-next by keyboard, an autosave
that is refused because someone else saved first (shown at once), and step correction by keyboard
with autosave and a warning before leaving unsaved work."""

import pytest

from annotation import services
from annotation.models import Assignment, Question
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_accepts_and_opens_the_next_question_of_the_chosen_subject(page):
    make_person("wang", Role.ANNOTATOR)
    physics = [make_question(subject="physics", text="物体的速度为 $v$") for _ in range(2)]
    make_question(subject="math")
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.select_option("#queue-choices select[name=subject]", "physics")
    page.click("#queue-choices button")
    page.wait_for_url("**subject=physics**")
    page.click("button[value=ocr_review]")
    page.wait_for_url("**/annotate/review/*/")
    first = page.url
    page.locator("#id_text").focus()
    page.keyboard.press("Control+Enter")
    page.wait_for_url(lambda url: "/annotate/review/" in url and url != first)
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/annotate/")
    assert {q.status for q in Question.objects.filter(pk__in=[q.pk for q in physics])} == {Question.Status.OCR_REVIEWED}
    assert Question.objects.get(subject="math").status == Question.Status.IMPORTED
    assert page.problems == []


def test_it_shows_an_autosave_conflict_at_once_with_what_changed(page):
    wang = make_person("wang", Role.ANNOTATOR)
    question = make_question()
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.click("button[value=ocr_review]")
    page.wait_for_url("**/annotate/review/*/")
    # Another tab saves first.
    services.edit_question(
        question=question, changes={"raw_solution": "另一个标签页的解析", "answers": ["BB"]}, user=wang,
        expected_version=question.version,
    )  # fmt: skip
    page.fill("#id_answers", "C")
    alert = page.locator("#conflict [role=alert]")
    alert.wait_for(timeout=10000)
    card = alert.inner_text()
    assert "另一个标签页的解析" in card
    # Fields by their labels and values as the form shows them, not raw names and Python lists.
    assert "答案" in card and "解析" in card and "BB" in card
    assert "raw_solution" not in card and "answers" not in card and "['" not in card
    assert page.locator("#autosave-status.status-failed").count() == 1
    question.refresh_from_db()
    assert question.answers == ["BB"]  # nothing of the refused save was written (its "C")
    page.click("#keep-mine")  # this page's version replaces theirs
    page.wait_for_load_state()
    page.locator("#conflict [role=alert]").wait_for(state="detached")
    question.refresh_from_db()
    assert question.answers == ["C"] and question.raw_solution != "另一个标签页的解析"
    assert [p for p in page.problems if "409" not in p] == []


def test_it_corrects_steps_by_keyboard_autosaves_and_warns_before_leaving(page):
    wang = make_person("wang", Role.ANNOTATOR)
    question = make_question(solution_steps=[])
    question.accept_ocr(by=wang)
    services.add_step_proposal(question=question, steps=["由 $x^2=4$ 得 $x=2$。故选 B。"])
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.click("button[value=step_correction]")
    page.wait_for_url("**/annotate/steps/*/")
    area = page.locator("textarea[name=step]").first
    area.click()
    area.evaluate("el => el.setSelectionRange(el.value.indexOf('故'), el.value.indexOf('故'))")
    page.keyboard.press("Alt+s")  # split at the cursor
    assert page.locator("textarea[name=step]").count() == 2
    page.keyboard.press("Alt+n")  # a new step below the one being typed in (the second part)
    assert page.locator("textarea[name=step]").count() == 3
    page.keyboard.type("检验：$2^2=4$。")
    page.wait_for_function("() => /v\\d+$/.test(document.getElementById('autosave-status').textContent)", timeout=10000)
    question.refresh_from_db()
    assert question.solution_steps == ["由 $x^2=4$ 得 $x=2$。", "故选 B。", "检验：$2^2=4$。"]
    # A change not yet autosaved: leaving asks first.
    page.locator("textarea[name=step]").first.fill("改过但没保存")
    dialogs = []
    page.once("dialog", lambda dialog: (dialogs.append(dialog.type), dialog.dismiss()))
    page.evaluate("location.href = '/annotate/'")
    page.wait_for_timeout(500)
    assert dialogs == ["beforeunload"]
    assert Assignment.objects.get(annotator=wang, task=Assignment.Task.STEP_CORRECTION).done_at is None
    assert page.problems == []
