"""The reference release's record format in and out: the ``<image>`` placeholder kept as a
position and never sent to a model, grades known or not, and the export read by the paper's
own prompt and message building (run from ../shared/reference/, never copied here)."""

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from annotation import export, release_files, releases
from annotation import services as bank
from annotation.jsonl_import import import_questions_file
from annotation.models import CandidateSet, Figure, Question, ReleaseFile
from annotation.reference_format import put_placeholders, take_placeholders
from inference import prompts
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests import reference_code

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _settings(settings, tmp_media):
    settings.STUDIO_COMMIT = "abc123"


def jpeg(size=(200, 120), shade=0) -> bytes:
    image = Image.new("RGB", size, (255, 255 - shade, 255))
    for x in range(10, size[0] - 10):
        image.putpixel((x, size[1] // 2), (0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=85)
    return buffer.getvalue()


def record(hash_id, question, *, qtype="填空题", subject="physics-g9", img=True, **extra):
    line = {
        "hash_id": hash_id,
        "question": question,
        "type": qtype,
        "subject": subject,
        "format_answer": {"ground_truth": ["$5$", "串联"], "format_solution": "步骤1：读图得 $U=10$。\n步骤2：$R=5$。"},
    }
    if img:
        line["img"] = base64.b64encode(jpeg(shade=len(hash_id))).decode("ascii")
    return line | extra


RECORDS = [
    record("middle", "如图所示，<image>电阻为___欧，两灯___联。"),
    record("start", "<image>如图，电阻为___欧，连接方式为___。", grade=8),
    record(
        "choice",
        "如图，求 $x$ 的值。<image>\nA. $1$\nB. $2$\nC. $3$\nD. $4$",
        qtype="选择题",
        subject="math-g12",
        format_answer={"ground_truth": ["B"], "format_solution": "步骤1：由图 $x=2$。\n步骤2：故选 B。"},
    ),
    record("bare", "电阻为___欧，两灯___联。", img=False),
]


def imported(tmp_path, user, records=RECORDS):
    path = tmp_path / "reference.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    report = import_questions_file(path=path, user=user)
    assert report.created == len(records), report.errors
    return {q.hash_id: q for q in Question.objects.all()}


def test_placeholders_come_out_and_go_back_where_they_stood():
    text, positions = take_placeholders("a<image>bc<image>")
    assert (text, positions) == ("abc", [1, 3])
    assert put_placeholders(text, positions) == "a<image>bc<image>"
    assert put_placeholders("ab", [9]) == "ab<image>"  # an edit shortened the text: at its end
    assert put_placeholders("ab", [], at_least_one=True) == "ab<image>"


def test_the_import_keeps_the_figure_position_and_no_placeholder_reaches_a_model(researcher, tmp_path):
    questions = imported(tmp_path, researcher)

    assert questions["middle"].text == "如图所示，电阻为___欧，两灯___联。"
    assert questions["middle"].figure_positions == [len("如图所示，")]
    assert questions["start"].figure_positions == [0]
    # The multiple-choice stem ends where the placeholder stood: the end, the default, stored as none.
    assert questions["choice"].text == "如图，求 $x$ 的值。" and questions["choice"].figure_positions == []
    assert [o["label"] for o in questions["choice"].options] == list("ABCD")
    for question in questions.values():
        values = prompts.question_values(question)
        assert "<image>" not in values["question"] and "<image>" not in values["question_with_options"]


def test_a_placeholder_left_in_stored_text_is_taken_out_before_a_model_reads_it(researcher, tmp_path):
    question = imported(tmp_path, researcher)["bare"]
    Question.objects.filter(pk=question.pk).update(text="旧数据<image>电阻为___欧。")
    question.refresh_from_db()
    assert prompts.question_values(question)["question"] == "旧数据电阻为___欧。"
    # and the reference export writes it once, where it stood
    assert export.reference_record(question)["question"] == "旧数据<image>电阻为___欧。"


def test_a_grade_the_source_did_not_give_is_never_printed_as_one(researcher, tmp_path):
    questions = imported(tmp_path, researcher)

    middle, start = questions["middle"], questions["start"]
    assert (middle.grade, middle.grade_known, middle.stage) == (9, False, "middle")
    assert (start.grade, start.grade_known) == (8, True)
    assert prompts.question_values(middle)["grade"] == "初中"
    assert prompts.question_values(start)["grade"] == "8"
    assert export.reference_record(middle)["grade"] is None and export.reference_record(start)["grade"] == 8

    # A person setting the grade makes it known.
    edited = bank.edit_question(question=middle, changes={"grade": 7}, user=researcher, expected_version=1)
    assert (edited.grade, edited.grade_known) == (7, True)
    assert edited.content_hash == bank.hash_content(bank.content_of(edited))


def test_the_reference_export_restores_the_placeholder_and_round_trips(researcher, tmp_path):
    questions = imported(tmp_path, researcher)
    hashes = {q.hash_id: q.content_hash for q in questions.values()}
    out = tmp_path / "export.jsonl"
    export.export_questions(queryset=Question.objects.all(), fmt="reference", out_path=out)
    lines = {r["hash_id"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}

    assert lines["middle"]["question"] == RECORDS[0]["question"]
    assert lines["start"]["question"] == RECORDS[1]["question"]
    assert lines["choice"]["question"].startswith("如图，求 $x$ 的值。<image>\nA. $1$")
    assert lines["bare"]["question"].endswith("<image>") and lines["bare"]["img"] == ""
    for hash_id in ("middle", "start", "choice"):
        stored = Figure.objects.get(question__hash_id=hash_id).image.read()
        assert base64.b64decode(lines[hash_id]["img"]) == stored  # the stored bytes, not re-encoded
    assert lines["middle"]["format_answer"]["ground_truth"] == ["$5$", "串联"]

    # Imported again into an empty bank, the file gives back the same questions.
    Question.objects.all().delete()
    report = import_questions_file(path=out, user=researcher)
    assert report.created == 4
    assert dict(Question.objects.values_list("hash_id", "content_hash")) == hashes

    # And our own zip keeps positions and unknown grades too.
    zipped = tmp_path / "studio.zip"
    export.export_questions(queryset=Question.objects.all(), fmt="studio", out_path=zipped)
    Question.objects.all().delete()
    assert import_questions_file(path=zipped, user=researcher).created == 4
    assert dict(Question.objects.values_list("hash_id", "content_hash")) == hashes


def released(user, questions) -> Path:
    Question.objects.filter(pk__in=[q.pk for q in questions]).update(status=Question.Status.AUDITED)
    candidate = CandidateSet.objects.create(name="draw", seed=1, bank_fingerprint="x")
    candidate.questions.set(questions)
    release = releases.start_release(candidate_set=candidate, by=user)
    assert execute_job(release.job_id) == Job.Status.SUCCEEDED, Job.objects.get(pk=release.job_id).error
    reference = release.files.get(form=ReleaseFile.Form.REFERENCE)
    return Path(release_files.settings.MEDIA_ROOT) / reference.path


def test_the_reference_code_builds_its_prompts_and_messages_from_a_release(researcher, tmp_path):
    """K12_Vista._build_prompt, vllminfer's messages, Evaluation._build_prompt and the judge's
    ``split('<image>')`` messages, for every record of a release with figures and without."""
    infer_script = reference_code.inference_script()
    eval_script = reference_code.evaluate_script()
    vllminfer = reference_code.vllminfer_module().vllminfer
    judge_class = reference_code.judge_module().K12_PEM_judgemodel
    questions = imported(tmp_path, researcher)
    path = released(researcher, list(questions.values()))
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert {r["hash_id"] for r in records} == set(questions) and any(not r["img"] for r in records)

    for mode in ("directly", "step_by_step"):
        runner = type("Runner", (), {"infer_mode": mode})()
        tasks = infer_script.K12_Vista._build_prompt(runner, [dict(r) for r in records])
        model, chat = reference_code.with_fake_client(vllminfer, "答案：5", model_name="m", retry_times=1)
        for task in tasks:
            assert model(task) == "答案：5"
            content = chat.requests[-1]["messages"][0]["content"]
            assert content[0]["image_url"] == {"url": f"data:image/jpeg;base64,{task['img']}", "detail": "high"}
            assert "<image>" not in content[1]["text"] and task["question"].replace("<image>", "") in content[1]["text"]
            task["infer_result"] = {"m_response": "答案：5", "infer_model": "m"}

        evaluation = type("Eval", (), {"infer_mode": mode, "infer_model": "m"})()
        judged = eval_script.Evaluation._build_prompt(evaluation, tasks)
        reply = '<evaluation>[["5"],["5"],[1]]</evaluation>' if mode == "directly" else "[['读图', '步骤正确', '对']]"
        judge, chat = reference_code.with_fake_client(
            judge_class, reply, infer_mode=mode, model_name="pem", retry_times=1
        )
        for task in judged:
            response, score = judge(task)
            assert score == 1 and response, task["hash_id"]
            content = chat.requests[-1]["messages"][0]["content"]
            assert [part["type"] for part in content] == ["text", "image_url", "text"]
            assert str(task["format_answer"]["ground_truth"]) in content[0]["text"] + content[2]["text"]


def test_a_release_counts_a_cell_whose_grade_was_not_given_by_its_stage(researcher, tmp_path):
    questions = imported(tmp_path, researcher)
    path = released(researcher, list(questions.values()))
    release = ReleaseFile.objects.get(path__endswith=path.name).release
    cells = release.summary["cells"]
    # "start" gave grade 8; the others gave only their tag.
    assert {"subject": "physics", "grade": 8, "qtype": "fill_in_blank", "count": 1} in cells
    assert {"subject": "physics", "grade": None, "qtype": "fill_in_blank", "count": 2, "stage": "middle"} in cells
    assert release_files.grade_text(cells[-1]) in ("8", "high (grade not given)", "middle (grade not given)")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert {line["hash_id"]: line["grade"] for line in lines} == {"middle": None, "start": 8, "choice": None,
                                                                  "bare": None}  # fmt: skip
