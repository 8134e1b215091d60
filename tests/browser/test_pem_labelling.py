"""Two annotators label one imported chain of thought blind, with the keyboard; an
inspector adjudicates their disagreement; the agreement page then has statistics."""

import json

import pytest
from django.urls import NoReverseMatch, reverse

from k12vista.roles import Role
from pem import labelling, pebench_import
from pem.models import ChainOfThought, StepLabel
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in, open_page
from tests.conftest import PASSWORD, make_person
from tests.pem_factories import label_steps

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

IMPORTED_SECRET = "IMPORTED-EXPLANATION-77"
MODEL_SECRET = "JUDGE-EXPLANATION-42"
JUDGE = "judge-model-k9"
RECORD = {
    "hash_id": "q-pem-browser",
    "question": "如图，直角三角形 $ABC$ 中 $AB=3$，$BC=4$，求 $AC$。",
    "format_solution": ["由勾股定理 $AC^2=AB^2+BC^2$。", "所以 $AC=5$。"],
    "ground_truth": ["5"],
    "student_infer": "...",
    "subject": "math-g9",
    "type": "问答题",
    "step_labels": [
        ["由图可知 $AB=3$，$BC=4$。", "CS", IMPORTED_SECRET],
        ["由勾股定理得 $AC=\\sqrt{3^2+4^2}=\\sqrt{24}$。", "CE", IMPORTED_SECRET],
        ["所以 $AC=5$。", "CS", IMPORTED_SECRET],
    ],
}


def label_with_keys(page, cot, keys_and_reasons, *, secrets_absent):
    """Takes the next item and labels its steps with the number keys; returns the page HTML seen before submitting."""
    page.goto(reverse("pem:label_queue"))
    page.click("#label-next")
    page.wait_for_url("**/pem/label/*/")
    page.locator(".step-text .katex").first.wait_for()  # the steps are typeset
    page.keyboard.press("?")
    page.wait_for_selector("#label-definitions[open]")
    page.keyboard.press("?")
    page.wait_for_selector("#label-definitions:not([open])")
    for key, reason in keys_and_reasons:
        page.keyboard.press(key)
        if reason:
            page.wait_for_selector("textarea:focus")  # an error label asks for its reason at once
            page.keyboard.type(reason)
            page.keyboard.press("Escape")
    page.wait_for_function("() => /v\\d+$/.test(document.getElementById('autosave-status').textContent)")
    html = page.content()
    for secret in secrets_absent:
        assert secret not in html
    labels = page.request.get(reverse("pem_api:item_labels", args=[cot.pk]))
    assert labels.ok and labels.json() == []  # the API is as blind as the page
    page.click("#label-submit")
    page.wait_for_url("**/pem/label/")
    return html


def test_two_annotators_label_blind_and_an_inspector_adjudicates(browser, live_server, tmp_path):
    make_person("wang", Role.ANNOTATOR)
    make_person("zhao", Role.ANNOTATOR)
    inspector = make_person("ivan", Role.INSPECTOR)
    question = make_question(hash_id="q-pem-browser")
    source = tmp_path / "pebench.jsonl"
    source.write_text(json.dumps(RECORD, ensure_ascii=False) + "\n", encoding="utf-8")
    report = pebench_import.import_records(path=source, name="pebench-release")
    assert report.created == 1 and report.failed == 0
    cot = ChainOfThought.objects.get(key="q-pem-browser")
    assert cot.question == question
    label_steps(cot, ["CS", "CE", "CS"], source=StepLabel.Source.MODEL, rater=JUDGE, explanation=MODEL_SECRET)
    labelling.open_labelling(cot)

    wang = open_page(browser, live_server.url)
    log_in(wang, "wang", PASSWORD)
    wang.wait_for_url("**/annotate/")
    seen = label_with_keys(wang, cot, [("1", ""), ("8", "王：√24 算错，应为 √25"), ("1", "")],
                           secrets_absent=[IMPORTED_SECRET, MODEL_SECRET, JUDGE])  # fmt: skip
    assert question.figures.first().image.url in seen  # the question came with its figure
    assert [lab.label for lab in StepLabel.objects.filter(rater="wang").order_by("step__position")] == [
        "CS",
        "CE",
        "CS",
    ]

    zhao = open_page(browser, live_server.url)
    log_in(zhao, "zhao", PASSWORD)
    zhao.wait_for_url("**/annotate/")
    label_with_keys(zhao, cot, [("1", ""), ("5", "赵：勾股定理用错"), ("1", "")],
                    secrets_absent=[IMPORTED_SECRET, MODEL_SECRET, JUDGE, "王：√24 算错"])  # fmt: skip
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.ADJUDICATION

    # After submitting, zhao may compare: wang's reason now shows on zhao's page.
    zhao.click("#label-submitted a")
    zhao.wait_for_selector("[data-others='2']")
    assert "王：√24 算错" in zhao.content()

    ivan = open_page(browser, live_server.url)
    log_in(ivan, "ivan", PASSWORD)
    ivan.goto(reverse("pem:adjudication_queue"))
    ivan.click(f"[data-item='{cot.pk}'] a")
    ivan.wait_for_url(f"**/pem/adjudication/{cot.pk}/")
    html = ivan.content()
    for text in ("王：√24 算错", "赵：勾股定理用错", MODEL_SECRET, f'data-judge="{JUDGE}"'):
        assert text in html
    assert ivan.locator("tr[data-disagree]").count() == 1
    ivan.select_option("select[name=gold-2]", "CE")
    ivan.fill("textarea[name=reason-2]", "√(9+16)=5，计算错误")
    ivan.click("#adjudication-submit")
    ivan.wait_for_url("**/pem/adjudication/")
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.GOLD
    gold = list(StepLabel.objects.gold().filter(step__cot=cot).order_by("step__position"))
    assert [(g.label, g.rater, g.user_id) for g in gold] == [("CS", "ivan", inspector.pk), ("CE", "ivan", inspector.pk),
                                                            ("CS", "ivan", inspector.pk)]  # fmt: skip

    # The agreement page (pem/agreement_views.py, another part of the work) reads these labels.
    try:
        url = reverse("pem:agreement")
    except NoReverseMatch:
        pytest.fail("the agreement page is not wired at pem:agreement yet")
    response = ivan.goto(url)
    assert response.ok
    # The judge model is compared with the gold labels: it gave CS, CE, CS as the gold does.
    judge_row = ivan.locator(f"tr[data-judge='{JUDGE}']")
    assert judge_row.count() == 1
    accuracy = judge_row.locator("[data-stat=accuracy] [data-value]").first.get_attribute("data-value")
    assert float(accuracy) == 1.0
    # And the two annotators with each other: they agreed on two of the three steps.
    raw = ivan.locator("#people-stats [data-stat=raw_agreement] [data-value]").first.get_attribute("data-value")
    assert float(raw) == pytest.approx(2 / 3, abs=1e-3)
    for page in (wang, zhao, ivan):
        assert page.problems == []
        page.context.close()
