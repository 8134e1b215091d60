"""The vision-model OCR backend against a scripted OpenAI-compatible server, alone
and plugged into the PDF importer through OCR_BACKEND."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from annotation import ocr
from annotation.models import Page, Question
from annotation.pdf import import_document, register_pdf_upload
from inference import services
from inference.models import ModelEndpoint
from inference.ocr_vision import VisionOCRBackend, markdown_result
from tests import fixtures_pdf
from tests.scripted_models import ScriptedHandler, serve

pytestmark = pytest.mark.django_db

PAGE = "一、选择题\n\n1．下列各数中，最大的数是（  ）\nA. $-1$\nB. $0$\nC. $2$\nD. $3$\n"


class Scripted(ScriptedHandler):
    script: list[int] = []
    seen: list[dict] = []
    reply = PAGE

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        Scripted.seen.append(body)
        status = Scripted.script.pop(0) if Scripted.script else 200
        if status != 200:
            return self.send_error_status(status)
        return self.send_completion(body, Scripted.reply)


@pytest.fixture
def vision_endpoint(settings, monkeypatch):
    Scripted.script, Scripted.seen, Scripted.reply = [], [], PAGE
    settings.MODEL_CALL_RETRIES = 2
    settings.OCR_VISION_ENDPOINT = "ocr-vlm"
    monkeypatch.setattr(VisionOCRBackend, "backoff_seconds", 0.01)
    with serve(Scripted) as base_url:
        yield services.save_endpoint(
            endpoint=ModelEndpoint(name="ocr-vlm", base_url=base_url, model_name="qwen2.5-vl", max_image_side=800,
                                   default_params={"temperature": 0}),
            user=None,
        )  # fmt: skip


def page_image() -> Image.Image:
    return Image.new("RGB", (992, 1403), "white")  # A4 at 120 dpi


def test_it_sends_the_page_with_the_ocr_prompt_and_reads_the_markdown(vision_endpoint):
    result = VisionOCRBackend().recognize(page_image())
    assert result.markdown == PAGE.strip()
    assert [line.text for line in result.lines] == [
        "一、选择题",
        "1．下列各数中，最大的数是（  ）",
        *("A. $-1$", "B. $0$", "C. $2$", "D. $3$"),
    ]
    # Made-up boxes: full width, top to bottom, inside the body of the page, no score.
    tops = [line.box[1] for line in result.lines]
    assert tops == sorted(tops) and tops[0] > 1403 * 0.1 and result.lines[-1].box[3] < 1403 * 0.9
    assert {(line.box[0], line.box[2], line.score) for line in result.lines} == {(0.0, 992.0, None)}
    sent = Scripted.seen[0]
    assert sent["model"] == "qwen2.5-vl" and sent["temperature"] == 0
    text_part, image_part = sent["messages"][-1]["content"]  # the fixed text first: prefix caching
    assert image_part["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert "Markdown" in text_part["text"] and sent["messages"][0]["role"] == "system"


def test_it_unwraps_a_code_fence_and_reasoning():
    result = markdown_result("<think>先看题号</think>\n```markdown\n1．$x=2$\n```", width=100, height=1000)
    assert result.markdown == "1．$x=2$" and [line.text for line in result.lines] == ["1．$x=2$"]
    assert markdown_result("", width=100, height=100) == ocr.OCRResult()


def test_it_says_which_setting_is_missing(settings):
    settings.OCR_VISION_ENDPOINT = ""
    with pytest.raises(ocr.OCRUnavailable, match="OCR_VISION_ENDPOINT"):
        VisionOCRBackend().recognize(page_image())
    settings.OCR_VISION_ENDPOINT = "nobody"
    with pytest.raises(ocr.OCRUnavailable, match="no model endpoint has that name"):
        VisionOCRBackend().recognize(page_image())


def test_it_refuses_a_switched_off_endpoint(vision_endpoint):
    ModelEndpoint.objects.filter(pk=vision_endpoint.pk).update(active=False)
    with pytest.raises(ocr.OCRUnavailable, match="switched off"):
        VisionOCRBackend().recognize(page_image())
    assert Scripted.seen == []


def test_it_retries_a_busy_server_then_reports_it_as_worth_retrying_later(vision_endpoint):
    Scripted.script = [503]
    assert VisionOCRBackend().recognize(page_image()).lines
    assert len(Scripted.seen) == 2

    Scripted.script = [503, 503, 503]
    with pytest.raises(ocr.OCRServiceError, match="503"):
        VisionOCRBackend().recognize(page_image())
    assert len(Scripted.seen) == 2 + 3  # the first try and MODEL_CALL_RETRIES retries


def test_a_refused_request_is_a_configuration_error_at_once(vision_endpoint):
    Scripted.script = [401]
    with pytest.raises(ocr.OCRUnavailable, match="HTTP 401"):
        VisionOCRBackend().recognize(page_image())
    assert len(Scripted.seen) == 1


def test_the_importer_selects_it_by_the_ocr_backend_setting(vision_endpoint, settings, tmp_path):
    settings.OCR_BACKEND = "inference.ocr_vision.VisionOCRBackend"
    settings.MEDIA_ROOT = tmp_path / "media"
    assert isinstance(ocr.get_ocr_backend(), VisionOCRBackend)

    upload = SimpleUploadedFile("scan.pdf", fixtures_pdf.scanned_page())
    document = register_pdf_upload(uploaded_file_or_path=upload, user=None)
    assert import_document(document=document).ocr_pages == 1
    page = Page.objects.get(document=document)
    assert page.text_source == "vision-model" and "最大的数" in page.text
    question = Question.objects.get(source_document=document)
    assert question.qtype == "multiple_choice" and "最大的数" in question.text
    assert [o["label"] for o in question.options] == list("ABCD")
