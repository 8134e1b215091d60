"""The question-bank issue's "done when": an annotator uploads a two-column
Chinese exam, sees its questions and figures, corrects one, accepts it, writes
its solution steps and submits."""

import json

import pytest

from annotation import services
from annotation.models import Question, SourceDocument
from bench import real_papers
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
    assert page.locator(".seg-page .seg-svg image").count() == 1  # the page image with the question's box
    assert page.locator(".seg-page .seg-region.kind-question.mine").count() == 1
    # the questions around it, for a wrong cut
    assert page.locator(".seg-page .seg-region.kind-question:not(.mine)").count() >= 1
    # The segmentation screen's page viewer, not a fixed-size image: it zooms (and pans when dragged).
    viewer = page.locator(".seg-page .seg-svg").first
    width = viewer.bounding_box()["width"]
    page.click('[data-seg-zoom="+"]')
    assert viewer.evaluate("el => el.style.width") == "125%"
    assert viewer.bounding_box()["width"] > width * 1.2
    page.click('[data-seg-zoom="-"]')
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
    assert "未找到第 3 题" in page.locator("#import-report").inner_text()  # worded in the reader's language
    assert page.locator(".imported-question [data-code=import_gap]").count() == 2
    assert page.problems == []


# --- real papers (../shared/realdata/exams, skipped where absent) -------------------------------------

REAL = real_papers.default_folder()
needs_real = pytest.mark.skipif(not (REAL / "expected.json").exists(), reason="../shared/realdata is not here")
# The smallest of their kinds: two A3 pages in three columns (text layer), and two A3 pages whose first is a
# raster scan read by OCR (the default backend, RapidOCR, in the worker).
THREE_COLUMNS = "math_2024_shanghai.pdf"
SCANNED = "math_2021_quanguojia_li.pdf"


def _report(page):
    report = page.locator("#consistency-report")
    numbers = [n for n in report.locator(".numbers").inner_text().split(", ") if n]
    gaps = int(report.get_attribute("data-gaps"))
    return numbers, gaps


@needs_real
def test_an_annotator_imports_real_papers_and_fixes_a_wrong_cut_on_the_page(page, worker, tmp_path):
    expected = {p["file"]: p for p in json.loads((REAL / "expected.json").read_text(encoding="utf-8"))}
    make_person("sun", Role.ANNOTATOR)
    log_in(page, "sun", PASSWORD)
    page.wait_for_url("**/annotate/")

    # A three-column A3 paper: its report lists the numbers found and any gap, each gap said in words.
    _import(page, REAL / THREE_COLUMNS)
    numbers, gaps = _report(page)
    assert len(numbers) >= 0.9 * expected[THREE_COLUMNS]["question_count"]
    assert gaps == 0 or len(page.locator("#import-report li").all()) >= gaps  # each gap is a warning too
    columns = SourceDocument.objects.get(original_name=THREE_COLUMNS)
    assert page.locator(".imported-question").count() == Question.objects.filter(source_document=columns).count()

    # A paper whose first page is a scan: the worker reads it by OCR; its report is there too.
    page.goto("/annotate/imports/")
    page.set_input_files("#pdf-upload input[type=file]", str(REAL / SCANNED))
    page.click("#pdf-upload button[type=submit]")
    page.wait_for_url("**/annotate/imports/*/")
    page.wait_for_selector("#import-report", timeout=420000)
    page.reload()
    scanned = SourceDocument.objects.get(original_name=SCANNED)
    assert scanned.pages.get(number=1).text_source != "text-layer"  # read by OCR
    assert Question.objects.filter(source_document=scanned, source_page__number=1).exists()  # from the scan
    numbers, gaps = _report(page)
    assert len(numbers) >= 0.9 * expected[SCANNED]["question_count"]
    assert gaps == 0 or len(page.locator("#import-report li").all()) >= gaps

    # A question cut in two (as a detector may cut it): the annotator sees both pieces on the page and joins them.
    first = Question.objects.filter(source_document=columns).order_by("id").first()
    at = len(first.text) // 2
    tail = services.split_question(question=first, at=at, user=None)
    head_text = Question.objects.get(pk=first.pk).text
    page.goto("/annotate/")
    page.click("button[value=ocr_review]")
    page.wait_for_url("**/annotate/review/*/")
    assert page.locator(".seg-page .seg-region.mine").count() >= 1
    assert page.locator(f'.seg-page .seg-region[data-hash="{tail.hash_id}"]').count() >= 1
    piece = page.locator(f'.merge-candidates [data-question="{tail.hash_id}"]')
    assert piece.count() == 1
    piece.locator("button").click()
    page.wait_for_url("**/annotate/review/*/")
    joined = Question.objects.get(pk=first.pk)
    assert joined.text.startswith(head_text) and tail.text in joined.text
    assert Question.objects.get(pk=tail.pk).status == Question.Status.REJECTED
    assert page.locator(f'.seg-page .seg-region[data-hash="{tail.hash_id}"]').count() == 0
    assert page.problems == []
