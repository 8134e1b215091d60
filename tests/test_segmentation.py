"""The segmentation screen's repairs (annotation.segmentation): each one, its history and its undo."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from annotation import ocr, segmentation, services
from annotation.models import Figure, Page, Question, QuestionEdit, Repair, Segment
from annotation.pdf import import_document, register_pdf_upload
from annotation.segmentation import RepairError
from k12vista.roles import Role
from tests import fixtures_pdf
from tests.conftest import make_person
from tests.fixtures_segmentation import FIGURE, LINES, MISSED, box_round, repair_paper

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


@pytest.fixture
def person(db):
    return make_person("sun", Role.RESEARCHER)


@pytest.fixture
def paper(person):
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("切错的卷子.pdf", repair_paper()))
    import_document(document=document)
    return document


def numbered(document):
    return {q.number: q for q in segmentation.document_questions(document)}


def fresh(question):
    return Question.objects.get(pk=question.pk)


def test_the_import_keeps_each_questions_number_and_the_screen_shows_its_regions(paper):
    questions = numbered(paper)
    assert list(questions) == ["1", "2", "3", "4"]
    assert "已知 a=2" in questions["2"].text  # the importer's mistake this paper is made for
    (view,) = segmentation.page_views(paper, list(questions.values()))
    kinds = [(r.kind, r.question.number) for r in view.regions]
    assert kinds.count(("question", "1")) == 1 and ("figure", "1") in kinds
    figure = next(r for r in view.regions if r.kind == "figure")
    assert figure.box == list(FIGURE)
    assert not Segment.objects.filter(human=True).exists()


def test_the_import_keeps_where_options_answer_and_solution_were_read():
    from annotation.pdf.layout import Line

    def line(text, y, column=0):
        return Line(text, (60.0 + 250 * column, y, 200.0 + 250 * column, y + 12), 1, (1, 0, column, y))

    lines = [line("5．下列说法正确的是（  ）", 100), line("A．甲    B．乙", 116), line("C．丙    D．丁", 132),
             line("【答案】B", 148), line("【解析】因为甲不对，", 164), line("所以选 B。", 100, column=1)]  # fmt: skip
    assert segmentation.part_regions(lines) == [
        ["options", 1, 60.0, 116.0, 200.0, 144.0],
        ["answer", 1, 60.0, 148.0, 200.0, 160.0],
        ["solution", 1, 60.0, 164.0, 200.0, 176.0],
        ["solution", 1, 310.0, 100.0, 450.0, 112.0],  # the solution goes on in the next column
    ]
    assert segmentation.part_regions(lines[:1]) == []


def test_the_screen_draws_the_answer_where_it_was_read_and_it_moves_with_the_answer(paper, person):
    questions = numbered(paper)
    assert questions["3"].answers == ["x=3"]
    (view,) = segmentation.page_views(paper, list(questions.values()))
    (answer,) = [r for r in view.regions if r.kind == "answer"]
    assert answer.question == questions["3"] and answer.box[1] < LINES["answer3"] < answer.box[3]
    segmentation.move_answer(source=questions["3"], to=questions["4"], user=person)
    assert fresh(questions["4"]).segment.regions[0][0] == "answer" and fresh(questions["3"]).segment.regions == []
    segmentation.undo(document=paper, user=person)
    assert fresh(questions["3"]).segment.regions[0][0] == "answer" and fresh(questions["4"]).segment.regions == []
    segmentation.merge(first=questions["2"], second=questions["3"], user=person)
    assert [r[0] for r in fresh(questions["2"]).segment.regions] == ["answer"]
    (view,) = segmentation.page_views(paper, segmentation.document_questions(paper))
    assert {r.question.number for r in view.regions if r.kind == "answer"} == {"2"}  # 3 is merged away


def test_a_drawn_box_adds_the_missed_question_with_its_text_and_undo_takes_it_away(paper, person):
    page = paper.pages.get()
    added = segmentation.add_question(document=paper, page=page, box=box_round("missed"), user=person, label="2a")
    assert added.text == MISSED and added.boxes == [[1, *segmentation._clean_box(page, box_round("missed"))]]
    assert added.segment.label == "2a" and added.segment.human
    assert list(numbered(paper)) == ["1", "2", "2a", "3", "4"]  # in reading order, after the question above it
    assert QuestionEdit.objects.filter(question=added, note="drawn on the segmentation screen").exists()
    # A box round a numbered line takes its number as the label and leaves it out of the text.
    third = segmentation.add_question(document=paper, page=page, box=box_round("3"), user=person)
    assert third.segment.label == "3" and third.text == "解方程 x+1=4。"

    segmentation.undo(document=paper, user=person)
    segmentation.undo(document=paper, user=person)
    assert not Question.objects.filter(pk__in=[added.pk, third.pk]).exists()
    assert Repair.objects.filter(document=paper, undone_at__isnull=False).count() == 2
    with pytest.raises(RepairError):
        segmentation.undo(document=paper, user=person)


def test_a_resized_box_reads_its_text_again_and_undo_puts_both_back(paper, person):
    second = numbered(paper)["2"]
    before = (second.text, second.boxes)
    moved = segmentation.move_box(question=second, index=0, box=box_round("2"), user=person)
    assert moved.text == "如图，求三角形的面积。"
    assert moved.boxes[0][2] == LINES["2"] - 13
    fields = set(QuestionEdit.objects.filter(question=second).values_list("field", flat=True))
    assert {"boxes", "text"} <= fields
    segmentation.undo(document=paper, user=person)
    assert (fresh(second).text, fresh(second).boxes) == before
    assert not fresh(second).segment.human  # the import's cut again


def test_split_at_a_line_makes_two_questions(paper, person):
    second = numbered(paper)["2"]
    created = segmentation.split(question=second, index=0, y=LINES["missed"] - 14, user=person, label="2b")
    assert fresh(second).text == "如图，求三角形的面积。"
    assert created.text == MISSED and created.segment.label == "2b"
    assert fresh(second).boxes[0][4] == LINES["missed"] - 14 == created.boxes[0][2]
    with pytest.raises(RepairError):  # outside the region
        segmentation.split(question=fresh(second), index=0, y=10, user=person)
    segmentation.undo(document=paper, user=person)
    assert not Question.objects.filter(pk=created.pk).exists()
    assert "已知 a=2" in fresh(second).text


def test_merge_joins_two_questions_and_undo_parts_them(paper, person):
    questions = numbered(paper)
    merged = segmentation.merge(first=questions["3"], second=questions["4"], user=person)
    assert merged.text == "解方程 x+1=4。\n写出解的过程。"
    assert fresh(questions["4"]).status == Question.Status.REJECTED
    segmentation.undo(document=paper, user=person)
    assert fresh(questions["3"]).text == "解方程 x+1=4。"
    assert fresh(questions["4"]).status == Question.Status.IMPORTED and fresh(questions["4"]).reject_reason == ""


def test_renumber_and_undo(paper, person):
    first = numbered(paper)["1"]
    segmentation.renumber(question=first, label="一", user=person)
    assert list(numbered(paper))[0] == "一"
    assert QuestionEdit.objects.filter(question=first, field="number", old="1", new="一").exists()
    segmentation.undo(document=paper, user=person)
    assert list(numbered(paper))[0] == "1"


def test_a_figure_moves_to_its_question_with_its_region(paper, person):
    questions = numbered(paper)
    figure = Figure.objects.get(question=questions["1"])
    segmentation.move_figure(figure=figure, to=questions["2"], user=person)
    assert Figure.objects.get(pk=figure.pk).question_id == questions["2"].pk
    assert [1, *FIGURE] in fresh(questions["2"]).boxes and [1, *FIGURE] not in fresh(questions["1"]).boxes
    segmentation.undo(document=paper, user=person)
    assert Figure.objects.get(pk=figure.pk).question_id == questions["1"].pk
    assert [1, *FIGURE] in fresh(questions["1"]).boxes and [1, *FIGURE] not in fresh(questions["2"]).boxes


def test_an_answer_moves_to_another_question(paper, person):
    questions = numbered(paper)
    services.edit_question(question=questions["3"], changes={"answers": ["x=3"], "raw_solution": "移项得 x=3。"},
                           user=person, expected_version=questions["3"].version)  # fmt: skip
    with pytest.raises(RepairError):
        segmentation.move_answer(source=questions["4"], to=questions["3"], user=person)  # it has none
    segmentation.move_answer(source=fresh(questions["3"]), to=questions["4"], user=person)
    assert fresh(questions["4"]).answers == ["x=3"] and fresh(questions["4"]).raw_solution == "移项得 x=3。"
    assert fresh(questions["3"]).answers == [] and fresh(questions["3"]).raw_solution == ""
    segmentation.undo(document=paper, user=person)
    assert fresh(questions["3"]).answers == ["x=3"] and fresh(questions["4"]).answers == []


def test_a_shared_stem_goes_before_the_questions_it_introduces_and_a_title_is_no_question(paper, person):
    questions = numbered(paper)
    segmentation.mark(question=questions["1"], kind=Segment.Kind.STEM, count=2, user=person)
    assert fresh(questions["2"]).text.startswith("计算 2+3 的值。\n")
    assert fresh(questions["3"]).text.startswith("计算 2+3 的值。\n")
    assert not fresh(questions["4"]).text.startswith("计算")
    assert fresh(questions["1"]).status == Question.Status.REJECTED and fresh(questions["1"]).segment.kind == "stem"
    segmentation.mark(question=questions["4"], kind=Segment.Kind.NOT_QUESTION, user=person)
    assert fresh(questions["4"]).reject_reason == "not a question"
    segmentation.undo(document=paper, user=person)
    segmentation.undo(document=paper, user=person)
    assert fresh(questions["1"]).status == Question.Status.IMPORTED
    assert fresh(questions["2"]).text == questions["2"].text and fresh(questions["4"]).status == "imported"
    with pytest.raises(RepairError):  # a stem with nothing after it
        segmentation.mark(question=questions["4"], kind=Segment.Kind.STEM, count=1, user=person)


def test_page_done_and_undo(paper, person):
    page = paper.pages.get()
    segmentation.page_done(page=page, user=person)
    assert Page.objects.get(pk=page.pk).done_by == person
    segmentation.undo(document=paper, user=person)
    assert Page.objects.get(pk=page.pk).done_at is None


def test_undo_is_refused_once_someone_edited_the_question_since(paper, person):
    second = numbered(paper)["2"]
    moved = segmentation.move_box(question=second, index=0, box=box_round("2"), user=person)
    services.edit_question(question=moved, changes={"text": "改过"}, user=person, expected_version=moved.version)
    with pytest.raises(RepairError):
        segmentation.undo(document=paper, user=person)
    assert fresh(second).text == "改过"


def test_a_reimport_leaves_every_repair_alone(paper, person):
    questions = numbered(paper)
    page = paper.pages.get()
    segmentation.move_box(question=questions["2"], index=0, box=box_round("2"), user=person)
    added = segmentation.add_question(document=paper, page=page, box=box_round("missed"), user=person)
    segmentation.merge(first=questions["3"], second=questions["4"], user=person)
    summary = import_document(document=paper)
    assert summary.questions == 0 and summary.existing == 4
    assert fresh(questions["2"]).text == "如图，求三角形的面积。"
    assert fresh(questions["4"]).status == Question.Status.REJECTED
    assert Question.objects.filter(source_document=paper).count() == 5 and fresh(added).text == MISSED


def test_hostile_boxes_and_questions_are_refused(paper, person):
    page = paper.pages.get()
    for box in (["nan", 1, 2, 3], [1, 2], [100, 100, 101, 101], ["a", "b", "c", "d"]):
        with pytest.raises(RepairError):
            segmentation.add_question(document=paper, page=page, box=box, user=person)
    with pytest.raises(RepairError):  # empty paper
        segmentation.add_question(document=paper, page=page, box=[400, 600, 500, 700], user=person)
    other = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("另一份.pdf", fixtures_pdf.gap_paper()))
    import_document(document=other)
    with pytest.raises(RepairError):
        segmentation.merge(first=numbered(paper)["1"], second=numbered(other)["1"], user=person)
    with pytest.raises(RepairError):
        segmentation.move_box(question=numbered(paper)["1"], index=7, box=box_round("1"), user=person)
    assert not Repair.objects.exists()


class RegionOCR(ocr.OCRBackend):
    """Reads a whole scanned page as one question, and a drawn region as the text it was asked for."""

    name = "region-ocr"
    seen: list = []

    def recognize(self, image: Image.Image) -> ocr.OCRResult:
        RegionOCR.seen.append(image.size)
        if image.size[0] > 1000:  # the page, at import
            return ocr.OCRResult([ocr.OCRLine("1．一道扫描的题", (60, 60, 400, 80))])
        return ocr.OCRResult([ocr.OCRLine("2．漏掉的扫描题", (0, 0, 10, 10))])


def test_a_box_drawn_on_a_scanned_page_is_read_by_ocr(settings, person):
    settings.OCR_BACKEND = "tests.test_segmentation.RegionOCR"
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("扫描.pdf", fixtures_pdf.scanned_page()))
    import_document(document=document)
    page = document.pages.get()
    assert page.text_source == "region-ocr"
    added = segmentation.add_question(document=document, page=page, box=[60, 400, 300, 450], user=person)
    assert added.text == "漏掉的扫描题" and added.segment.label == "2"
    # the region, at OCR_DPI: 240 x 50 points
    width, height = RegionOCR.seen[-1]
    assert abs(width - 240 * segmentation.OCR_DPI / 72) <= 2 and abs(height - 50 * segmentation.OCR_DPI / 72) <= 2


def test_a_question_someone_holds_in_review_is_not_repaired_under_them(paper, person):
    from datetime import timedelta

    from django.utils import timezone

    from annotation.models import Assignment

    third = numbered(paper)["3"]
    other = make_person("qin", Role.ANNOTATOR)
    Assignment.objects.create(question=third, annotator=other, task=Assignment.Task.OCR_REVIEW,
                              locked_until=timezone.now() + timedelta(hours=1))  # fmt: skip
    with pytest.raises(RepairError):
        segmentation.merge(first=third, second=numbered(paper)["4"], user=person)
    assert fresh(third).text == "解方程 x+1=4。" and not Repair.objects.exists()
    segmentation.renumber(question=third, label="3", user=other)  # the holder may


def _an_importer_that_finds_the_missed_question(monkeypatch):
    """The importer as it may become: it cuts the unnumbered question out of question 2 by itself."""
    from annotation.pdf import importer
    from annotation.pdf.segment import ParsedQuestion

    real_segment = importer.segment

    def better(lines):
        parsed = real_segment(lines)
        second = next(q for q in parsed.questions if q.number == 2)
        missed = [line for line in second.lines if line.text.startswith("已知")]
        second.lines = [line for line in second.lines if line not in missed]
        parsed.questions.append(ParsedQuestion(number=99, section=second.section, qtype=second.qtype, lines=missed,
                                               stem=[MISSED]))  # fmt: skip
        return parsed

    monkeypatch.setattr(importer, "segment", better)


def test_a_reimport_that_finds_a_new_question_saves_it_where_nobody_repaired(paper, monkeypatch):
    _an_importer_that_finds_the_missed_question(monkeypatch)
    summary = import_document(document=paper)
    assert summary.questions == 1 and Question.objects.filter(source_document=paper, text=MISSED).count() == 1


def test_a_reimport_does_not_read_again_a_question_a_person_cut(paper, person, monkeypatch):
    page = paper.pages.get()
    segmentation.add_question(document=paper, page=page, box=box_round("missed"), user=person)
    _an_importer_that_finds_the_missed_question(monkeypatch)
    summary = import_document(document=paper)
    assert summary.questions == 0 and Question.objects.filter(source_document=paper, text=MISSED).count() == 1
    assert any(n["code"] == "repaired_region" and str(n["params"]["label"]) == "99" for n in summary.notes)
    assert any("Question 99 lies where a person repaired the cut" in w for w in summary.warnings)


def test_redo_makes_an_undone_change_again_and_a_new_change_drops_the_redo(paper, person, english):
    questions = numbered(paper)
    change = {"action": "merge", "question": str(questions["3"].pk), "other": str(questions["4"].pk)}
    segmentation.apply_change(document=paper, values=change, user=person)
    segmentation.apply_change(document=paper, values={"action": "renumber", "question": str(questions["1"].pk),
                                                      "label": "一"}, user=person)  # fmt: skip
    assert segmentation.redoable(paper) is None
    segmentation.apply_change(document=paper, values={"action": "undo"}, user=person)
    segmentation.apply_change(document=paper, values={"action": "undo"}, user=person)
    assert fresh(questions["4"]).status == Question.Status.IMPORTED and "1" in numbered(paper)
    # Redo in the order the undos took them back: the merge, then the renumbering.
    segmentation.apply_change(document=paper, values={"action": "redo"}, user=person)
    assert fresh(questions["4"]).status == Question.Status.REJECTED
    assert fresh(questions["3"]).text == "解方程 x+1=4。\n写出解的过程。"
    segmentation.redo(document=paper, user=person)
    assert list(numbered(paper))[0] == "一"
    with pytest.raises(RepairError, match="nothing to redo"):
        segmentation.redo(document=paper, user=person)
    # A redone change is undone like any other; a new change after an undo leaves nothing to redo.
    segmentation.undo(document=paper, user=person)
    assert list(numbered(paper))[0] == "1" and segmentation.redoable(paper) is not None
    segmentation.page_done(page=paper.pages.get(number=1), user=person)
    assert segmentation.redoable(paper) is None


def test_a_question_over_two_regions_splits_before_the_second(paper, person, english):
    questions = numbered(paper)
    merged = segmentation.merge(first=questions["3"], second=questions["4"], user=person)
    regions = list(merged.boxes)
    assert len(regions) >= 2
    with pytest.raises(RepairError, match="first region"):
        segmentation.split(question=merged, index=0, y=None, user=person)
    created = segmentation.split(question=fresh(merged), index=len(regions) - 1, y="", user=person, label="4")
    # Each part is read again from its regions (the first's holds its 【答案】 line too, as a split at a line reads it).
    assert fresh(merged).text.startswith("解方程 x+1=4。") and created.text == "写出解的过程。"
    assert fresh(merged).boxes == regions[:-1] and created.boxes == regions[-1:]
    segmentation.undo(document=paper, user=person)
    assert not Question.objects.filter(pk=created.pk).exists()
    assert fresh(merged).text == "解方程 x+1=4。\n写出解的过程。"
