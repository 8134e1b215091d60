"""Model help for the question bank as assist runs, against real HTTP servers on
this machine: a scripted fake answering per kind, and the tiny model server."""

import json
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Flag, StepProposal
from inference import answers, assist, client, difficulty, services
from inference.models import AssistResult, AssistRun, Caption, ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question
from tests.scripted_models import ScriptedHandler, serve


class Scripted(ScriptedHandler):
    """Answers /v1/chat/completions: the next status from ``script`` (200 when
    empty), with the text ``answer(request body)`` returns."""

    script: list[int] = []
    seen: list[dict] = []
    answer = staticmethod(lambda body: "")

    def do_POST(self):  # noqa: N802
        body = self.read_body()
        type(self).seen.append(body)
        status = type(self).script.pop(0) if type(self).script else 200
        if status != 200:
            return self.send_error_status(status)
        return self.send_completion(body, type(self).answer(body), usage=(11, 7))


def prompt_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


@pytest.fixture
def scripted_server():
    Scripted.script, Scripted.seen, Scripted.answer = [], [], staticmethod(lambda body: "")
    with serve(Scripted) as base_url:
        yield base_url


@pytest.fixture(autouse=True)
def _quick_retries(settings):
    settings.MODEL_CALL_RETRIES = 2


def answering(text_or_function):
    Scripted.answer = staticmethod(text_or_function if callable(text_or_function) else lambda body: text_or_function)


def endpoint(base_url, **fields) -> ModelEndpoint:
    return services.save_endpoint(
        endpoint=ModelEndpoint(name=fields.pop("name", "m"), base_url=base_url, model_name=fields.pop("model", "m"),
                               **fields),
        user=None,
    )  # fmt: skip


def start(ep, researcher, kind, **kwargs) -> AssistRun:
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        return assist.start_assist_run(kind=kind, endpoint=ep, filters=kwargs.pop("filters", {}), user=researcher,
                                       **kwargs)  # fmt: skip


def run_now(run: AssistRun) -> AssistRun:
    assert execute_job(run.job_id) == Job.Status.SUCCEEDED
    run.refresh_from_db()
    return run


def model_flags(question):
    return list(Flag.objects.filter(question=question, origin=Flag.Origin.MODEL).order_by("id"))


STEPS = json.dumps({"steps": ["由 $x^2=4$ 得 $x=\\pm 2$。", "又 $x>0$，所以 $x=2$。", "故选 B。"]}, ensure_ascii=False)
PROBLEMS = json.dumps(
    {"ok": False, "problems": [{"code": "incomplete_options", "message": "只有三个选项。"},
                               {"code": "garbled_text", "message": "题干有乱码。"}]},
    ensure_ascii=False,
)  # fmt: skip


def test_it_freezes_what_produces_the_results(scripted_server, researcher):
    make_question(), make_question(subject="physics")
    run = start(endpoint(scripted_server, default_params={"temperature": 0}), researcher, "restructure_solution",
                filters={"subject": "math"}, params={"max_tokens": 300})  # fmt: skip
    assert run.job.kind == "inference.assist" and run.job.queue == "io"
    assert run.params == {"temperature": 0, "max_tokens": 300}
    prompt = run.provenance["prompts"]["fill_in_blank"]
    assert prompt["id"] and len(prompt["hash"]) == 64
    assert run.provenance["endpoint"]["model_name"] == "m" and run.provenance["schema"] == "restructured_solution"
    assert run.provenance["questions"]["count"] == 1


def test_it_refuses_a_switched_off_endpoint_and_captions_without_images(scripted_server, researcher, english):
    with pytest.raises(services.EndpointError, match="switched off"):
        start(endpoint(scripted_server, active=False), researcher, "check_structure")
    with pytest.raises(services.EndpointError, match="images"):
        start(endpoint(scripted_server, name="text", accepts_images=False), researcher, "caption_image")
    assert not AssistRun.objects.exists()


def test_it_proposes_restructured_steps_through_the_question_bank(scripted_server, researcher):
    question = make_question()
    answering(STEPS)
    run = run_now(start(endpoint(scripted_server, model="qwen-72b"), researcher, "restructure_solution"))
    proposal = StepProposal.objects.get(question=question)
    assert proposal.steps[1] == "又 $x>0$，所以 $x=2$。" and proposal.status == "pending"
    assert proposal.run_ref == f"inference.assist:{run.pk}" and proposal.model_name == "qwen-72b"
    result = run.results.get()
    assert result.status == "ok" and result.raw_output == STEPS and result.parsed["parse_status"] == "ok"
    sent = Scripted.seen[0]
    assert "因为 $x^2=4$ 且 $x>0$" in prompt_text(sent)  # the raw solution
    assert sent["response_format"]["json_schema"]["name"] == "restructured_solution"
    assert assist.counts(run) == {"total": 1, "ok": 1, "skipped": 0, "skipped_why": {}, "parse_failed": 0,
                                  "call_failed": 0, "pending": 0}  # fmt: skip


def test_it_skips_questions_without_a_raw_solution_without_asking(scripted_server, researcher):
    make_question(raw_solution="")
    run = run_now(start(endpoint(scripted_server), researcher, "restructure_solution"))
    assert Scripted.seen == []
    assert run.results.get().parsed == {"skipped": "the question has no raw solution to restructure"}
    assert not StepProposal.objects.exists()
    # Counted as skipped with why, never as done (issue 29: "ok: 48" when all 48 were skipped).
    tally = assist.counts(run)
    assert (tally["ok"], tally["skipped"]) == (0, 1)
    assert tally["skipped_why"] == {"题目没有可重构的原始解析": 1}  # worded for the reader (Chinese by default)
    assert Job.objects.get(pk=run.job_id).result["skipped"] == 1


def test_a_difficulty_run_skips_a_question_without_a_reference_answer_and_lists_it_unchecked(
    scripted_server, researcher
):
    answered, bare = make_question(answers=["B"]), make_question(answers=[])
    answering("最终答案：B")
    run = run_now(start(endpoint(scripted_server), researcher, "small_model_filter"))
    assert len(Scripted.seen) == 1  # no call for the question that cannot be checked
    tally = assist.counts(run)
    assert (tally["ok"], tally["skipped"]) == (1, 1)
    preview = difficulty.preview_filters([run], None)
    assert preview.candidates == (answered.pk,) and preview.unchecked == {run.pk: 1}
    assert bare.pk not in preview.candidates


def test_it_flags_structure_problems_once_per_run(scripted_server, researcher):
    question = make_question()
    answering(PROBLEMS)
    run = run_now(start(endpoint(scripted_server), researcher, "check_structure"))
    flags = model_flags(question)
    assert [(f.message, f.detail["code"], f.code) for f in flags] == [
        ("只有三个选项。", "incomplete_options", "model_check"),
        ("题干有乱码。", "garbled_text", "model_check"),
    ]
    assert {f.run_ref for f in flags} == {f"inference.assist:{run.pk}"}

    # The same item processed again (a crash after the flags, before the row): no duplicates.
    run.results.update(status="pending")
    execute_job(Job.objects.create(kind="inference.assist", params={"run_id": run.pk}).pk)
    assert len(Scripted.seen) == 2 and len(model_flags(question)) == 2


def test_a_clean_structure_check_writes_nothing(scripted_server, researcher):
    question = make_question()
    answering('{"ok": true, "problems": []}')
    run = run_now(start(endpoint(scripted_server), researcher, "check_structure"))
    assert run.results.get().parsed["ok"] is True and model_flags(question) == []


def test_it_captions_figures_from_the_images_it_sends(scripted_server, researcher):
    question = make_question()
    answering("坐标系中有一个圆，圆心在第一象限。")
    run = run_now(start(endpoint(scripted_server), researcher, "caption_image"))
    caption = Caption.objects.get(question=question, run=run)
    assert caption.text == "坐标系中有一个圆，圆心在第一象限。"
    parts = Scripted.seen[0]["messages"][-1]["content"]
    assert parts[-1]["type"] == "image_url" and parts[-1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert "response_format" not in Scripted.seen[0]
    assert model_flags(question) == [] and not StepProposal.objects.exists()


def _by_question(correct_marker: str, correct: str, wrong: str):
    return lambda body: correct if correct_marker in prompt_text(body) else wrong


def test_the_small_model_filter_flags_only_correctly_answered_questions(scripted_server, researcher):
    easy = make_question(text="甲：已知 $x^2=4$，且 $x>0$，则 $x$ 等于")
    hard = make_question(text="乙：已知 $x^2=9$，且 $x>0$，则 $x$ 等于", answers=["C"])
    answering(_by_question("甲", "最终答案：B", "最终答案：D"))
    run = run_now(start(endpoint(scripted_server, model="MiniCPM-V-2.6"), researcher, "small_model_filter"))
    [flag] = model_flags(easy)
    assert flag.message == "answered correctly by MiniCPM-V-2.6 (small_model_filter)"
    assert flag.run_ref == f"inference.assist:{run.pk}" and flag.detail["code"] == "small_model_filter"
    assert model_flags(hard) == []
    verdicts = {r.question_id: r.parsed for r in run.results.all()}
    assert verdicts[easy.pk]["correct"] is True and verdicts[easy.pk]["model_answers"] == ["B"]
    assert verdicts[hard.pk]["correct"] is False and verdicts[hard.pk]["model_answers"] == ["D"]
    assert all(body["messages"][-1]["content"][-1]["type"] == "image_url" for body in Scripted.seen)
    # Never rejected or edited: only flagged.
    easy.refresh_from_db()
    assert easy.status == "imported" and easy.version == 1


def test_it_lists_the_questions_all_small_models_solved(scripted_server, researcher):
    easy, hard = make_question(text="甲：$x^2=4$，$x>0$，$x$ 等于"), make_question(text="乙：$x^2=4$，$x>0$，$x$ 等于")
    answering("最终答案：B")
    first = run_now(start(endpoint(scripted_server, name="a"), researcher, "small_model_filter"))
    answering(_by_question("甲", "最终答案：B", "最终答案：A"))
    second = run_now(start(endpoint(scripted_server, name="b"), researcher, "small_model_filter"))
    assert list(difficulty.solved_by_all([first, second])) == [easy]
    assert list(difficulty.solved_by_all([first])) == [easy, hard]
    with pytest.raises(ValueError, match="filter runs"):
        difficulty.solved_by_all([])


def test_the_text_only_filter_answers_without_images_and_compares_short_answers(scripted_server, researcher):
    solved = make_question(qtype="fill_in_blank", text="丙：$1+1=$___，$2\\times 3=$___", options=[],
                           answers=["2", "$6$"])  # fmt: skip
    unsolved = make_question(qtype="fill_in_blank", text="丁：$\\frac{1}{2}=$___", options=[], answers=["0.5"])
    answering(_by_question("丙", "最终答案：$2$；６.0", "最终答案：\\frac{1}{2}"))
    run = run_now(start(endpoint(scripted_server, model="qwen-72b"), researcher, "text_only_filter"))
    assert [f.message for f in model_flags(solved)] == ["answered correctly by qwen-72b (text_only_filter)"]
    assert model_flags(unsolved) == []  # a known limit: no symbolic equivalence, so the question is kept
    assert all(isinstance(body["messages"][-1]["content"], str) for body in Scripted.seen)
    assert run.results.get(question=unsolved).parsed["correct"] is False


@pytest.mark.parametrize(
    ("output", "letter"),
    [
        ("最终答案：B", "B"),
        ("最终答案：B．$2$", "B"),
        ("（B）", "B"),
        ("答案：选B", "B"),
        ("<think>A 还是 C？</think>\nC", "C"),
        ("最终答案：$2$", "B"),  # the option's content instead of its letter
    ],
)
def test_it_reads_the_option_letter_of_a_direct_answer(db, output, letter):
    question = make_question()
    assert answers.judge_answer(question, output)["model_answers"] == [letter]


def test_an_answer_without_an_option_letter_is_a_parse_failure(scripted_server, researcher):
    question = make_question()
    answering("我认为这道题比较简单。")
    run = run_now(start(endpoint(scripted_server), researcher, "small_model_filter"))
    result = run.results.get()
    assert result.status == "parse_failed" and "no option letter" in result.error
    assert result.raw_output == "我认为这道题比较简单。" and model_flags(question) == []


def test_unreadable_output_is_kept_as_a_parse_failure_and_writes_nothing(scripted_server, researcher):
    question = make_question()
    answering("抱歉，我无法整理这个解析。")
    run = run_now(start(endpoint(scripted_server), researcher, "restructure_solution"))
    result = run.results.get()
    assert result.status == "parse_failed" and result.parsed is None and result.error
    assert result.raw_output == "抱歉，我无法整理这个解析。"
    assert not StepProposal.objects.filter(question=question).exists()


def test_a_failed_call_is_recorded_and_the_run_goes_on(scripted_server, researcher):
    first, second = make_question(), make_question()
    Scripted.script = [400]
    answering(PROBLEMS)
    run = run_now(start(endpoint(scripted_server, max_concurrency=1), researcher, "check_structure"))
    failed = run.results.get(status="call_failed")
    assert "HTTP 400" in failed.error and failed.attempts == 1 and failed.question_id == first.pk
    assert model_flags(first) == [] and len(model_flags(second)) == 2
    assert assist.counts(run)["call_failed"] == 1

    with mock.patch("k12vista.tasks.run_job.apply_async"):
        job = assist.retry_failed(run=run, user=researcher)
    execute_job(job.pk)
    assert assist.counts(run) == {"total": 2, "ok": 2, "skipped": 0, "skipped_why": {}, "parse_failed": 0,
                                  "call_failed": 0, "pending": 0}  # fmt: skip
    assert len(model_flags(first)) == 2


def test_a_retry_is_refused_while_the_runs_job_is_still_queued_and_nothing_changes(
    scripted_server, researcher, api, english
):
    make_question()
    Scripted.script = [400]
    answering(PROBLEMS)
    run = run_now(start(endpoint(scripted_server), researcher, "check_structure"))
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        retry = assist.retry_failed(run=run, user=researcher)  # queued: no worker took it yet
        with pytest.raises(services.RetryRefused, match="still running"):
            assist.retry_failed(run=run, user=researcher)
        answer = api(researcher).post(f"/api/assist/{run.pk}/retry/")
    assert answer.status_code == 400 and "still running" in answer.content.decode()
    run.refresh_from_db()
    assert run.job_id == retry.pk and Job.objects.filter(kind="inference.assist").count() == 2
    execute_job(retry.pk)  # once it has ended, a retry is taken again
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        assert assist.retry_failed(run=run, user=researcher).pk != retry.pk


def result_updates(researcher, questions: int) -> tuple[AssistRun, int]:
    """Saves one batch of restructuring outcomes for ``questions`` questions (each fourth call
    failed, each fourth output unreadable); returns the run and the UPDATEs of its result rows."""
    for _ in range(questions):
        make_question()
    run = start(endpoint("http://127.0.0.1:9/v1", name=f"m {questions}"), researcher, "restructure_solution")
    assist.create_missing_results(run)
    said = [client.Completion(text=text, latency_ms=5, prompt_tokens=11, completion_tokens=7, finish_reason="stop",
                              attempts=1) for text in (STEPS, "不是 JSON")]  # fmt: skip
    failed = client.ModelCallError("HTTP 400: too long", transient=False, attempts=1)
    outcomes = [failed, said[1], said[0], said[0]]
    batch = [(r, outcomes[n % 4]) for n, r in enumerate(run.results.select_related("question").order_by("id"))]
    with CaptureQueriesContext(connection) as queries:
        assist.save_results(run, batch)
    return run, sum(q["sql"].startswith('UPDATE "inference_assistresult"') for q in queries)


def test_a_batch_of_results_updates_its_rows_in_as_many_statements_for_4_as_for_28(researcher):
    small, few = result_updates(researcher, 4)
    large, many = result_updates(researcher, 24)  # 28 questions by then
    assert few == many <= 3  # one per set of columns: a failed call, an unreadable output, an answer
    # The second run asks about all 28 questions of the bank.
    assert assist.counts(large) == {"total": 28, "ok": 14, "skipped": 0, "skipped_why": {}, "parse_failed": 7,
                                    "call_failed": 7, "pending": 0}  # fmt: skip
    assert StepProposal.objects.filter(run_ref=assist.run_ref(large)).count() == 14  # each written back once
    first = large.results.order_by("id").first()
    assert (first.status, first.attempts, first.finished is not None) == ("call_failed", 1, True)


def test_it_resumes_without_asking_again(scripted_server, researcher):
    make_question(), make_question()
    answering(STEPS)
    run = run_now(start(endpoint(scripted_server), researcher, "restructure_solution"))
    asked = len(Scripted.seen)
    again = Job.objects.create(kind="inference.assist", params={"run_id": run.pk})
    assert execute_job(again.pk) == Job.Status.SUCCEEDED
    assert len(Scripted.seen) == asked == 2
    assert AssistResult.objects.filter(run=run).count() == 2 and StepProposal.objects.count() == 2


def test_gibberish_from_a_real_model_server_writes_nothing_to_the_question(tiny_model_server, researcher):  # noqa: F811
    base_url, model_name = tiny_model_server
    choice = make_question()
    blank = make_question(qtype="fill_in_blank", text="$17 \\times 23=$___", options=[], answers=["391"])
    ep = endpoint(base_url, model=model_name, default_params={"max_tokens": 8, "temperature": 0})
    for kind in ("restructure_solution", "check_structure", "text_only_filter"):
        run = run_now(start(ep, researcher, kind))
        results = list(run.results.order_by("question_id"))
        assert [r.status for r in results] != ["call_failed"] * 2, [r.error for r in results]
        for result in results:
            assert result.status == "parse_failed" or (result.status == "ok" and result.parsed["correct"] is False)
            assert result.raw_output
    for question in (choice, blank):
        assert model_flags(question) == [] and not StepProposal.objects.filter(question=question).exists()
