"""A page cut into questions by a vision model (annotation.pdf.vision, inference.segment_vision), against a
scripted OpenAI-compatible server: the request, the reply read as schema-checked JSON, hostile replies
reported and never a crash, and the import that uses it for the pages the rules are unsure of."""

import json

import pymupdf
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import translation

from annotation.models import Flag, Question
from annotation.pdf import PdfImportError, import_document, register_pdf_upload, start_pdf_import, vision
from annotation.pdf.notes import note_text
from inference import services
from inference.models import ModelEndpoint
from inference.segment_vision import VisionSegmentBackend
from tests.fixtures_pdf import A4, FONT
from tests.scripted_models import ScriptedHandler, serve, user_text

pytestmark = pytest.mark.django_db

BACKEND = "inference.segment_vision.VisionSegmentBackend"


def question(number, box=(80, 100, 900, 200), **fields):
    return {"number": number, "box": list(box), "type": "free_response", "text": f"第{number}题", "options": [],
            "answer": "", "solution": "", **fields}  # fmt: skip


class Scripted(ScriptedHandler):
    seen: list[dict] = []
    replies: list[str] = []
    status = 200

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        Scripted.seen.append(body)
        if Scripted.status != 200:
            return self.send_error_status(Scripted.status)
        reply = Scripted.replies.pop(0) if Scripted.replies else json.dumps({"questions": []})
        return self.send_completion(body, reply)


@pytest.fixture
def vision_model(settings, monkeypatch, tmp_path):
    Scripted.seen, Scripted.replies, Scripted.status = [], [], 200
    settings.MODEL_CALL_RETRIES = 1
    settings.SEGMENTATION_BACKEND = BACKEND
    settings.SEGMENTATION_ENDPOINT = "page-vlm"
    settings.MEDIA_ROOT = tmp_path / "media"
    monkeypatch.setattr(VisionSegmentBackend, "backoff_seconds", 0.01)
    with serve(Scripted) as base_url:
        services.save_endpoint(endpoint=ModelEndpoint(name="page-vlm", base_url=base_url, model_name="qwen2.5-vl",
                                                      max_image_side=800, default_params={"temperature": 0}),
                               user=None)  # fmt: skip
        yield Scripted


THIRD = "已知三角形的两边长为3和4，求第三边的范围。"


def gap_paper() -> bytes:
    """One page numbered 1, 2, 4: question 3 is printed but its number was lost (a badge the text layer
    does not hold), so the rules see a gap and are unsure of the page."""
    doc = pymupdf.open()
    page = doc.new_page(width=A4[0], height=A4[1])
    lines = [
        "三、解答题（共4小题）",
        "1．计算：$2+3$ 的值是多少？",
        "2．求方程 $x+1=3$ 的解。",
        THIRD,
        "4．化简 $2a+3a$ 的结果是什么？",
    ]
    for i, text in enumerate(lines):
        page.insert_text((60, 120 + i * 40), text, fontname=FONT, fontsize=11)
    return doc.tobytes()


def imported(pdf: bytes, **kwargs):
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("paper.pdf", pdf), user=None)
    return document, import_document(document=document, **kwargs)


# --- the reply, read as schema-checked JSON -----------------------------------------------------


def codes(notes):
    return [n["code"] for n in notes]


def test_a_sound_reply_is_read_with_its_types_options_and_answers():
    reply = json.dumps({"questions": [
        question(1, type="multiple_choice", options=[{"label": "A", "text": "1"}, {"label": "B", "text": "2"}],
                 answer="B", solution="因为……"),
        question(2, box=(80, 300, 900, 400)),
    ]})  # fmt: skip
    found, notes = vision.read_reply(f"<think>先看</think>```json\n{reply}\n```", page=1, printed={1, 2})
    assert notes == []
    assert [(q.number, q.type, q.answer) for q in found] == [(1, "multiple_choice", "B"), (2, "free_response", "")]
    assert [o.label for o in found[0].options] == ["A", "B"]


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("这页没有题", "vision_reply_bad"),
        ('{"questions": [', "vision_reply_bad"),
        ("[1, 2]", "vision_reply_bad"),
        ('{"questions": {"number": 1}}', "vision_reply_bad"),
        ("[" * 100_000, "vision_reply_bad"),
    ],
)
def test_a_reply_that_is_no_page_of_questions_is_said_and_nothing_kept(reply, code):
    found, notes = vision.read_reply(reply, page=3)
    assert found == [] and codes(notes) == [code] and notes[0]["params"]["page"] == 3


def test_each_bad_question_is_said_and_the_sound_ones_kept():
    reply = (
        json.dumps(
            {
                "questions": [
                    question(1),
                    {"number": "两", "box": [0, 0, 1, 1]},  # not the schema
                    question(2, type="essay"),  # a type outside the schema
                    question(3, box=(100, 100, 5000, 300)),  # off the page
                    question(4, box=(500, 500, 400, 600)),  # inside out
                    question(5, box=(-3, 700, 1003, 800)),  # a little past the edge: clipped
                    question(5, box=(0, 850, 1000, 900)),  # the same number again
                    question(41, box=(0, 900, 1000, 950)),  # a number the page does not print
                ]
            }
        )[:-2]
        + ', {"number": 6, "box": [0, NaN, 10, Infinity], "type": "free_response", "text": "", "options": [],'
    )
    reply += ' "answer": "", "solution": ""}]}'  # fmt: skip
    found, notes = vision.read_reply(reply, page=2, printed={1, 2, 3, 4, 5})
    assert [q.number for q in found] == [1, 5, 41]
    assert found[1].box == [0.0, 700.0, 1000.0, 800.0]
    assert codes(notes) == ["vision_question_bad", "vision_question_bad", "vision_box_off", "vision_box_off",
                            "vision_box_clipped", "vision_number_twice", "vision_number_unprinted",
                            "vision_box_off"]  # fmt: skip
    assert all(note_text(n) != n["code"] for n in notes)  # each is worded
    with translation.override("zh-hans"):
        assert all("视觉模型" in note_text(n) for n in notes)


# --- the backend: one call through the model-call layer ------------------------------------------


def test_the_backend_sends_the_image_the_text_layer_and_the_schema(vision_model):
    vision_model.replies = ['{"questions": []}']
    png = pymupdf.open(stream=gap_paper())[0].get_pixmap(dpi=50).tobytes("png")
    reply = VisionSegmentBackend().read_page(image=png, text="1．计算", page=1)
    assert reply == '{"questions": []}'
    sent = vision_model.seen[0]
    assert sent["model"] == "qwen2.5-vl" and sent["temperature"] == 0
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["questions"]["items"]["required"] == [
        "number", "box", "type", "text", "options", "answer", "solution"
    ]  # fmt: skip
    assert "$defs" not in json.dumps(schema)
    assert sent["messages"][-1]["content"][-1]["image_url"]["url"].startswith("data:image/")
    assert "1．计算" in user_text(sent) and "千分之一" in user_text(sent)


def test_the_backend_says_what_is_not_set_up(settings):
    settings.SEGMENTATION_ENDPOINT, settings.OCR_VISION_ENDPOINT = "", ""
    with pytest.raises(vision.VisionUnavailable, match="SEGMENTATION_ENDPOINT"):
        VisionSegmentBackend().read_page(image=b"", text="", page=1)
    settings.SEGMENTATION_ENDPOINT = "nobody"
    with pytest.raises(vision.VisionUnavailable, match="no model endpoint"):
        VisionSegmentBackend().read_page(image=b"", text="", page=1)


def _switched_off(settings):
    ModelEndpoint.objects.filter(name="page-vlm").update(active=False)


def _no_images(settings):
    ModelEndpoint.objects.filter(name="page-vlm").update(accepts_images=False)


def _unknown(settings):
    settings.SEGMENTATION_ENDPOINT = "nobody"


def _unset(settings):
    settings.SEGMENTATION_ENDPOINT, settings.OCR_VISION_ENDPOINT = "", ""


@pytest.mark.parametrize(
    ("setup", "cause", "words"),
    [(_unset, "endpoint_unset", "SEGMENTATION_ENDPOINT"), (_unknown, "endpoint_unknown", "没有这个名字"),
     (_switched_off, "endpoint_off", "已停用"), (_no_images, "endpoint_no_images", "不接受图片")],
)  # fmt: skip
def test_each_setup_problem_is_a_code_worded_in_the_readers_language(vision_model, settings, setup, cause, words):
    setup(settings)
    document, summary = imported(gap_paper(), reader="vision")
    (said,) = [n for n in summary.notes if n["code"] == "vision_unavailable"]
    assert said["params"]["cause"] == cause
    with translation.override("zh-hans"):
        chinese = note_text(said)
    assert words in chinese and "视觉模型不可用" in chinese
    assert not any(english in chinese for english in ("endpoint", "switched off", "images", "no model"))
    with translation.override("en"):
        assert "not available" in note_text(said)
    assert Question.objects.filter(source_document=document).count() == 3  # the rules cut the paper


@pytest.mark.parametrize(
    ("path", "cause"),
    [("", "backend_unset"), ("annotation.models.Page", "backend_not_subclass"), ("no.such.Backend", "backend_import")],
)
def test_a_backend_setting_problem_is_a_code_too(settings, tmp_path, path, cause):
    settings.SEGMENTATION_BACKEND, settings.MEDIA_ROOT = path, tmp_path / "media"
    document, summary = imported(gap_paper(), reader="vision")
    (said,) = [n for n in summary.notes if n["code"] == "vision_unavailable"]
    assert said["params"]["cause"] == cause
    with translation.override("zh-hans"):
        chinese = note_text(said)
    assert "SEGMENTATION_BACKEND" in chinese and "视觉模型不可用" in chinese
    assert not any(english in chinese for english in ("is empty", "cannot be imported", "subclass"))


def test_the_pages_the_rules_are_unsure_of():
    from annotation.pdf.layout import Line
    from annotation.pdf.segment import segment

    def lines(*texts, page=1):
        return [Line(t, (40, i * 20, 300, i * 20 + 12), page, (page, 0, 0, i * 20)) for i, t in enumerate(texts)]

    sure = segment(lines("一、解答题", "1．求甲的速度。", "2．求乙的速度。") + lines("3．求丙的速度。", page=2))
    assert vision.unsure_pages(sure, [1, 2]) == []
    uncut = segment(lines("一、解答题", "1．求甲的速度。", "2．求乙的速度。") + lines("9．丙？", "12．丁？", page=2)
                    + lines("3．求戊的加速度。", page=3))  # fmt: skip
    assert 2 in vision.unsure_pages(uncut, [1, 2, 3])
    report = "某同学用如图所示的装置研究小车的运动，打点计时器的频率为 50 Hz。" * 8
    prose = segment(lines("物理实验报告", report, page=1) + lines("实验结论写在这里。" * 30, page=2))
    assert vision.unsure_pages(prose, [1, 2]) == [1, 2]


def test_a_backend_setting_that_is_no_backend_is_refused():
    assert vision.get_segmentation_backend("") is None
    with pytest.raises(vision.VisionUnavailable, match="not a subclass"):
        vision.get_segmentation_backend("annotation.models.Page")


# --- the import -----------------------------------------------------------------------------------


def test_without_a_model_the_rules_cut_the_paper_and_say_the_gap(settings, tmp_path):
    settings.SEGMENTATION_BACKEND, settings.MEDIA_ROOT = "", tmp_path / "media"
    document, summary = imported(gap_paper())
    assert [n["code"] for n in summary.notes if n["code"].startswith("vision")] == []
    assert "3" in summary.report["gaps"] and {"gap", "section_count"} <= set(codes(summary.notes))
    assert sorted(Question.objects.filter(source_document=document).values_list("text", flat=True))[0]


def test_a_page_the_rules_are_unsure_of_is_read_by_the_model(vision_model):
    vision_model.replies = [json.dumps({"questions": [
        question(1, box=(90, 125, 800, 150), text="计算：$2+3$ 的值是多少？"),
        question(2, box=(90, 172, 800, 198), text="求方程 $x+1=3$ 的解。", answer="$x=2$"),
        question(3, box=(90, 220, 800, 246), text=THIRD),
        question(4, box=(90, 268, 800, 294), type="fill_in_blank", text="化简 $2a+3a$ 的结果是___"),
    ]})]  # fmt: skip
    document, summary = imported(gap_paper())
    assert len(vision_model.seen) == 1  # the one unsure page
    assert summary.report["gaps"] == [] and summary.report["vision_pages"] == [1]
    assert "vision_read" in codes(summary.notes)
    assert "gap" not in codes(summary.notes) and "section_count" not in codes(summary.notes)  # worked out again
    assert summary.report["sections"] == [{"heading": "三、解答题（共4小题）", "stated": 4, "found": 4}]
    saved = {q.text: q for q in Question.objects.filter(source_document=document)}
    assert set(saved) == {"计算：$2+3$ 的值是多少？", "求方程 $x+1=3$ 的解。", THIRD, "化简 $2a+3a$ 的结果是___"}
    assert saved["求方程 $x+1=3$ 的解。"].answers == ["$x=2$"]
    assert saved["化简 $2a+3a$ 的结果是___"].qtype == "fill_in_blank"
    third = saved[THIRD]
    assert third.boxes[0][0] == 1 and third.boxes[0][2] == 185.24  # thousandths of the 842 pt page: 220 -> 185.24


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("not json at all", "vision_reply_bad"),
     (json.dumps({"questions": [question(3, box=(0, 0, 9999, 9))]}), "vision_box_off")],
)  # fmt: skip
def test_a_hostile_reply_keeps_the_rules_reading_and_says_so(vision_model, reply, expected):
    vision_model.replies = [reply]
    document, summary = imported(gap_paper())
    said = codes(summary.notes)
    assert expected in said and ({"vision_reply_bad", "vision_box_off"} - {expected}).isdisjoint(said)
    assert "gap" in said and "vision_read" not in said  # the rules' reading, with its gap
    assert Question.objects.filter(source_document=document).count() == 3
    flagged = Flag.objects.filter(question__source_document=document, code=Flag.Code.IMPORT_GAP)
    assert any(n["code"].startswith("vision") for f in flagged for n in f.detail["notes"])


def test_wrong_numbers_from_the_model_are_reported_on_the_questions(vision_model):
    vision_model.replies = [json.dumps({"questions": [
        question(1, box=(90, 125, 800, 150)), question(2, box=(90, 172, 800, 198)),
        question(2, box=(90, 220, 800, 246)), question(9, box=(90, 268, 800, 294)),
    ]})]  # fmt: skip
    document, summary = imported(gap_paper())
    said = codes(summary.notes)
    assert {"vision_number_twice", "vision_number_unprinted", "vision_read"} <= set(said)
    nine = Question.objects.get(source_document=document, text="第9题")
    assert any(n["code"] == "vision_number_unprinted" for f in nine.flags.all() for n in f.detail["notes"])


def test_a_model_that_is_down_leaves_the_rules_reading(vision_model):
    vision_model.status = 503
    document, summary = imported(gap_paper())
    assert "vision_failed" in codes(summary.notes)
    assert Question.objects.filter(source_document=document).count() == 3


def test_every_page_is_read_when_chosen_and_refused_without_a_model(vision_model, settings):
    vision_model.replies = [json.dumps({"questions": [question(1), question(2, box=(80, 300, 900, 400))]})]
    document, summary = imported(gap_paper(), reader="vision")
    assert summary.report["vision_pages"] == [1]
    texts = sorted(Question.objects.filter(source_document=document).values_list("text", flat=True))
    assert texts == ["第1题", "第2题"]
    assert "gap" not in codes(summary.notes)
    # Chosen where no model is set up: refused before the job starts; "rules" sends nothing.
    settings.SEGMENTATION_BACKEND = ""
    with pytest.raises(PdfImportError, match="SEGMENTATION_BACKEND"):
        start_pdf_import(document=document, user=None, reader="vision")
    with pytest.raises(PdfImportError):
        start_pdf_import(document=document, user=None, reader="guess")
    settings.SEGMENTATION_BACKEND = BACKEND
    before = len(vision_model.seen)
    imported(gap_paper().replace(b"%PDF", b"%PDF", 1) + b"\n% another copy\n", reader="rules")
    assert len(vision_model.seen) == before


def test_the_import_form_offers_the_reader_only_where_a_model_is_set_up(vision_model, settings, annotator, login):
    from unittest import mock

    from annotation.models import SourceDocument

    client = login(annotator)
    assert 'name="pdf-reader"' in client.get("/annotate/imports/").content.decode()
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        upload = SimpleUploadedFile("p.pdf", gap_paper())
        client.post("/annotate/imports/", {"kind": "pdf", "pdf-files": [upload], "pdf-subject": "math",
                                           "pdf-grade": "9", "pdf-reader": "vision"})  # fmt: skip
    assert SourceDocument.objects.latest("id").job.params["reader"] == "vision"
    settings.SEGMENTATION_BACKEND = ""
    assert 'name="pdf-reader"' not in client.get("/annotate/imports/").content.decode()


def test_the_import_command_takes_the_reader(vision_model, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    path = tmp_path / "gap.pdf"
    path.write_bytes(gap_paper())
    out = StringIO()
    call_command("import_pdf", str(path), "--reader", "rules", stdout=out)
    assert vision_model.seen == [] and json.loads(out.getvalue())["questions"] == 3
    vision_model.replies = [json.dumps({"questions": [question(1), question(2, box=(80, 300, 900, 400))]})]
    path.write_bytes(gap_paper() + b"\n% a second copy\n")
    call_command("import_pdf", str(path), "--reader", "vision", stdout=out)
    assert len(vision_model.seen) == 1
