"""The whole reference protocol over real HTTP: reference records imported, the reference prompts
registered from ../shared/reference, two models answering in the reference protocol, a judge
scoring them in it, the reference's cells on the leaderboard; the reference's own ``_save_result``
over the exported ``{model}_eval.jsonl`` gives the same cells (to 1e-9)."""

import base64
import io
import json
import zipfile
from unittest import mock

import pytest
from PIL import Image

from annotation.jsonl_import import import_questions_file
from inference import scoring, services
from inference.leaderboard import reference_cells
from inference.models import InferenceRun, Judgment, ModelEndpoint, Protocol
from inference.reference import board, results
from inference.reference.register import register_checkout
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests import reference_code
from tests.scripted_models import Servers, user_text
from tests.test_reference_aggregation import reference_save_result

pytestmark = [pytest.mark.django_db, reference_code.needs_reference]

TAGS = ["math-g6", "math-g9", "physics-g12", "chemistry-g9", "biology-g12", "geography-g9"]
TYPES = ["选择题", "填空题", "问答题"]


@pytest.fixture(autouse=True)
def _settings(settings, tmp_media):
    settings.MODEL_CALL_RETRIES = 1


@pytest.fixture
def servers():
    running = Servers()
    yield running
    running.stop()


def jpeg(n: int) -> str:
    image = Image.new("RGB", (120, 80), (255, 255 - n, 250))
    for x in range(5, 115):
        image.putpixel((x, 40), (0, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=80)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def reference_lines() -> list[dict]:
    lines = []
    for i, (tag, qtype) in enumerate((t, q) for t in TAGS for q in TYPES):
        question = f"Q{i:02d} 如图，<image>求 $x$。" + ("\nA. $1$\nB. $2$\nC. $3$\nD. $4$" if qtype == "选择题" else "")
        answers = ["B"] if qtype == "选择题" else ["$2$", "$3$"][: 1 + i % 2]
        solution = "步骤1：读图。\n步骤2：得解。"
        lines.append({"hash_id": f"e2e-{i:02d}", "question": question, "type": qtype, "subject": tag, "img": jpeg(i),
                      "format_answer": {"ground_truth": answers, "format_solution": solution}})  # fmt: skip
    return lines


def student(name: str):
    def reply(body: dict) -> tuple[int, str]:
        marker = user_text(body).split("Q", 1)[1][:2]
        return 200, f"{name} 的答案 Q{marker}"

    return reply


def judge(body: dict) -> tuple[int, str]:
    """Marks by question and model; one question's reply never reads (the reference drops it)."""
    text = user_text(body)
    marker = int(text.split("Q", 1)[1][:2])
    model_b = "student-b 的答案" in text
    if marker == 7 and model_b:
        return 200, "我无法判断。"
    n = 1 if "['B']" in text or "['$2$']" in text else 2
    marks = [(marker + k + model_b) % 2 for k in range(n)]
    return 200, f"<evaluation>[{['x'] * n}, {['y'] * n}, {marks}]</evaluation>"


def test_two_models_answered_and_judged_in_the_reference_protocol_give_the_references_cells(
    servers, researcher, tmp_path
):
    path = tmp_path / "release.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in reference_lines()), "utf-8")
    assert import_questions_file(path=path, user=researcher).created == 18
    register_checkout(reference_code.CHECKOUT)
    base = servers.start({"student-a": student("student-a"), "student-b": student("student-b"), "judge-72b": judge})
    judge_endpoint = services.save_endpoint(endpoint=ModelEndpoint(name="judge", base_url=base, model_name="judge-72b"),
                                            user=None)  # fmt: skip

    for name in ("student-a", "student-b"):
        ep = services.save_endpoint(endpoint=ModelEndpoint(name=name, base_url=base, model_name=name), user=None)
        with mock.patch("k12vista.tasks.run_job.apply_async"):
            run = services.start_inference_run(endpoint=ep, mode=InferenceRun.Mode.DIRECT, filters={},
                                               user=researcher, protocol=Protocol.REFERENCE)  # fmt: skip
            assert execute_job(run.job_id) == Job.Status.SUCCEEDED
            run = InferenceRun.objects.get(pk=run.pk)
            scoring_run = scoring.start_scoring_run(inference_run=run, judge=judge_endpoint, method="judge_direct",
                                                    user=researcher, protocol=Protocol.REFERENCE)  # fmt: skip
            assert execute_job(scoring_run.job_id) == Job.Status.SUCCEEDED
        assert run.counts()["ok"] == 18

    assert Judgment.objects.filter(score__isnull=True).count() == 1
    entries = board.reference_board("direct")
    assert [entry.model for entry in entries] == ["student-a", "student-b"]
    for entry in entries:
        out = tmp_path / f"results-{entry.scoring_run.pk}.zip"
        found = results.write_results(entry.scoring_run, out)
        with zipfile.ZipFile(out) as archive:
            archive.extractall(tmp_path / f"r{entry.scoring_run.pk}")
        eval_path = tmp_path / f"r{entry.scoring_run.pk}" / "directly_eval" / f"{found['model']}_eval.jsonl"
        table = reference_save_result(eval_path, found["model"])["table"]
        compared = 0
        for row in reference_cells.ROWS:
            for column in reference_cells.COLUMNS:
                ours, theirs = entry.cells[row][column].mean, table[row][column]
                assert (ours is None) == (theirs is None), (entry.model, row, column)
                if ours is not None:
                    assert abs(ours - theirs) <= 1e-9, (entry.model, row, column, ours, theirs)
                    compared += 1
        assert compared > 30
        assert entry.outside.unscored == (1 if entry.model == "student-b" else 0)
