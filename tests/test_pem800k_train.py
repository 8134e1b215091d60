"""train_pem: TRL on the tiny test model, for a few steps, on a TRL export; the checkpoint as an endpoint."""

import json
import subprocess
from io import StringIO
from pathlib import Path
from unittest import mock

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from inference import engines
from inference.models import ModelEndpoint, PromptTemplate
from k12vista.jobs import execute_job
from k12vista.models import Job
from pem.models import TrainingRun
from pem.training import exports, formats, jobs, train, trainer
from tests.model_server import ML_PYTHON, _offline_env
from tests.test_pem800k_export import kept_run

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def export(settings, tmp_path, researcher):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TRANSFORMERS_PYTHON = str(ML_PYTHON)
    run, _ = kept_run(researcher)
    made = exports.start_export(filter_run=run, user=researcher, formats_wanted=["trl", "llamafactory"],
                                min_pixels=28 * 28, max_pixels=64 * 64)  # fmt: skip
    exports.write_export(made)
    made.refresh_from_db()
    return made


def test_it_trains_the_tiny_model_with_lora_on_the_gpu_queue_and_registers_the_checkpoint(
    export, tiny_model_dir, researcher
):
    params = {"max_steps": 2, "lora": True, "lora_r": 4}
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        run = jobs.start_training(export=export, base_model=str(tiny_model_dir), hyperparameters=params,
                                  user=researcher)  # fmt: skip
    assert run.job.queue == Job.Queue.GPU
    assert run.export_sha256 == export.manifest_sha256 and len(run.commit) == 40
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.DONE and run.metrics["global_step"] == 2
    assert (settings.MEDIA_ROOT / run.checkpoint / "config.json").is_file()
    assert run.hyperparameters["lora"] is True and run.hyperparameters["learning_rate"] == 1e-4
    endpoint = train.register_endpoint(run, name="pem-tiny", user=researcher)
    assert endpoint.kind == ModelEndpoint.Kind.TRANSFORMERS
    # The prompt it learnt on, reused by the next checkpoint trained on the same format, never current().
    assert endpoint.judge_prompt.kind == "judge_steps_trained" and endpoint.judge_prompt.system == formats.SYSTEM_PROMPT
    assert train.register_endpoint(run, name="pem-tiny-2", user=researcher).judge_prompt == endpoint.judge_prompt
    assert PromptTemplate.objects.filter(kind="judge_steps_trained").count() == 1
    [completion] = engines.local_chat_batch(endpoint, [[{"role": "user", "content": "步骤1：$1+1=2$"}]],
                                            {"max_tokens": 3})  # fmt: skip
    assert completion.completion_tokens >= 1
    assert "vllm serve" in train.vllm_serve_command(run) and '"max_pixels": 4096' in train.vllm_serve_command(run)


def test_it_refuses_an_export_whose_images_are_missing_before_training(export, researcher, english):
    for image in (exports.export_path(export) / "images").iterdir():
        image.unlink()
    with pytest.raises(train.TrainingError, match="images are missing"):
        train.start_training(export=export, base_model="/nowhere", hyperparameters={}, user=researcher)
    with pytest.raises(CommandError, match="images are missing"):
        call_command("train_pem", str(export.pk), "--base-model", "/nowhere", stdout=StringIO())
    assert not TrainingRun.objects.exists()


def test_a_conversation_becomes_a_prompt_and_the_assistants_answer_as_its_completion():
    example = {"question": "题", "reference_answer": "B", "steps": ["甲。"], "labels": [("CS", "")],
               "images": ["images/a.png"]}  # fmt: skip
    line = formats.render("trl", example)
    row = trainer.prompt_completion(line, "/export")
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and row["prompt"] == line["messages"][:2]
    answer = {"role": "assistant", "content": [{"type": "text", "text": formats.assistant_text(example)}]}
    assert row["completion"] == [answer]
    assert row["images"] == ["/export/images/a.png"]
    with pytest.raises(ValueError, match="must end with the assistant's answer"):
        trainer.prompt_completion({"messages": line["messages"][:2], "images": []}, "/export")


def test_a_step_that_keeps_its_own_number_is_not_numbered_twice():
    example = {"question": "题\nA. 1\nB. 2", "reference_answer": "B",
               "steps": ["步骤1：设 $x=3$。", "计算得 $2x=6$。", "步骤3: 最终答案：B"]}  # fmt: skip
    text = formats.user_text(example)
    assert text.endswith("学生解答：\n步骤1：设 $x=3$。\n步骤2：计算得 $2x=6$。\n步骤3: 最终答案：B")
    assert "步骤1：步骤1" not in text and text.count("步骤") == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("qtype", "options", "answers"),
    [("multiple_choice", [{"label": "A", "text": "1"}, {"label": "B", "text": "2"}], ["B"]),
     ("fill_in_blank", [], ["$x=2$", "$y=3$"])],  # no options, two sub-answers
)  # fmt: skip
def test_the_judge_prompt_shows_an_answer_as_the_export_shows_an_example(qtype, options, answers):
    """A scoring run fills the registered prompt with the question's values (inference.prompts); the
    export shows a chain as the bank's question fills it (pem.services.fill_from_bank): its text with
    the options one a line, the sub-answers one a line, the steps numbered as the export numbers
    them. The two texts are the same, so a trained PEM is scored on what it learnt on."""
    from inference import default_prompts, prompts
    from pem import services
    from tests.annotation_factories import make_question

    question = make_question(qtype=qtype, options=options, answers=answers, figures=[])
    chain = services.ChainData(key="q:1", question_hash_id=question.hash_id)
    services.fill_from_bank([chain])
    example = {"question": chain.question_text, "reference_answer": chain.reference_answer,
               "steps": ["由题意 $x=2$。", "最终答案：B"]}  # fmt: skip
    answer = "步骤1：由题意 $x=2$。\n步骤2：最终答案：B"
    prompt = {"name": "pem", "system": formats.SYSTEM_PROMPT, "user_template": formats.JUDGE_USER_TEMPLATE}
    rendered = default_prompts.render(type("P", (), prompt), **prompts.question_values(question), model_answer=answer)
    assert rendered == (formats.SYSTEM_PROMPT, formats.user_text(example))
    assert "\n\n\n" not in rendered[1]  # no empty line for a question without options


# Run in the ml Python: the batch the trainer's collator makes of the export's first line.
COLLATE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import trainer
built, processor, _ = trainer.build_trainer(json.loads(sys.stdin.read()))
batch = built.data_collator([built.train_dataset[0]])
ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
first = next((n for n, label in enumerate(labels) if label != -100), len(labels))
print(json.dumps({"tokens": len(ids), "first_learnt": first, "masked_after": labels[first:].count(-100),
                  "learnt": processor.tokenizer.decode(labels[first:]), "images": int(batch["pixel_values"].shape[0])}))
"""


def collate(export, model_dir, tmp_path, **hyperparameters) -> dict:
    request = {"export_dir": str(exports.export_path(export)), "data_file": "trl.jsonl", "base_model": str(model_dir),
               "output_dir": str(tmp_path / "out"), "hyperparameters": hyperparameters}  # fmt: skip
    command = [str(ML_PYTHON), "-c", COLLATE, str(Path(trainer.__file__).parent)]
    done = subprocess.run(command, input=json.dumps(request), capture_output=True, text=True,  # noqa: S603
                          env=_offline_env(tmp_path / "hf"), timeout=300, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_trainer_learns_the_assistants_answer_only_and_every_token_when_asked(export, tiny_model_dir, tmp_path):
    answer = json.loads((exports.export_path(export) / "trl.jsonl").read_text().splitlines()[0])["messages"][-1]
    target = answer["content"][0]["text"]
    batch = collate(export, tiny_model_dir, tmp_path)
    # The system prompt, the question and its image are context; the answer and its end of turn are learnt.
    assert batch["images"] == 1 and batch["first_learnt"] > 100 and batch["masked_after"] == 0
    assert batch["learnt"] == target + "<|im_end|>\n"
    whole = collate(export, tiny_model_dir, tmp_path, completion_only_loss=False)
    assert whole["first_learnt"] == 0 and whole["learnt"].endswith(target + "<|im_end|>\n")
    assert whole["tokens"] == batch["tokens"]


def test_the_run_records_the_loss_on_the_answer_only_unless_told_otherwise(english):
    assert train.clean_hyperparameters({})["completion_only_loss"] is True
    assert train.clean_hyperparameters({"completion_only_loss": False})["completion_only_loss"] is False
    with pytest.raises(train.TrainingError, match="completion_only_loss must be true or false"):
        train.clean_hyperparameters({"completion_only_loss": "yes"})
    with pytest.raises(train.TrainingError, match="gradient_checkpointing must be true or false"):
        train.clean_hyperparameters({"gradient_checkpointing": 1})
