"""Issue 23's "done when" for the segmentation screen: a paper the importer cuts wrongly is imported, a
person repairs it on its pages (draws the missed question, resizes the box that swallowed it, moves a
figure, merges two questions, undoes a wrong merge) and the export writes the repaired questions."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation import export, segmentation
from annotation.models import Figure, Question, SourceDocument
from annotation.pdf import import_document, register_pdf_upload
from k12vista.roles import Role
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person
from tests.fixtures_segmentation import FIGURE, LINES, MISSED, repair_paper

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _at(page, x, y):
    """Screen position of a point of page 1, in PDF points."""
    box = page.locator('.seg-svg[data-page="1"]').bounding_box()
    scale = box["width"] / 595
    return box["x"] + x * scale, box["y"] + y * scale


def _drag(page, start, end):
    page.mouse.move(*_at(page, *start))
    page.mouse.down()
    page.mouse.move(*_at(page, (start[0] + end[0]) / 2, (start[1] + end[1]) / 2), steps=4)
    page.mouse.move(*_at(page, *end), steps=4)
    page.mouse.up()


def _click(page, x, y, shift=False):
    if shift:
        page.keyboard.down("Shift")
    page.mouse.click(*_at(page, x, y))
    if shift:
        page.keyboard.up("Shift")


def _settled(page, count):
    """Waits for the workspace after the count-th repair (or undo) came back (polled from here: the page's
    CSP refuses the eval that wait_for_function needs)."""
    for _ in range(300):
        if page.evaluate("window.__swaps") >= count:
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"repair {count} did not come back")


def test_a_wrongly_cut_paper_is_repaired_on_its_pages_and_exported_as_repaired(page, worker, tmp_path):
    exam = tmp_path / "切错的卷子.pdf"
    exam.write_bytes(repair_paper())
    make_person("lin", Role.ANNOTATOR)
    page.set_viewport_size({"width": 1280, "height": 1500})
    log_in(page, "lin", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.goto("/annotate/imports/")
    page.set_input_files("#pdf-upload input[type=file]", str(exam))
    page.click("#pdf-upload button[type=submit]")
    page.wait_for_url("**/annotate/imports/*/")
    page.wait_for_selector("#import-report", timeout=90000)
    page.reload()
    page.click("#open-segmentation")
    page.wait_for_selector(".seg-svg image")
    page.evaluate("window.__swaps = 0; document.body.addEventListener('htmx:afterSwap', () => window.__swaps++)")
    assert page.locator(".seg-region.kind-question").count() == 4
    assert page.locator(".seg-region.kind-figure").count() == 1
    assert page.locator(".seg-region.kind-answer").count() == 1  # question 3's inline 【答案】

    svg = page.locator('.seg-svg[data-page="1"]')
    page.keyboard.press("+")
    assert svg.evaluate("el => el.style.width") == "125%"
    page.keyboard.press("0")
    page.keyboard.press("?")
    assert page.locator("#seg-help").is_visible()
    page.keyboard.press("Escape")

    # 1. the question printed without its number: n, then its box drawn
    page.keyboard.press("n")
    _drag(page, (55, LINES["missed"] - 13), (300, LINES["missed"] + 5))
    _settled(page, 1)
    assert MISSED in page.locator(".seg-question .seg-text").all_inner_texts()

    # 2. question 2's box, which swallowed it, resized to its own line (its text is read again)
    _click(page, 100, LINES["2"] - 4)
    second_box = page.locator('.seg-region.selected[data-index="0"]').first.get_attribute("data-box")
    x1, y1 = (float(v) for v in second_box.split(",")[2:])
    _drag(page, (x1, y1), (x1, LINES["2"] + 5))
    _settled(page, 2)
    assert page.locator('.seg-question[data-number="2"] .seg-text').inner_text() == "如图，求三角形的面积。"

    # 3. the figure above question 2 is question 2's: select it, f, click question 2
    _click(page, (FIGURE[0] + FIGURE[2]) / 2, (FIGURE[1] + FIGURE[3]) / 2)
    page.keyboard.press("f")
    _click(page, 100, LINES["2"] - 4)
    _settled(page, 3)
    assert page.locator('.seg-question[data-number="2"] .seg-figure-pill').count() == 1
    assert page.locator('.seg-question[data-number="1"] .seg-figure-pill').count() == 0

    # 4. a wrong merge (2 into 1), undone with z; then the right one (4 into 3)
    _click(page, 100, LINES["1"] - 4)
    _click(page, 100, LINES["2"] - 4, shift=True)
    page.keyboard.press("m")
    _settled(page, 4)
    assert "rejected" in page.locator('.seg-question[data-number="2"]').get_attribute("class")
    assert page.locator("#seg-undo").inner_text() == "撤销: 合并"  # Chinese by default
    page.keyboard.press("z")
    _settled(page, 5)
    assert "rejected" not in page.locator('.seg-question[data-number="2"]').get_attribute("class")
    _click(page, 100, LINES["3"] - 4)
    _click(page, 100, LINES["4"] - 4, shift=True)
    page.keyboard.press("m")
    _settled(page, 6)
    assert page.locator("#seg-error").count() == 0
    assert page.problems == []

    # What the export writes is the repaired paper.
    document = SourceDocument.objects.get()
    kept = export.filter_questions({"source_document": document.pk, "status": "imported"})
    out = tmp_path / "export.jsonl"
    export.export_questions(queryset=kept, fmt="reference", out_path=out)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # The reference format marks where a figure stands with <image> (docs/formats.md); the text is what was repaired.
    questions = sorted(r["question"].replace("<image>", "") for r in records)
    assert questions == sorted(["计算 2+3 的值。", "如图，求三角形的面积。", MISSED, "解方程 x+1=4。\n写出解的过程。"])
    by_text = {r["question"].replace("<image>", ""): r for r in records}
    assert by_text["如图，求三角形的面积。"]["img"] and not by_text["计算 2+3 的值。"]["img"]
    assert by_text["解方程 x+1=4。\n写出解的过程。"]["format_answer"]["ground_truth"] == ["x=3"]
    numbers = [q.number for q in segmentation.document_questions(document)]
    assert numbers[:2] == ["1", "2"] and Figure.objects.get().question.text == "如图，求三角形的面积。"
    assert Question.objects.get(text__startswith="写出").status == Question.Status.REJECTED


def test_redo_after_undo_and_a_split_before_a_question_s_second_region(page, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    person = make_person("lin", Role.ANNOTATOR)
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("切错的卷子.pdf", repair_paper()),
                                   user=person)  # fmt: skip
    import_document(document=document, user=person)
    page.set_viewport_size({"width": 1280, "height": 1500})
    log_in(page, "lin", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.goto(f"/annotate/imports/{document.pk}/segmentation/")
    page.wait_for_selector(".seg-svg image")
    page.evaluate("window.__swaps = 0; document.body.addEventListener('htmx:afterSwap', () => window.__swaps++)")
    assert page.locator("#seg-redo").is_disabled()
    page.keyboard.press("?")
    assert "y" in page.locator("#seg-help .seg-keys").inner_text().split()
    page.keyboard.press("Escape")

    # Merge 4 into 3, undo it (z), redo it (y).
    _click(page, 100, LINES["3"] - 4)
    _click(page, 100, LINES["4"] - 4, shift=True)
    page.keyboard.press("m")
    _settled(page, 1)
    page.keyboard.press("z")
    _settled(page, 2)
    assert "rejected" not in page.locator('.seg-question[data-number="4"]').get_attribute("class")
    assert page.locator("#seg-redo").inner_text() == "重做: 合并"
    page.keyboard.press("y")
    _settled(page, 3)
    assert "rejected" in page.locator('.seg-question[data-number="4"]').get_attribute("class")
    assert page.locator("#seg-redo").is_disabled()

    # The merged question runs over two regions: s, then Shift+click its second region splits before it.
    _click(page, 100, LINES["3"] - 4)
    page.keyboard.press("s")
    _click(page, 100, LINES["4"] - 4, shift=True)
    _settled(page, 4)
    assert page.locator("#seg-error").count() == 0
    texts = page.locator(".seg-question:not(.rejected) .seg-text").all_inner_texts()
    assert "写出解的过程。" in texts
    assert page.problems == []
