from unittest import mock

import pytest

from inference.models import Response
from k12vista.jobs import execute_job
from k12vista.models import Job
from pem import jobs
from pem.chains import cots_from_run, labels_from_scoring_run, split_response
from pem.models import Alignment, ChainOfThought, StepLabel
from pem.services import PEBenchError
from tests.annotation_factories import make_question
from tests.pem_factories import answer, judge, label_steps, make_endpoint, make_run, make_scoring_run

ANSWER = "步骤1：由图可知 $AB=4$，$BC=3$。\n步骤2：由勾股定理得 $AC=5$。\n步骤3：所以周长为 $12$。\n最终答案：$12$"
GOLD = ["由图可知 $AB=4$，$BC=3$。", "由勾股定理得 $AC=5$。", "所以周长为 $12$。", "最终答案：$12$"]


# --- splitting responses --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        (ANSWER, GOLD),
        ("<think>先想一想……\n\n再想一想</think>\n步骤1：甲。\n步骤2：乙。", ["甲。", "乙。"]),
        ("步骤1：甲，\n续写。\n步骤2：乙。", ["甲，\n续写。", "乙。"]),
        ("首先读题。\n\n由图可知 $x=2$。\n\n所以答案为 2。", ["首先读题。", "由图可知 $x=2$。", "所以答案为 2。"]),
        ("第一行\n第二行\n答案：B", ["第一行", "第二行", "答案：B"]),
        ("1. 甲\n2. 乙", ["甲", "乙"]),
        ("   ", []),
        ("<think>只有思考</think>", []),
    ],
)
def test_it_splits_a_response_by_its_numbering_else_paragraphs_else_lines(text, steps):
    assert split_response(text) == steps


# --- chains of thought from a run --------------------------------------------------------------


@pytest.mark.django_db
def test_it_makes_one_chain_per_answered_response():
    run = make_run(make_endpoint("qwen-7b"))
    question = make_question(subject="physics", grade=8, qtype="fill_in_blank")
    answer(run, question, ANSWER)
    answer(run, make_question(), "", status=Response.Status.FAILED)
    answer(run, make_question(), "   ")
    report = cots_from_run(inference_run=run)
    assert (report["created"], report["not_answered"], report["responses"]) == (1, 2, 3)
    cot = ChainOfThought.objects.get()
    assert cot.key == f"{question.hash_id}:{run.pk}" and cot.origin == ChainOfThought.Origin.INFERENCE
    assert cot.step_source == ChainOfThought.StepSource.RULE and cot.model_name == "qwen-7b"  # not "split by a model"
    assert (cot.subject, cot.stage, cot.qtype, cot.question) == ("physics", "middle", "fill_in_blank", question)
    assert cot.reference_answer == "\n".join(question.answers) and cot.response_text == ANSWER
    assert list(cot.steps.values_list("text", flat=True)) == GOLD


@pytest.mark.django_db
def test_it_leaves_chains_alone_on_a_second_pass_and_resplits_a_retried_answer():
    run = make_run()
    response = answer(run, make_question(), ANSWER)
    cots_from_run(inference_run=run)
    step_ids = list(ChainOfThought.objects.get().steps.values_list("pk", flat=True))
    assert cots_from_run(inference_run=run)["unchanged"] == 1
    assert list(ChainOfThought.objects.get().steps.values_list("pk", flat=True)) == step_ids
    Response.objects.filter(pk=response.pk).update(raw_output="步骤1：重新作答。\n最终答案：B")
    assert cots_from_run(inference_run=run)["updated"] == 1
    assert list(ChainOfThought.objects.get().steps.values_list("text", flat=True)) == ["重新作答。", "最终答案：B"]


@pytest.mark.django_db
def test_it_keeps_labelled_steps_when_the_answer_changes(annotator):
    run = make_run()
    response = answer(run, make_question(), ANSWER)
    cots_from_run(inference_run=run)
    label_steps(ChainOfThought.objects.get(), ["CS"] * 4, user=annotator)
    Response.objects.filter(pk=response.pk).update(raw_output="步骤1：重新作答。")
    report = cots_from_run(inference_run=run)
    assert report["conflict"] == 1 and report["conflict_keys"] == [ChainOfThought.objects.get().key]
    assert ChainOfThought.objects.get().steps.count() == 4


@pytest.mark.django_db
def test_it_makes_chains_as_a_job(researcher):
    run = make_run()
    answer(run, make_question(), ANSWER)
    job = jobs.start_cots_from_run(inference_run=run, user=researcher)
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.result["created"] == 1 and ChainOfThought.objects.count() == 1


# --- labels from a scoring run -------------------------------------------------------------------


def chain_with_judgment(judged_steps, *, judge_name="judge-72b"):
    run = make_run()
    response = answer(run, make_question(), ANSWER)
    cots_from_run(inference_run=run)
    scoring_run = make_scoring_run(run, make_endpoint(judge_name))
    judge(scoring_run, response, judged_steps)
    return ChainOfThought.objects.get(response=response), scoring_run


def model_labels(cot, rater="judge-72b"):
    rows = StepLabel.objects.filter(step__cot=cot, source=StepLabel.Source.MODEL, rater=rater)
    return {row.step.position: (row.label, row.explanation) for row in rows}


@pytest.mark.django_db
def test_it_takes_the_judges_labels_step_for_step_when_it_split_alike():
    cot, scoring_run = chain_with_judgment([(text, "CS", "") for text in GOLD[:3]] + [(GOLD[3], "IAE", "缺单位")])
    report = labels_from_scoring_run(scoring_run=scoring_run)
    assert report["labelled"] == 1 and report["different_step_counts"] == 0 and report["alignment"] == {"identical": 1}
    assert model_labels(cot) == {1: ("CS", ""), 2: ("CS", ""), 3: ("CS", ""), 4: ("IAE", "缺单位")}
    label = StepLabel.objects.filter(step__cot=cot).first()
    assert label.scoring_run == scoring_run and label.taxonomy_version
    alignment = Alignment.objects.get(cot=cot, scoring_run=scoring_run)
    assert (alignment.gold_steps, alignment.judge_steps) == (4, 4)


@pytest.mark.django_db
def test_it_aligns_a_judge_that_merged_steps_by_content_and_says_so():
    merged = [
        (GOLD[0] + GOLD[1], "CE", "算错"),
        (GOLD[2], "CS", ""),
        (GOLD[3], "CS", ""),
    ]
    cot, scoring_run = chain_with_judgment(merged)
    report = labels_from_scoring_run(scoring_run=scoring_run)
    assert report["different_step_counts"] == 1 and report["alignment"] == {"realigned": 1}
    assert report["different"] == [{"key": cot.key, "kind": "realigned"}]
    # Both gold steps the judge merged get its label; nothing is shifted by position.
    assert model_labels(cot) == {1: ("CE", "算错"), 2: ("CE", "算错"), 3: ("CS", ""), 4: ("CS", "")}
    pairs = Alignment.objects.get(cot=cot).pairs
    assert [pair[:2] for pair in pairs] == [[1, 1], [2, 1], [3, 2], [4, 3]]


@pytest.mark.django_db
def test_it_counts_judge_steps_that_match_no_gold_step_and_gold_steps_left_unlabelled():
    judged = [(GOLD[0], "CS", ""), ("另外，题目还说明了一个与此无关的条件。", "HE", "编造"), (GOLD[2], "CS", "")]
    cot, scoring_run = chain_with_judgment(judged)
    report = labels_from_scoring_run(scoring_run=scoring_run)
    # Gold step 2 has no judge step; gold step 4 ("最终答案：$12$") is covered by judge step 3 ("…为 $12$").
    assert report["unmatched_judge_steps"] == 1 and report["unlabelled_gold_steps"] == 1
    assert report["alignment"] == {"partial": 1}
    assert model_labels(cot) == {1: ("CS", ""), 3: ("CS", ""), 4: ("CS", "")}
    assert [None, 2, 0.0, "extra"] in Alignment.objects.get(cot=cot).pairs


@pytest.mark.django_db
def test_it_writes_the_same_labels_when_run_twice():
    cot, scoring_run = chain_with_judgment([(text, "CS", "") for text in GOLD])
    labels_from_scoring_run(scoring_run=scoring_run)
    before = list(StepLabel.objects.values_list("pk", "label"))
    labels_from_scoring_run(scoring_run=scoring_run)
    assert list(StepLabel.objects.values_list("pk", "label")) == before and Alignment.objects.count() == 1


@pytest.mark.django_db
def test_it_counts_responses_without_a_chain_and_refuses_direct_scoring(english):
    run = make_run()
    response = answer(run, make_question(), ANSWER)
    scoring_run = make_scoring_run(run)
    judge(scoring_run, response, [("x", "CS", "")])
    assert labels_from_scoring_run(scoring_run=scoring_run)["no_chain_of_thought"] == 1
    scoring_run.method = "judge_direct"
    with pytest.raises(PEBenchError, match="step-by-step"):
        labels_from_scoring_run(scoring_run=scoring_run)


@pytest.mark.django_db
def test_it_pulls_labels_as_a_job(researcher):
    cot, scoring_run = chain_with_judgment([(text, "CS", "") for text in GOLD])
    job = jobs.start_labels_from_scoring_run(scoring_run=scoring_run, user=researcher)
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.result["labelled"] == 1 and len(model_labels(cot)) == 4


# --- the screens ----------------------------------------------------------------------------


@pytest.fixture
def sent():
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


@pytest.mark.django_db
def test_it_starts_chains_and_labels_jobs_for_the_researchers_own_runs(researcher, login, sent):
    run = make_run()
    run.created_by = researcher
    run.save()
    scoring_run = make_scoring_run(run)
    client = login(researcher)
    page = client.get("/pem/data/").content.decode()
    assert f'value="{run.pk}"' in page and f'value="{scoring_run.pk}"' in page
    # Nothing to make chains or labels of yet: refused on the page, no job (issue 29).
    assert client.post("/pem/data/from-run/", {"inference_run": run.pk})["Location"] == "/pem/data/"
    assert client.post("/pem/data/from-scoring/", {"scoring_run": scoring_run.pk})["Location"] == "/pem/data/"
    assert not Job.objects.exists()
    answered = answer(run, make_question(), "步骤1：由 $x^2=4$ 得 $x=2$。\n最终答案：B")
    response = client.post("/pem/data/from-run/", {"inference_run": run.pk})
    job = Job.objects.get(kind=jobs.COTS_FROM_RUN)
    assert response["Location"] == f"/jobs/{job.pk}/" and job.params == {"inference_run_id": run.pk}
    cots_from_run(inference_run=run)
    judge(scoring_run, answered, [("由 $x^2=4$ 得 $x=2$。", "CS", "")])
    client.post("/pem/data/from-scoring/", {"scoring_run": scoring_run.pk})
    assert Job.objects.get(kind=jobs.LABELS_FROM_SCORING).params == {"scoring_run_id": scoring_run.pk}


@pytest.mark.django_db
def test_it_refuses_someone_elses_run_and_a_direct_one(researcher, annotator, login, sent):
    others = make_run()  # started by nobody: not the researcher's
    mine_direct = make_run(mode="direct")
    mine_direct.created_by = researcher
    mine_direct.save()
    client = login(researcher)
    for run in (others, mine_direct):
        response = client.post("/pem/data/from-run/", {"inference_run": run.pk}, follow=True)
        assert response.status_code == 200
    assert client.post("/pem/data/from-scoring/", {"scoring_run": make_scoring_run(others).pk}).status_code == 302
    assert not Job.objects.exists()
    assert login(annotator).post("/pem/data/from-run/", {"inference_run": others.pk}).status_code == 403
