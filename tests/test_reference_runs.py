"""Inference runs in the reference protocol: every request equals what the reference code's own
``_build_prompt`` and ``vllminfer`` send for the studio's reference export of the same question
(run from ../shared/reference/, never copied here), over real HTTP to a scripted server."""

import base64
import io
import json
from unittest import mock

import pytest
from PIL import Image
from rest_framework.test import APIClient

from annotation import export
from annotation.jsonl_import import import_questions_file
from annotation.models import Question
from inference import services
from inference.models import InferenceRun, ModelEndpoint, PromptTemplate, Protocol, ScoringRun
from inference.reference import judging, messages
from inference.reference.register import reference_prompt, register_checkout
from k12vista.jobs import execute_job
from tests import reference_code
from tests.scripted_models import ScriptedHandler, serve

pytestmark = [pytest.mark.django_db, reference_code.needs_reference]


class Recording(ScriptedHandler):
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        type(self).seen.append(body)
        return self.send_completion(body, "1)思考和推理过程: 读图。\n2)最终答案: B")


@pytest.fixture
def server():
    Recording.seen = []
    with serve(Recording) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _settings(settings, tmp_media):
    settings.MODEL_CALL_RETRIES = 1


def jpeg(shade: int) -> str:
    image = Image.new("RGB", (180, 100), (255, 250 - shade, 240))
    for x in range(10, 170):
        image.putpixel((x, 50), (0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=80)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def questions(tmp_path, user):
    answer = {"ground_truth": ["B"], "format_solution": "步骤1：由图得 $x=2$。\n步骤2：故选 B。"}
    lines = [
        {"hash_id": "fig-choice", "question": "如图，<image>求 $x$。\nA. $1$\nB. $2$\nC. $3$\nD. $4$", "type": "选择题",
         "subject": "math-g9", "img": jpeg(1), "format_answer": answer},
        {"hash_id": "fig-blank", "question": "<image>电阻为___欧。", "type": "填空题", "subject": "physics-g12",
         "img": jpeg(2), "format_answer": {"ground_truth": ["$5$"], "format_solution": "步骤1：$R=5$。"}},
        {"hash_id": "bare-free", "question": "(1) 求 $n$；(2) 求 $m$。", "type": "问答题", "subject": "chemistry-g9",
         "format_answer": {"ground_truth": ["$2$", "$3$"], "format_solution": "步骤1：$n=2$。"}},
    ]  # fmt: skip
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    assert import_questions_file(path=path, user=user).created == 3


def endpoint(base_url) -> ModelEndpoint:
    # Defaults the studio protocol would send; the reference protocol leaves them to the server.
    return services.save_endpoint(
        endpoint=ModelEndpoint(name="m", base_url=base_url, model_name="m", default_params={"temperature": 0.2,
                               "max_tokens": 64}),
        user=None,
    )  # fmt: skip


def start(ep, user, **kwargs) -> InferenceRun:
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        run = services.start_inference_run(endpoint=ep, filters={}, user=user, protocol=Protocol.REFERENCE, **kwargs)
    execute_job(run.job_id)
    run.refresh_from_db()
    return run


def reference_messages(record: dict, mode: str) -> list[dict]:
    """What the reference's own code sends for a record of the studio's reference export."""
    runner = type("Runner", (), {"infer_mode": "directly" if mode == "direct" else mode})()
    [task] = reference_code.inference_script().K12_Vista._build_prompt(runner, [dict(record)])
    model, chat = reference_code.with_fake_client(
        reference_code.vllminfer_module().vllminfer, "x", model_name="m", retry_times=1
    )
    model(task)
    return chat.requests[-1]["messages"]


@pytest.mark.parametrize("mode", ["direct", "step_by_step"])
def test_a_reference_run_sends_what_the_reference_code_sends(server, researcher, tmp_path, mode):
    questions(tmp_path, researcher)
    register_checkout(reference_code.CHECKOUT)

    run = start(endpoint(server), researcher, mode=mode)

    assert run.protocol == "reference" and run.counts()["ok"] == 3
    assert run.params == {} and run.provenance["prompt_set"].startswith("K12Vista@")
    assert len(Recording.seen) == 3
    by_text = {body["messages"][0]["content"][-1]["text"]: body for body in Recording.seen}
    for question in Question.objects.all():
        expected = reference_messages(export.reference_record(question), mode)
        text = expected[0]["content"][1]["text"]
        body = by_text[text]  # the same prompt text, to the character
        assert set(body) == {"model", "messages"}  # no sampling parameter, no system message
        if question.figures.exists():
            assert body["messages"] == expected
        else:  # the reference would send an empty image, which servers refuse; the studio sends none
            assert body["messages"] == [{"role": "user", "content": [expected[0]["content"][1]]}]
        assert "<image>" not in text


def test_set_sampling_parameters_are_sent_and_nothing_else(server, researcher, tmp_path):
    questions(tmp_path, researcher)
    register_checkout(reference_code.CHECKOUT)

    start(endpoint(server), researcher, mode="direct", params={"max_tokens": 32768}, seed=3)

    assert {tuple(sorted(body)) for body in Recording.seen} == {("max_tokens", "messages", "model", "seed")}


def test_it_refuses_what_the_reference_cannot_do(server, researcher, tmp_path, english):
    questions(tmp_path, researcher)
    ep = endpoint(server)
    with pytest.raises(services.EndpointError, match="register"):
        start(ep, researcher, mode="direct")
    register_checkout(reference_code.CHECKOUT)
    with pytest.raises(services.EndpointError, match="reads images"):
        start(ep, researcher, mode="direct", input_form=InferenceRun.InputForm.CAPTIONS)
    assert not InferenceRun.objects.exists()


def test_the_protocol_is_chosen_on_the_form_and_the_api_and_shown_on_the_run(
    server, researcher, tmp_path, login, english
):
    questions(tmp_path, researcher)
    registered = register_checkout(reference_code.CHECKOUT)
    ep = endpoint(server)
    client = login(researcher)
    page = client.get("/research/runs/new/")
    assert registered.set_name in page.content.decode()
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        form = {"endpoint": ep.pk, "mode": "direct", "input_form": "images", "protocol": "reference",
                "prompt_set": registered.set_name}  # fmt: skip
        posted = client.post("/research/runs/new/", form)
        run = InferenceRun.objects.get()
        assert posted.status_code == 302 and run.protocol == "reference"
        shown = client.get(f"/research/runs/{run.pk}/").content.decode()
        assert "K12Vista reference code" in shown and registered.set_name in shown

        api = APIClient()
        api.force_authenticate(researcher)
        answer = api.post("/api/runs/", {"endpoint": ep.pk, "mode": "step_by_step", "protocol": "reference"},
                          format="json")  # fmt: skip
        assert answer.status_code == 201 and answer.json()["protocol"] == "reference"
        assert api.post("/api/runs/", {"endpoint": ep.pk, "mode": "direct", "protocol": "paper"},
                        format="json").status_code == 400  # fmt: skip


@pytest.mark.parametrize("mode", ["direct", "step_by_step"])
def test_judge_messages_are_the_reference_judges(researcher, tmp_path, mode):
    """The reference protocol's judge message (inference.reference.judging) for a question of the
    reference export equals the reference judge's own, built from the reference's own filled prompt."""
    questions(tmp_path, researcher)
    register_checkout(reference_code.CHECKOUT)
    judge_class = reference_code.judge_module().K12_PEM_judgemodel
    ref_mode = "directly" if mode == "direct" else mode
    evaluation = type("Eval", (), {"infer_mode": ref_mode, "infer_model": "m"})()
    kind = ScoringRun.Method.JUDGE_DIRECT if mode == "direct" else ScoringRun.Method.JUDGE_STEPS
    for question in Question.objects.filter(figures__isnull=False).distinct():
        record = judging.judge_record(question)
        line = record | {"infer_result": {"m_response": "答：B", "infer_model": "m"}}
        [task] = reference_code.evaluate_script().Evaluation._build_prompt(evaluation, [line])
        judge, chat = reference_code.with_fake_client(judge_class, "[]", infer_mode=ref_mode, model_name="j",
                                                      retry_times=1)  # fmt: skip
        judge(task)
        template = reference_prompt(JUDGE_KIND[kind], question.qtype)
        figures = messages.figure_parts(question)
        assert judging.messages(template, record, "答：B", figures) == chat.requests[-1]["messages"]


JUDGE_KIND = {
    ScoringRun.Method.JUDGE_DIRECT: PromptTemplate.Kind.JUDGE_DIRECT,
    ScoringRun.Method.JUDGE_STEPS: PromptTemplate.Kind.JUDGE_STEPS,
}


def test_every_figure_of_a_question_is_sent_where_the_reference_sends_its_one(researcher):
    """The reference record has room for one figure; a question with two sends both, in order,
    to the answering model (before the text) and to the judge (where ``<image>`` stands)."""
    from annotation.services import FigureData
    from tests.annotation_factories import figure_png, make_question

    register_checkout(reference_code.CHECKOUT)
    question = make_question(figures=[FigureData(content=figure_png()), FigureData(content=figure_png((300, 200)))])
    stored = [export.jpeg_base64(f) for f in question.figures.order_by("position")]
    assert len(stored) == 2 and stored[0] != stored[1]
    urls = [f"data:image/jpeg;base64,{content}" for content in stored]
    template = reference_prompt(PromptTemplate.Kind.ANSWER_DIRECT, question.qtype)
    [message] = messages.answer_messages(template, question)
    assert [p["image_url"]["url"] for p in message["content"] if p["type"] == "image_url"] == urls
    assert message["content"][-1]["type"] == "text"
    judge_template = reference_prompt(PromptTemplate.Kind.JUDGE_STEPS, question.qtype)
    record = judging.judge_record(question)
    [judged] = judging.messages(judge_template, record, "答：B", messages.figure_parts(question))
    assert [p["type"] for p in judged["content"]] == ["text", "image_url", "image_url", "text"]
    assert [p["image_url"]["url"] for p in judged["content"][1:3]] == urls


def large_jpeg() -> bytes:
    image = Image.new("RGB", (1600, 900), (250, 250, 245))
    for x in range(40, 1560):
        for y in (300, 301, 600):
            image.putpixel((x, y), (0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=87)
    return buffer.getvalue()


@pytest.mark.parametrize("side", [0, 1024])
def test_a_large_reference_jpeg_is_sent_as_imported_when_figures_keep_their_size(
    server, researcher, tmp_path, settings, side
):
    """FIGURE_STANDARD_SIDE_PX=0 keeps a figure over 1024 px as the reference record had it, so the
    model receives the reference's own JPEG byte for byte; by default it is shrunk at import."""
    settings.FIGURE_STANDARD_SIDE_PX = side
    content = large_jpeg()
    line = {"hash_id": "big", "question": "如图，<image>电阻为___欧。", "type": "填空题", "subject": "physics-g9",
            "img": base64.b64encode(content).decode("ascii"),
            "format_answer": {"ground_truth": ["$5$"], "format_solution": "步骤1：$R=5$。"}}  # fmt: skip
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    assert import_questions_file(path=path, user=researcher).created == 1
    register_checkout(reference_code.CHECKOUT)

    start(endpoint(server), researcher, mode="direct")

    figure = Question.objects.get().figures.get()
    stored = figure.image.read()
    [body] = Recording.seen
    [url] = [p["image_url"]["url"] for p in body["messages"][0]["content"] if p["type"] == "image_url"]
    sent = base64.b64decode(url.removeprefix("data:image/jpeg;base64,"))
    assert sent == stored
    if side == 0:
        assert stored == content and (figure.width, figure.height) == (1600, 900)
        assert figure.sharpness is not None
    else:
        assert stored != content and max(figure.width, figure.height) == 1024
