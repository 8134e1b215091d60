import pytest

from annotation import services
from annotation.models import Question
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_reviews_accepts_and_corrects_steps_in_the_browser(page):
    annotator = make_person("wang", Role.ANNOTATOR)
    question = make_question(answers=[], solution_steps=[])
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.click("button[value=ocr_review]")
    page.wait_for_url("**/annotate/review/*/")
    assert page.locator('[data-code="missing_answer"]').count() == 1
    page.locator(".question-view .katex").first.wait_for()  # the question is typeset

    page.fill("#id_answers", "B")
    page.fill("#id_text", "已知 $x^2=9$，且 $x>0$，则 $x$ 等于")
    page.locator("#preview-text .katex").first.wait_for()  # live preview of the edit
    page.keyboard.press("Control+s")
    page.wait_for_load_state("load")
    page.wait_for_selector('[data-code="missing_answer"]', state="detached")
    question.refresh_from_db()
    assert question.answers == ["B"] and question.version == 2

    page.click("button[value=accept]")
    page.wait_for_url("**/annotate/")
    question.refresh_from_db()
    assert question.status == Question.Status.OCR_REVIEWED

    services.add_step_proposal(question=question, steps=["由 $x^2=9$ 得 $x=\\pm 3$。因为 $x>0$，所以 $x=3$。"])
    page.click("button[value=step_correction]")
    page.wait_for_url("**/annotate/steps/*/")
    area = page.locator("textarea[name=step]").first
    area.click()
    area.evaluate("el => el.setSelectionRange(el.value.indexOf('因为'), el.value.indexOf('因为'))")
    page.click("button[data-step=split]")
    assert page.locator("textarea[name=step]").count() == 2
    page.locator("button[data-step=add]").nth(1).click()
    page.locator("textarea[name=step]").nth(2).fill("故选 C。")
    page.locator(".step-preview .katex").first.wait_for()
    page.click("button[value=submit]")
    page.wait_for_url("**/annotate/")
    question.refresh_from_db()
    assert question.solution_steps == ["由 $x^2=9$ 得 $x=\\pm 3$。", "因为 $x>0$，所以 $x=3$。", "故选 C。"]
    assert question.status == Question.Status.SOLUTION_CORRECTED
    assert annotator.assignments.filter(done_at__isnull=True).count() == 0
    assert page.problems == []


def test_it_autosaves_a_draft_while_typing(page):
    make_person("li", Role.ANNOTATOR)
    question = make_question()
    log_in(page, "li", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.click("button[value=ocr_review]")
    page.wait_for_url("**/annotate/review/*/")
    page.fill("#id_raw_solution", "自动保存的解析")
    page.wait_for_selector("#autosave-status:has-text('v2')", timeout=10000)
    question.refresh_from_db()
    assert question.raw_solution == "自动保存的解析"
    # The page now carries the new version, so a manual save is not refused.
    page.fill("#id_answers", "C")
    page.click("button[value=save]")
    page.wait_for_load_state("load")
    question.refresh_from_db()
    assert question.answers == ["C"] and question.version == 3
    assert page.problems == []
