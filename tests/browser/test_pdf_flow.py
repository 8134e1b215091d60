"""The question-bank issue's "done when": an annotator uploads a two-column
Chinese exam, sees its questions and figures, corrects one, accepts it, writes
its solution steps and submits."""

import pytest

from annotation.models import Question
from k12vista.roles import Role
from tests import fixtures_pdf
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_it_takes_an_exam_pdf_to_corrected_steps(page, worker, tmp_path):
    exam = tmp_path / "九年级数学期末.pdf"
    exam.write_bytes(fixtures_pdf.two_column_exam().pdf)
    make_person("zhao", Role.ANNOTATOR)
    log_in(page, "zhao", PASSWORD)
    page.wait_for_url("**/annotate/")

    page.goto("/annotate/imports/")
    page.set_input_files("#pdf-upload input[type=file]", str(exam))
    page.select_option("#pdf-upload select[name=pdf-subject]", "math")
    page.select_option("#pdf-upload select[name=pdf-grade]", "9")
    page.click("#pdf-upload button[type=submit]")
    page.wait_for_url("**/annotate/imports/*/")
    page.wait_for_selector("#import-report", timeout=90000)
    page.reload()
    assert page.locator(".imported-question").count() == 8
    assert page.locator(".imported-question img.thumb").count() >= 2  # the raster and the vector figure

    page.goto("/annotate/")
    page.click("button[value=ocr_review]")
    page.wait_for_url("**/annotate/review/*/")
    assert page.locator(".page-frame img").count() == 1  # the page image with the question's box
    assert page.locator(".page-frame .bbox").count() == 1
    text = page.input_value("#id_text")
    assert "x^{2}" in text  # the superscript came back as LaTeX
    page.fill("#id_text", text.replace("则 x 的值是", "则 $x$ 的值是"))
    page.fill("#id_knowledge_points", "平方根")
    reviewed = page.url
    page.click("button[value=accept]")
    page.wait_for_url(lambda url: "/annotate/review/" in url and url != reviewed)  # accept opens the next one
    page.goto("/annotate/")
    first = Question.objects.order_by("id").first()
    assert first.status == Question.Status.OCR_REVIEWED and "则 $x$ 的值是" in first.text
    assert first.answers == ["C"]

    page.click("button[value=step_correction]")
    page.wait_for_url("**/annotate/steps/*/")
    page.locator("textarea[name=step]").first.fill("由 $x^2=4$ 得 $x=\\pm 2$。")
    page.click("button[data-step=add]")
    page.locator("textarea[name=step]").nth(1).fill("故选 C。")
    page.click("button[value=submit]")
    page.wait_for_url("**/annotate/")
    first.refresh_from_db()
    assert first.status == Question.Status.SOLUTION_CORRECTED
    assert first.solution_steps == ["由 $x^2=4$ 得 $x=\\pm 2$。", "故选 C。"]
    assert page.problems == []


def _import(page, path):
    page.goto("/annotate/imports/")
    page.set_input_files("#pdf-upload input[type=file]", str(path))
    page.select_option("#pdf-upload select[name=pdf-subject]", "math")
    page.select_option("#pdf-upload select[name=pdf-grade]", "9")
    page.click("#pdf-upload button[type=submit]")
    page.wait_for_url("**/annotate/imports/*/")
    page.wait_for_selector("#import-report", timeout=90000)
    page.reload()


def test_the_import_page_shows_the_consistency_report_with_its_gaps(page, worker, tmp_path):
    """Issue 11: a three-column paper reads in order; a paper that lost a question says which, on the page."""
    make_person("qian", Role.ANNOTATOR)
    log_in(page, "qian", PASSWORD)
    page.wait_for_url("**/annotate/")

    columns = tmp_path / "三栏.pdf"
    columns.write_bytes(fixtures_pdf.three_column_page())
    _import(page, columns)
    assert page.locator(".imported-question").count() == 6
    report = page.locator("#consistency-report")
    assert report.get_attribute("data-gaps") == "0"
    assert report.locator(".numbers").inner_text() == "1, 2, 3, 4, 5, 6"

    gap = tmp_path / "缺题.pdf"
    gap.write_bytes(fixtures_pdf.gap_paper())
    _import(page, gap)
    report = page.locator("#consistency-report")
    assert report.get_attribute("data-gaps") == "1" and report.locator(".gaps").inner_text() == "3"
    assert "question 3 was not found" in page.locator("#import-report").inner_text()
    assert page.locator(".imported-question [data-code=import_gap]").count() == 2
    assert page.problems == []
