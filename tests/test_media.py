"""Stored files are read through the object they belong to (k12vista.files.readable_file): figures
and pages as their question, uploads as their document or job, exports as their job, PEBench
files under the blind rule; under our names, as attachments, with nosniff and a sandbox."""

import json

import pytest
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from annotation import queues
from annotation.models import Assignment, Page, Question, SourceDocument
from k12vista.files import MEDIA_CSP
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from pem import jobs as pem_jobs
from pem import labelling
from pem.models import ChainOfThought, LabellingTask
from tests import fixtures_pdf
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.pem_factories import add_to_pebench, label_steps, make_cot

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]

# Looks like JSONL to the first-byte check, is a page with a script to a browser.
HOSTILE_JSONL = b'{"a": 1}\n<script src="/media/x.js"></script><script>fetch("/manage/users/")</script>\n'


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def assert_sandboxed(response, *, inline: bool, content_type: str):
    assert response.status_code == 200
    assert response["Content-Type"] == content_type
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == MEDIA_CSP
    disposition = response["Content-Disposition"]
    assert disposition.startswith("inline" if inline else "attachment"), disposition


def url_of(name: str) -> str:
    return f"/media/{name}"


# --- figures and page images ---------------------------------------------------------------


@pytest.fixture
def page_of(annotator):
    """A question read from page 1 of alice's uploaded PDF, with its page image."""
    document = SourceDocument.objects.create(kind="pdf", original_name="exam.pdf", sha256="0" * 64, size=1,
                                             uploaded_by=annotator)  # fmt: skip
    page = Page(document=document, number=1, width=360, height=240, width_pt=360, height_pt=240)
    page.image.save("whatever.html", ContentFile(fixtures_pdf.raster_figure_png()), save=False)
    page.save()
    return page


def test_it_shows_figures_and_the_page_image_on_the_ocr_review_page(page_of, other_annotator, login):
    question = make_question()
    Question.objects.filter(pk=question.pk).update(source_page=page_of, source_document=page_of.document)
    held = queues.next_assignment(annotator=other_annotator, task=Assignment.Task.OCR_REVIEW)
    client = login(other_annotator)
    body = client.get(f"/annotate/review/{held.pk}/").content.decode()
    # The figure as an <img src>, the page as the viewer's SVG <image href>.
    sources = [part.split('"')[0] for marker in ('src="/media/', 'href="/media/') for part in body.split(marker)[1:]]
    assert len(set(sources)) == 2  # the page and the figure
    for name in sources:
        assert_sandboxed(client.get(url_of(name)), inline=True, content_type="image/png")


def test_it_keeps_figures_and_pages_from_annotators_who_do_not_hold_the_question(
    page_of, annotator, other_annotator, researcher, inspector, login
):
    question = make_question()
    Question.objects.filter(pk=question.pk).update(source_page=page_of)
    figure = url_of(question.figures.get().image.name)
    page = url_of(page_of.image.name)
    assert login(other_annotator).get(figure).status_code == 404
    assert login(other_annotator).get(page).status_code == 404
    assert login(annotator).get(page).status_code == 200  # she uploaded the document
    for person in (researcher, inspector):
        assert login(person).get(figure).status_code == 200
        assert login(person).get(page).status_code == 200


def test_it_stores_images_under_our_names(page_of):
    assert page_of.image.name.startswith(f"pages/{timezone.now():%Y/%m}/doc{page_of.document_id}-p1-")
    assert page_of.image.name.endswith(".png") and "whatever" not in page_of.image.name


def test_it_serves_figures_to_the_annotator_labelling_a_chain_on_the_question(annotator, other_annotator, login):
    question = make_question()
    cot = make_cot(question=question)
    labelling.open_labelling(cot)
    assert labelling.next_task(annotator).cot == cot
    url = url_of(question.figures.get().image.name)
    assert login(annotator).get(url).status_code == 200
    assert login(other_annotator).get(url).status_code == 404


# --- uploads: our names, checked by content, served as attachments ----------------------------


def test_it_stores_an_html_named_question_file_as_jsonl_and_serves_it_as_an_attachment(
    researcher, administrator, login, no_broker
):
    client = login(researcher)
    upload = SimpleUploadedFile("x.html", HOSTILE_JSONL, content_type="text/html")
    client.post("/annotate/imports/", {"kind": "file", "file-file": upload})
    document = SourceDocument.objects.get()
    assert document.original_name == "x.html"
    assert document.file.name.startswith("sources/") and document.file.name.endswith(".jsonl")
    assert "x.html" not in document.file.name and ".html" not in document.file.name
    response = login(administrator).get(url_of(document.file.name))
    assert_sandboxed(response, inline=False, content_type="application/x-ndjson")
    assert 'filename="x.jsonl"' in response["Content-Disposition"]


@pytest.mark.parametrize("filename", ["x.html", "x.js"])
def test_it_stores_pebench_imports_under_our_names_from_page_and_api(filename, researcher, administrator, login,
                                                                     no_broker):  # fmt: skip
    content = HOSTILE_JSONL if filename == "x.html" else b'{}\nfetch("/manage/users/")\n'
    api_as(researcher).post("/api/pem/data/imports/", {"file": SimpleUploadedFile(filename, content)},
                            format="multipart")  # fmt: skip
    login(researcher).post("/pem/data/import/", {"file": SimpleUploadedFile(filename, content)})
    names = [job.params["file"] for job in Job.objects.filter(kind=pem_jobs.IMPORT)]
    assert len(names) == 2
    for name in names:
        assert name.startswith("pem-imports/") and name.endswith(".jsonl") and filename not in name
        assert_sandboxed(login(administrator).get(url_of(name)), inline=False, content_type="application/x-ndjson")
        assert login(researcher).get(url_of(name)).status_code == 200  # the uploader


def test_it_stores_a_pdf_named_notice_html_as_a_pdf_attachment(annotator, researcher, login, no_broker):
    upload = SimpleUploadedFile("notice.html", fixtures_pdf.text_pages(1), content_type="text/html")
    login(annotator).post("/annotate/imports/", {"kind": "pdf", "pdf-files": [upload], "pdf-subject": "math",
                                                  "pdf-grade": "9"})  # fmt: skip
    document = SourceDocument.objects.get()
    assert document.file.name.endswith(".pdf") and "notice" not in document.file.name
    response = login(researcher).get(url_of(document.file.name))
    assert_sandboxed(response, inline=False, content_type="application/pdf")
    assert 'filename="notice.pdf"' in response["Content-Disposition"]


def test_it_refuses_an_html_page_that_starts_with_the_pdf_header(annotator, login, no_broker, english):
    upload = SimpleUploadedFile("notice.html", b"%PDF-1.7\n<html><script>alert(1)</script></html>")
    form = {"kind": "pdf", "pdf-files": [upload], "pdf-subject": "math", "pdf-grade": "9"}
    response = login(annotator).post("/annotate/imports/", form, follow=True)
    assert "not a PDF that can be opened" in response.content.decode()
    assert not SourceDocument.objects.exists() and not no_broker.called


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"题": "x"}\n'.encode("gbk"), "not UTF-8"),
        (b"{not json\n", "first line of the file is not JSON"),
        (b"\n\n   \n", "neither JSONL"),
        (b"[1, 2]\n", "neither JSONL"),
        (b"PK\x03\x04 this is no archive at all" * 10, "not one"),
    ],
    ids=["gbk", "not-json", "blank", "array", "fake-zip"],
)
def test_it_refuses_files_that_are_not_what_they_start_like(content, message, researcher, login, english, no_broker):
    api = api_as(researcher)
    response = api.post("/api/pem/data/imports/", {"file": SimpleUploadedFile("f.jsonl", content)},
                        format="multipart")  # fmt: skip
    assert response.status_code == 400 and message in response.json()["file"][0]
    page = login(researcher).post("/annotate/imports/", {"kind": "file", "file-file": SimpleUploadedFile("f", content)})
    assert message in page.content.decode()
    assert not SourceDocument.objects.exists() and not Job.objects.exists()


# --- who reads uploads and exports ----------------------------------------------------------


def test_it_keeps_an_annotators_pdf_from_other_annotators(annotator, other_annotator, researcher, administrator,
                                                          login, no_broker):  # fmt: skip
    upload = SimpleUploadedFile("exam.pdf", fixtures_pdf.text_pages(1))
    login(annotator).post("/annotate/imports/", {"kind": "pdf", "pdf-files": [upload], "pdf-subject": "math",
                                                  "pdf-grade": "9"})  # fmt: skip
    url = url_of(SourceDocument.objects.get().file.name)
    assert login(other_annotator).get(url).status_code == 404
    for person in (annotator, researcher, administrator):
        assert login(person).get(url).status_code == 200


def question_export(researcher) -> str:
    make_question()
    job = Job.objects.create(kind="annotation.export_questions", started_by=researcher, params={"fmt": "studio"})
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    return url_of(job.result["path"])


def test_it_serves_a_question_export_to_whoever_may_see_its_job(annotator, researcher, administrator, login):
    url = question_export(researcher)
    assert login(annotator).get(url).status_code == 404
    assert login(make_person("rob", Role.RESEARCHER)).get(url).status_code == 404  # someone else's job
    for person in (researcher, administrator):
        assert_sandboxed(login(person).get(url), inline=False, content_type="application/zip")


def pebench_export(user) -> str:
    cot = make_cot(status=ChainOfThought.Status.GOLD)
    add_to_pebench(cot)
    label_steps(cot, ["CS", "CS", "CS"], source="gold", rater="ivan")
    job = pem_jobs.start_export(user=user)
    assert execute_job(job.pk) == Job.Status.SUCCEEDED, Job.objects.get(pk=job.pk).error
    job.refresh_from_db()
    return url_of(job.result["path"])


def test_it_never_serves_the_pebench_export_to_annotators(annotator, researcher, administrator, login):
    url = pebench_export(researcher)
    assert login(annotator).get(url).status_code == 404
    for person in (researcher, administrator):
        assert_sandboxed(login(person).get(url), inline=False, content_type="application/zip")
    # An admin who also labels is blind while a task of theirs is open.
    Job.objects.update(started_by=administrator)
    cot = make_cot()
    labelling.open_labelling(cot)
    LabellingTask.objects.create(cot=cot, annotator=administrator)
    assert login(administrator).get(url).status_code == 404


@pytest.mark.parametrize("name", ["", "exports/", "../settings.py", "exports/pebench-999.zip", "sources/x.pdf",
                                  "figures/../../db.sqlite3", "nothing/here.png"])  # fmt: skip
def test_it_gives_404_for_names_no_object_owns(name, administrator, login, settings):
    settings.MEDIA_ROOT.mkdir(parents=True, exist_ok=True)
    (settings.MEDIA_ROOT / "nothing").mkdir()
    (settings.MEDIA_ROOT / "nothing" / "here.png").write_bytes(fixtures_pdf.raster_figure_png())
    assert login(administrator).get(f"/media/{name}").status_code == 404


def test_it_still_serves_rows_stored_under_old_names(researcher, login, settings):
    """Files stored before our naming (sources/Y/M/<original name>) are found through their row."""
    (settings.MEDIA_ROOT / "sources/2025/01").mkdir(parents=True)
    (settings.MEDIA_ROOT / "sources/2025/01/exam.pdf").write_bytes(fixtures_pdf.text_pages(1))
    SourceDocument.objects.create(kind="pdf", file="sources/2025/01/exam.pdf", original_name="exam.pdf",
                                  sha256="1" * 64, size=1)  # fmt: skip
    assert_sandboxed(login(researcher).get("/media/sources/2025/01/exam.pdf"), inline=False,
                     content_type="application/pdf")  # fmt: skip


# --- someone who is both researcher and annotator -----------------------------------------------


def test_a_researcher_who_labels_is_not_handed_an_item_whose_labels_they_read(other_annotator, login):
    dora = make_person("dora", Role.RESEARCHER, Role.ANNOTATOR)
    read, fresh = make_cot(key="read"), make_cot(key="fresh")
    for cot in (read, fresh):
        labelling.open_labelling(cot)
    label_steps(read, ["CS", "HE", "CS"], rater="amy", user=other_annotator, explanation="AMY-SECRET")
    seen = api_as(dora).get(f"/api/pem/items/{read.pk}/labels/").content.decode()
    assert "AMY-SECRET" in seen  # as a researcher, with no task on it, she reads every label
    task = labelling.next_task(dora)
    assert task.cot == fresh
    # Labels arrive on her item while her task is open: she reads none of them, page, API or export.
    label_steps(fresh, ["CS", "CS", "KAE"], rater="amy", user=other_annotator, explanation="LATER-SECRET")
    assert "LATER-SECRET" not in api_as(dora).get(f"/api/pem/items/{fresh.pk}/labels/").content.decode()
    assert "LATER-SECRET" not in login(dora).get(f"/pem/label/{task.pk}/").content.decode()
    url = pebench_export(dora)
    assert login(dora).get(url).status_code == 404
    LabellingTask.objects.filter(pk=task.pk).update(submitted=timezone.now())
    assert login(dora).get(url).status_code == 200
    assert labelling.next_task(dora) is None  # the only other item has labels she could read


def test_it_warns_on_deploy_about_demo_accounts_when_debug_is_off(settings):
    from django.core.checks import run_checks

    from k12vista.management.commands.load_demo import DEMO_PASSWORD

    def warnings():
        return [m.id for m in run_checks(include_deployment_checks=True) if m.id == "k12vista.W001"]

    settings.DEBUG = False
    assert warnings() == []
    make_person("researcher", Role.RESEARCHER)  # a real person may be called that
    assert warnings() == []
    from k12vista import services

    services.create_user(username="admin", roles=[Role.ADMIN], password=DEMO_PASSWORD)
    assert warnings() == ["k12vista.W001"]
    settings.DEBUG = True
    assert warnings() == []


def test_the_export_page_download_link_works_for_its_owner(researcher, login):
    url = question_export(researcher)
    job = Job.objects.get(kind="annotation.export_questions")
    page = login(researcher).get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="{url}"' in page
    body = b"".join(login(researcher).get(url).streaming_content)
    assert body.startswith(b"PK")
    assert json.loads(json.dumps(job.result))["path"] in url


@pytest.fixture
def behind_nginx(settings):
    from django_sendfile.utils import _get_sendfile

    settings.SENDFILE_BACKEND, settings.SENDFILE_URL = "django_sendfile.backends.nginx", "/protected-media"
    _get_sendfile.cache_clear()  # the library caches the backend it loaded
    yield
    _get_sendfile.cache_clear()


def test_behind_nginx_django_checks_and_the_proxy_sends(behind_nginx, researcher, annotator, login, no_broker):
    upload = SimpleUploadedFile("exam.pdf", fixtures_pdf.text_pages(1))
    login(annotator).post("/annotate/imports/", {"kind": "pdf", "pdf-files": [upload], "pdf-subject": "math",
                                                  "pdf-grade": "9"})  # fmt: skip
    name = SourceDocument.objects.get().file.name
    response = login(researcher).get(url_of(name))
    assert response["X-Accel-Redirect"] == f"/protected-media/{name}" and response.content == b""
    assert_sandboxed(response, inline=False, content_type="application/pdf")
    assert login(make_person("olga", Role.ANNOTATOR)).get(url_of(name)).status_code == 404
