"""PEBench's reference export read by the reference's own PEBench code (``K12_PEMBench/code``, run
from ../shared/reference/, never copied here): its prompt building, its message building and its
per-label metric run on the file without a KeyError and count the gold labels."""

import base64
import json
import types
import zipfile
from unittest import mock

import pytest

from annotation.export import jpeg_base64
from annotation.models import Figure
from pem.export import export_pebench
from tests import reference_code
from tests.annotation_factories import make_question
from tests.pem_factories import add_to_pebench, label_steps, make_cot

pytestmark = [pytest.mark.django_db, reference_code.needs_reference, pytest.mark.usefixtures("tmp_media")]


def test_the_reference_pebench_code_reads_the_reference_export(researcher, inspector, tmp_path):
    question = make_question(researcher)
    with_figure = make_cot(key="with-figure", question=question, question_text=question.text,
                           reference_answer="B\nC", reference_solution="步骤1：…")  # fmt: skip
    bare = make_cot(key="bare", steps=["一步。", "两步。"])
    add_to_pebench(with_figure, bare)
    label_steps(with_figure, ["CS", "CE", "IAE"], source="gold", rater="ivan", user=inspector, explanation="因为")
    label_steps(bare, ["KAE", "CS"], source="gold", rater="ivan", user=inspector)
    export_pebench(out_path=tmp_path / "pebench.zip")
    with zipfile.ZipFile(tmp_path / "pebench.zip") as archive:
        records = [json.loads(line) for line in archive.read("pebench-reference.jsonl").splitlines()]
    by_key = {r.get("key", r["hash_id"]): r for r in records}
    # As the question's reference record has it (this figure is stored as PNG: converted to JPEG).
    figure = Figure.objects.get(question=question)
    assert by_key["with-figure"]["img"] == jpeg_base64(figure) and by_key["bare"]["img"] == ""
    assert base64.b64decode(by_key["with-figure"]["img"])[:2] == b"\xff\xd8"
    assert by_key["with-figure"]["ground_truth"] == ["B", "C"]

    script = reference_code.pebench_script()
    runner = types.SimpleNamespace(infer_prompt="infer", infer_model="pem")
    tasks = script.K12_PEMBench._build_prompt(runner, [dict(r) for r in records])
    assert all(task["student_infer"] in task["prompt2infer"] for task in tasks)

    # Its metric, over the export with a judge that agreed on every step but one.
    lines = []
    for task in tasks:
        predicted = [list(step) for step in task["step_labels"]]
        if task.get("key") == "with-figure":
            predicted[1][1] = "步骤正确"  # the calculation error missed
        lines.append({**task, "infer_result": {"pem_response": predicted, "infer_model": "pem"}})
    result_path, metric_path = tmp_path / "pem_result.jsonl", tmp_path / "pem_metrix.json"
    result_path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    with mock.patch("builtins.print"):
        script.K12_PEMBench.evaluate(runner, str(result_path), str(metric_path))
    metric = json.loads(metric_path.read_text(encoding="utf-8"))
    assert metric["all"] == round(4 / 5, 4)
    per_label = [metric[name] for name in ("步骤正确", "运算处理错误", "回答不完整错误", "知识应用错误")]
    assert per_label == [1, 0, 1, 1]
