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


def test_it_refuses_an_empty_crop_box(page, annotator):
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
