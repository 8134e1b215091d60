import io

import pytest
from django.core.files.base import ContentFile
from PIL import Image, ImageDraw

from annotation import queues, services
from annotation.models import Assignment, Page, Question, SourceDocument
from annotation.services import FigureData, QuestionDataError
from tests.annotation_factories import figure_png, make_question

pytestmark = pytest.mark.django_db


@pytest.fixture
def page():
    """A 500x700 pt page rendered at 2 px/pt, with a black square at (100,100)-(200,200) pt."""
    image = Image.new("RGB", (1000, 1400), "white")
    ImageDraw.Draw(image).rectangle((200, 200, 400, 400), outline="black", width=6)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    document = SourceDocument.objects.create(kind="pdf", original_name="exam.pdf", sha256="0" * 64, size=1)
    page = Page(document=document, number=1, width=1000, height=1400, width_pt=500, height_pt=700)
    page.image.save("p1.png", ContentFile(buffer.getvalue()), save=False)
    page.save()
    return page


def test_it_crops_a_figure_again_from_its_page(page, annotator):
    question = make_question(figures=[FigureData(content=figure_png(), page=page, bbox=[0, 0, 50, 50])])
    figure = question.figures.get()
    services.recrop_figure(figure=figure, bbox=[90, 90, 210, 210], user=annotator)
    figure.refresh_from_db()
    assert figure.bbox == [90, 90, 210, 210]
    assert (figure.width, figure.height) == (240, 240)  # 120 pt at 2 px/pt
    question.refresh_from_db()
    assert question.version == 2 and question.edits.filter(field="figure 1").get().old == [0, 0, 50, 50]


def test_it_refuses_an_empty_crop_box(page, annotator, english):
    question = make_question(figures=[FigureData(content=figure_png(), page=page, bbox=[0, 0, 50, 50])])
    with pytest.raises(QuestionDataError, match="empty"):
        services.recrop_figure(figure=question.figures.get(), bbox=[10, 10, 10, 300], user=annotator)


def test_it_splits_a_question_in_two(annotator):
    question = make_question(text="1. 第一题的题干。2. 第二题的题干。")
    created = services.split_question(question=question, at=question.text.index("2."), user=annotator)
    question.refresh_from_db()
    assert question.text == "1. 第一题的题干。"
    assert created.text == "2. 第二题的题干。" and created.status == Question.Status.IMPORTED
    assert created.hash_id == f"{question.hash_id}-s1"
    with pytest.raises(QuestionDataError):
        services.split_question(question=question, at=0, user=annotator)


def test_it_merges_a_question_cut_in_two(page, annotator):
    first = make_question(text="如图，已知", options=[], answers=[], figures=[], source_document=page.document)
    second = make_question(text="求角 $A$ 的度数。", answers=["60°"], source_document=page.document)
    merged = services.merge_questions(first=first, second=second, user=annotator)
    second.refresh_from_db()
    assert merged.text == "如图，已知\n求角 $A$ 的度数。" and merged.answers == ["60°"]
    assert merged.figures.count() == 1
    assert second.status == Question.Status.REJECTED and first.hash_id in second.reject_reason


def test_it_merges_the_next_question_from_the_screen(page, annotator, login):
    first = make_question(text="如图，已知", source_document=page.document)
    second = make_question(text="求角 $A$ 的度数。", source_document=page.document)
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    assert held.question == first
    login(annotator).post(f"/annotate/review/{held.pk}/merge-next/")
    first.refresh_from_db()
    assert "求角" in first.text
    assert Question.objects.get(pk=second.pk).status == Question.Status.REJECTED


def test_it_splits_and_crops_from_the_screen(page, annotator, other_annotator, login):
    question = make_question(
        text="甲题。乙题。", figures=[FigureData(content=figure_png(), page=page, bbox=[0, 0, 50, 50])]
    )
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    client = login(annotator)
    client.post(f"/annotate/review/{held.pk}/split/", {"at": "3"})
    assert Question.objects.filter(text="乙题。").exists()
    figure = question.figures.get()
    client.post(f"/annotate/review/{held.pk}/figures/{figure.pk}/crop/", {"x0": 90, "y0": 90, "x1": 210, "y1": 210})
    figure.refresh_from_db()
    assert figure.bbox == [90, 90, 210, 210]
    # someone else's assignment: nothing happens
    other = login(other_annotator)
    assert other.post(f"/annotate/review/{held.pk}/split/", {"at": "1"}).status_code == 404


def test_the_review_page_shows_each_questions_boxes_on_its_page(page, annotator, login):
    from datetime import timedelta

    from django.utils import timezone

    before = make_question(text="丙题", source_document=page.document, source_page=page, boxes=[[1, 50, 20, 240, 55]])
    first = make_question(text="甲题的前半", source_document=page.document, source_page=page,
                          boxes=[[1, 50, 60, 240, 120], [1, 260, 60, 450, 90]])  # fmt: skip
    second = make_question(text="乙题的全文", source_document=page.document, source_page=page,
                           boxes=[[1, 260, 95, 450, 200]])  # fmt: skip
    held = Assignment.objects.create(question=first, annotator=annotator, task=Assignment.Task.OCR_REVIEW,
                                     locked_until=timezone.now() + timedelta(hours=1))  # fmt: skip
    body = login(annotator).get(f"/annotate/review/{held.pk}/").content.decode()
    # The segmentation screen's viewer: every question's regions over the page, this one's marked "mine".
    assert body.count('class="seg-region kind-question mine"') == 2  # the question ran over two columns
    assert 'data-box="50,60,240,120"' in body and 'data-box="260,60,450,90"' in body
    later = body.split(f'data-hash="{second.hash_id}"')[1].split("</g>")[0]
    assert 'data-box="260,95,450,200"' in later
    candidates = body.split('class="merge-candidates"')[1].split("</ul>")[0]
    assert f'data-question="{second.hash_id}"' in candidates
    assert f"/annotate/review/{held.pk}/merge/{second.pk}/" in candidates
    # A question detected before this one is shown, but offers no merge into it.
    earlier = body.split(f'data-hash="{before.hash_id}"')[1].split("</g>")[0]
    assert 'data-box="50,20,240,55"' in earlier and before.hash_id not in candidates


def test_a_question_picked_on_the_page_is_merged_into_the_one_under_review(page, annotator, other_annotator, login):
    first = make_question(text="甲题的前半", source_document=page.document, boxes=[[1, 50, 60, 240, 120]])
    formula = FigureData(content=figure_png((60, 24)), kind="formula")
    second = make_question(text="甲题的后半 [[formula:0]]", source_document=page.document,
                           boxes=[[1, 260, 60, 450, 90]], figures=[formula])  # fmt: skip
    held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    assert held.question == first
    client = login(annotator)
    # Not one of this document's later, free questions: refused, nothing changes.
    stranger = make_question(text="别的卷子")
    client.post(f"/annotate/review/{held.pk}/merge/{stranger.pk}/")
    assert Question.objects.get(pk=stranger.pk).status == Question.Status.IMPORTED
    client.post(f"/annotate/review/{held.pk}/merge/{second.pk}/")
    first.refresh_from_db()
    # The formula placeholder follows its image (position 1 after the first question's own figure).
    assert first.text == "甲题的前半\n甲题的后半 [[formula:1]]"
    assert first.figures.get(position=1).kind == "formula"
    assert first.boxes == [[1, 50, 60, 240, 120], [1, 260, 60, 450, 90]]
    assert Question.objects.get(pk=second.pk).status == Question.Status.REJECTED
    # Someone else cannot merge through this assignment.
    third = make_question(text="丁题", source_document=page.document)
    assert login(other_annotator).post(f"/annotate/review/{held.pk}/merge/{third.pk}/").status_code == 404


def test_a_question_with_a_full_length_id_splits_too(annotator):
    """A PDF question's hash_id is a 64-character SHA-256: the split-off id must still be new."""
    question = make_question(hash_id="a" * 64, text="1. 第一题。2. 第二题。3. 第三题。")
    first = services.split_question(question=question, at=question.text.index("2."), user=annotator)
    second = services.split_question(question=Question.objects.get(pk=question.pk), at=6, user=annotator)
    assert len({question.hash_id, first.hash_id, second.hash_id}) == 3
    assert all(len(q.hash_id) <= 64 for q in (first, second))
