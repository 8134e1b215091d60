"""PEM training data like K12-PEM's: the reference's step-judge prompt (registered from
../shared/reference) with question, answer, reference solution and the student's steps in, the
reference list with Chinese labels out, no system turn; the studio's JSON style stays the default."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from inference.parsing import reference as reference_reader
from pem.models import StepLabel, TrainingExport
from pem.training import exports, filters, formats
from tests.annotation_factories import make_question
from tests.pem_factories import label_steps, make_cot
from tests.reference_code import CHECKOUT, needs_reference, prompt_tables, reference_judge

pytestmark = [needs_reference, pytest.mark.django_db]

IMPORTED = StepLabel.Source.IMPORTED
STEPS = ("由图可知 $AB=4$，且 $\\frac{1}{2}AB=2$。", "由勾股定理得 AC=5，即 'AC' 的长。", "所以答案为 B。")


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def kept_run(user):
    question = make_question(answers=["B"], qtype="fill_in_blank")
    for i in range(3):  # the coverage filter keeps a question answered by 3 models
        cot = make_cot(key=f"{question.hash_id}:{i}", model_name=f"m{i}", question=question, steps=STEPS,
                       reference_answer="4\n5", reference_solution="步骤1：AB=4\n步骤2：AC=5",
                       question_text="如图 <image> 求 AB 与 AC", qtype="fill_in_blank")  # fmt: skip
        label_steps(cot, ("CS", "CE", "CS"), source=IMPORTED, rater="pem", explanation='算错了 "5"')
    run = filters.start_filter_run(source=IMPORTED, rater="pem", params=None, user=user)
    filters.run_filters(run)
    run.refresh_from_db()
    assert run.kept == 3
    return run


def test_a_reference_style_export_is_k12_pems_input_and_target(media, researcher):
    call_command("register_reference_prompts", str(CHECKOUT), stdout=StringIO())
    run = kept_run(researcher)
    out = StringIO()
    call_command("export_training", str(run.pk), "--style", "reference", stdout=out)
    assert json.loads(out.getvalue())["checked"] == dict.fromkeys(formats.FORMATS, 3)
    export = TrainingExport.objects.get()
    assert export.style == "reference" and export.prompt_set.startswith("K12Vista@")
    root = exports.export_path(export)
    line = json.loads((root / "llamafactory.jsonl").read_text(encoding="utf-8").splitlines()[0])
    roles = [m["role"] for m in line["messages"]]
    assert roles == ["user", "assistant"]  # no system turn: the reference judge sends none
    user, target = line["messages"][0]["content"], line["messages"][1]["content"]
    _infer, eval_prompt, _pembench = prompt_tables()
    expected = eval_prompt["step_by_step_eval_prompt"]["填空题"].format(
        question="如图 [image] 求 AB 与 AC", answer=["4", "5"], solution="步骤1：AB=4\n步骤2：AC=5",
        student_answer="\n".join(STEPS),
    )  # fmt: skip
    assert user == "<image>" + expected
    # The target reads back, with the reference's own reader too, as the three steps and labels.
    judged, score = reference_judge().step_by_step_eval(target)
    assert [item[1] for item in judged] == ["步骤正确", "运算处理错误", "步骤正确"]
    assert judged[0][0] == STEPS[0].replace("，", ",") and score == pytest.approx(2 / 3)
    ours = reference_reader.read_step_judgment(target)
    assert [s["label"] for s in ours.value["steps"]] == ["CS", "CE", "CS"]
    assert (
        ours.value["steps"][1]["step"] == STEPS[1].replace("，", ",")
        and ours.value["steps"][2]["reason"] == '算错了 "5"'
    )
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["style"] == "reference" and manifest["prompt_set"] == export.prompt_set


def test_the_studio_style_is_the_default_and_a_reference_export_needs_registered_prompts(media, researcher):
    run = kept_run(researcher)
    with pytest.raises(exports.ExportError, match="register"):
        exports.start_export(filter_run=run, user=researcher, style="reference")
    export = exports.start_export(filter_run=run, user=researcher)
    exports.write_export(export)
    line = json.loads((exports.export_path(export) / "swift.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert line["messages"][0] == {"role": "system", "content": formats.SYSTEM_PROMPT}
    assert json.loads(line["messages"][2]["content"])["steps"][0]["label"] == "CS"
