"""The segmentation screen's pages: access, GET changes nothing, each POST goes through one repair."""

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation import segmentation
from annotation.models import Question, Repair
from annotation.pdf import import_document, register_pdf_upload
from k12vista.roles import Role
from tests.conftest import make_person
from tests.fixtures_segmentation import MISSED, box_round, repair_paper

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


@pytest.fixture
def owner(db):
    return make_person("zhou", Role.ANNOTATOR)


@pytest.fixture
def paper(owner):
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("卷.pdf", repair_paper()), user=owner)
    import_document(document=document)
    return document


def client_for(client, username):
    client.force_login(User.objects.get(username=username), backend="django.contrib.auth.backends.ModelBackend")
    return client


def test_the_screen_draws_every_region_and_the_import_page_links_to_it(client, paper, owner):
    c = client_for(client, "zhou")
    url = reverse("annotation:segmentation", args=[paper.pk])
    assert url in c.get(reverse("annotation:import_detail", args=[paper.pk])).content.decode()
    html = c.get(url).content.decode()
    assert html.count('class="seg-region kind-question') == 4 and html.count('class="seg-region kind-figure') == 1
    assert 'viewBox="0 0 595.0 842.0"' in html and "js/segmentation.js" in html and 'id="seg-help"' in html
    assert "切题" in html and "为导入遗漏的题目画框" in html  # Chinese by default
    assert not Repair.objects.exists()  # GET changes nothing


def test_a_repair_is_a_post_and_htmx_gets_the_workspace_back(client, paper, owner):
    c = client_for(client, "zhou")
    url = reverse("annotation:segmentation_repair", args=[paper.pk])
    assert c.get(url).status_code == 405
    x0, y0, x1, y1 = box_round("missed")
    response = c.post(url, {"action": "add", "page": 1, "x0": x0, "y0": y0, "x1": x1, "y1": y1}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and 'id="seg-workspace"' in response.content.decode()
    assert "<html" not in response.content.decode()
    assert Question.objects.filter(source_document=paper, text=MISSED).exists()
    response = c.post(url, {"action": "undo"}, HTTP_HX_REQUEST="true")
    assert not Question.objects.filter(source_document=paper, text=MISSED).exists()
    assert 'id="seg-redo" disabled' not in response.content.decode()
    response = c.post(url, {"action": "redo"}, HTTP_HX_REQUEST="true")
    assert Question.objects.filter(source_document=paper, text=MISSED).exists()
    assert 'id="seg-redo" disabled' in response.content.decode()


@pytest.mark.parametrize(
    "data",
    [
        {"action": "nonsense"},
        {"action": "add", "page": "x"},
        {"action": "add", "page": 1, "x0": "nan", "y0": 1, "x1": 2, "y1": 3},
        {"action": "move", "question": "abc", "index": 0},
        {"action": "split", "question": "", "index": "", "y": ""},
        {"action": "stem", "question": "1", "count": "many"},
        {"action": "undo"},
        {"action": "redo"},
        {"action": "split", "question": "1", "index": "0", "y": ""},
        {"action": "figure", "figure": "999999", "other": "1"},
        {"action": "page_done", "page": "99"},
    ],
)
def test_hostile_posts_are_refused_without_a_server_error(client, paper, owner, data):
    c = client_for(client, "zhou")
    url = reverse("annotation:segmentation_repair", args=[paper.pk])
    assert c.post(url, data, HTTP_HX_REQUEST="true").status_code in (200, 404)
    assert c.post(url, data).status_code in (302, 404)


def test_another_annotator_cannot_see_or_repair_the_paper(client, paper):
    make_person("wu", Role.ANNOTATOR)
    c = client_for(client, "wu")
    assert c.get(reverse("annotation:segmentation", args=[paper.pk])).status_code == 404
    first = segmentation.document_questions(paper)[0]
    response = c.post(reverse("annotation:segmentation_repair", args=[paper.pk]),
                      {"action": "not_question", "question": first.pk})  # fmt: skip
    assert response.status_code == 404 and Question.objects.get(pk=first.pk).status == Question.Status.IMPORTED
