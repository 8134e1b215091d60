"""The difficulty and image-dependence filters screen (paper section 3.2): a
researcher combines finished filter runs, sees what would be removed and why,
and confirms; the question bank's own service rejects the questions."""

import re

import pytest

from annotation import services as bank_service
from annotation.models import Question, QuestionEdit
from inference import answers, assist, difficulty
from inference.models import AssistResult, AssistRun, ModelEndpoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.conftest import make_person

URL = "/research/difficulty/"
Kind = AssistRun.Kind


@pytest.fixture(autouse=True)
def _in_english(client, settings):
    """The assertions read the English source strings, whatever the translations say."""
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"


def filter_run(user, kind, verdicts: dict, *, model="small-a", job_status=Job.Status.SUCCEEDED) -> AssistRun:
    """A filter run as its job leaves it: ``verdicts`` maps a question to the
    model's answer text (checked by the real verdict function), or to a result
    status for calls that failed or stayed pending."""
    endpoint, _ = ModelEndpoint.objects.get_or_create(
        name=model, defaults={"base_url": "http://127.0.0.1:8000/v1", "model_name": model}
    )
    job = Job.objects.create(kind=assist.JOB_KIND, status=job_status, started_by=user) if job_status else None
    run = AssistRun.objects.create(name=f"{model} {kind}", kind=kind, endpoint=endpoint, created_by=user, job=job)
    for question, said in verdicts.items():
        if said in AssistResult.Status.values:
            AssistResult.objects.create(run=run, question=question, status=said)
        else:
            parsed = answers.judge_answer(question, said)
            AssistResult.objects.create(run=run, question=question, status=AssistResult.Status.OK, parsed=parsed)
    return run


@pytest.fixture
def bank(db):
    """easy: every small model answers B (right); image_free: the text-only model
    gets it right; hard: nobody does."""
    return {name: make_question(figures=[]) for name in ("easy", "image_free", "hard")}


@pytest.fixture
def runs(researcher, bank):
    easy, free, hard = bank["easy"], bank["image_free"], bank["hard"]
    small = Kind.SMALL_MODEL_FILTER
    first = filter_run(researcher, small, {easy: "最终答案：B", free: "最终答案：A", hard: "C"})
    second = filter_run(researcher, small, {easy: "选 B", free: "最终答案：B", hard: "D"}, model="small-b")
    text = filter_run(researcher, Kind.TEXT_ONLY_FILTER, {easy: "A", free: "最终答案：B", hard: "A"}, model="large")
    return first, second, text


def query(small, text=None) -> dict:
    return {"small": [run.pk for run in small], "text_only": text.pk if text else ""}


def post_data(small, text, fingerprint) -> dict:
    return {**query(small, text), "fingerprint": fingerprint}


def fingerprint_in(body: str) -> str:
    return re.search(r'name="fingerprint" value="([0-9a-f]{64})"', body).group(1)


def test_it_shows_the_questions_to_remove_with_their_evidence_and_count(researcher, login, bank, runs):
    first, second, text = runs
    response = login(researcher).get(URL, query([first, second], text))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-count="2"' in body and 'data-candidates="2"' in body
    assert f'<tr data-question="{bank["easy"].hash_id}" data-rules="small_models">' in body
    assert f'<tr data-question="{bank["image_free"].hash_id}" data-rules="text_only">' in body
    assert bank["hard"].hash_id not in body
    # which runs solved it: each run's verdict and answer, per question
    easy_row = body.split(f'data-question="{bank["easy"].hash_id}"')[1].split("</tr>")[0]
    assert f'data-run="{first.pk}" data-correct="yes"' in easy_row
    assert f'data-run="{text.pk}" data-correct="no"' in easy_row
    assert "Confirm: reject 2 questions" in body
    # looking changes nothing
    assert not Question.objects.filter(status=Question.Status.REJECTED).exists()


def test_confirming_starts_a_job_that_rejects_in_the_question_bank_and_twice_changes_nothing(
    researcher, login, bank, runs
):
    first, second, text = runs
    client = login(researcher)
    fingerprint = fingerprint_in(client.get(URL, query([first, second], text)).content.decode())
    edits_before = QuestionEdit.objects.count()
    response = client.post(URL, post_data([first, second], text, fingerprint))
    assert response.status_code == 302 and response["Location"].startswith(URL + "?small=")
    job = Job.objects.get(kind=difficulty.CONFIRM_JOB_KIND)
    assert f"job={job.pk}" in response["Location"] and job.status == Job.Status.QUEUED
    # the request only queued the work: nothing is rejected before the job runs
    assert not Question.objects.filter(status=Question.Status.REJECTED).exists()
    assert QuestionEdit.objects.count() == edits_before
    waiting = client.get(response["Location"]).content.decode()
    assert f'id="job-{job.pk}"' in waiting and 'data-status="queued"' in waiting and "filter-job-result" not in waiting

    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.result == {"rejected": 2} and (job.done, job.total) == (2, 2)
    easy, free, hard = (Question.objects.get(pk=bank[n].pk) for n in ("easy", "image_free", "hard"))
    assert (easy.status, free.status) == ("rejected", "rejected") and hard.status != "rejected"
    assert "every small model answered correctly" in easy.reject_reason
    assert f"small-a (run {first.pk})" in easy.reject_reason and f"small-b (run {second.pk})" in easy.reject_reason
    assert f"large (run {text.pk}) answered correctly without the image" in free.reject_reason
    edit = QuestionEdit.objects.get(question=easy, new="rejected")
    assert edit.user == researcher
    page = client.get(response["Location"]).content.decode()
    assert "Rejected 2 questions" in page and 'data-count="0"' in page and 'data-state="removed"' in page

    versions = dict(Question.objects.values_list("id", "version"))
    edits = QuestionEdit.objects.count()
    assert execute_job(job.pk) == "not-claimed"  # a second delivery of the same job
    again = client.post(URL, post_data([first, second], text, fingerprint))
    assert again.status_code == 302
    second_job = Job.objects.exclude(pk=job.pk).get(kind=difficulty.CONFIRM_JOB_KIND)
    assert execute_job(second_job.pk) == Job.Status.SUCCEEDED
    assert dict(Question.objects.values_list("id", "version")) == versions and QuestionEdit.objects.count() == edits
    assert "Nothing changed" in client.get(again["Location"]).content.decode()


def test_the_job_writes_the_same_rows_as_rejecting_one_by_one(researcher, bank, runs):
    """reject_many is reject for a set: same status, version, reason and history rows."""
    first, second, text = runs
    preview = difficulty.preview_filters([first, second], text)
    one_by_one = make_question(figures=[])
    bank_service.reject(question=one_by_one, reason=difficulty.rejection_reason(preview, bank["easy"].pk),
                        user=researcher)  # fmt: skip
    before = Question.objects.get(pk=bank["easy"].pk)
    job = difficulty.start_confirm_filters(small_runs=[first, second], text_only_run=text,
                                       fingerprint=preview.fingerprint, user=researcher)  # fmt: skip
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    by_set, by_one = Question.objects.get(pk=bank["easy"].pk), Question.objects.get(pk=one_by_one.pk)
    assert (by_set.status, by_set.reject_reason) == (by_one.status, by_one.reject_reason)
    assert by_set.version == before.version + 1

    def rows(question):
        return list(QuestionEdit.objects.filter(question=question, field="status").values_list(
            "user", "field", "version", "old", "new", "note"))  # fmt: skip

    assert rows(by_set) == [(researcher.pk, "status", before.version + 1, before.status, "rejected",
                             by_one.reject_reason)]  # fmt: skip
    # the one-by-one question started from the same status and version: the same row
    assert rows(by_one) == rows(by_set)


def test_reject_many_skips_what_it_keeps_and_needs_a_reason(researcher, bank):
    easy, free, hard = bank["easy"], bank["image_free"], bank["hard"]
    Question.objects.filter(pk=free.pk).update(status=Question.Status.RELEASED)
    seen = []
    n = bank_service.reject_many(Question.objects.filter(pk__in=[easy.pk, free.pk, hard.pk]), reason=" too easy ",
                                 user=researcher, keep=("rejected", "released"), batch_size=2,
                                 progress=lambda done, total: seen.append((done, total)))  # fmt: skip
    assert n == 2 and seen == [(2, 3), (3, 3)]
    assert Question.objects.get(pk=free.pk).status == Question.Status.RELEASED
    assert set(Question.objects.filter(status="rejected").values_list("reject_reason", flat=True)) == {"too easy"}
    assert bank_service.reject_many([easy.pk, hard.pk], reason="again", user=researcher) == 0
    assert QuestionEdit.objects.filter(field="status", new="rejected").count() == 2
    with pytest.raises(bank_service.QuestionDataError):
        bank_service.reject_many([easy.pk], reason="  ", user=researcher)


def test_a_confirmation_gone_stale_before_its_job_runs_fails_the_job_and_changes_nothing(researcher, bank, runs):
    first, second, text = runs
    preview = difficulty.preview_filters([first, second], None)
    job = difficulty.start_confirm_filters(small_runs=[first, second], text_only_run=None,
                                       fingerprint=preview.fingerprint, user=researcher)  # fmt: skip
    AssistResult.objects.filter(run__in=[first, second], question=bank["hard"]).update(parsed={"correct": True})
    assert execute_job(job.pk) == Job.Status.FAILED
    assert "changed since the preview" in Job.objects.get(pk=job.pk).error
    assert not Question.objects.filter(status=Question.Status.REJECTED).exists()


def test_it_refuses_a_confirmation_of_something_other_than_what_was_shown(researcher, login, bank, runs):
    first, second, text = runs
    client = login(researcher)
    fingerprint = fingerprint_in(client.get(URL, query([first, second])).content.decode())
    # meanwhile the second small model's answer to the hard question is re-read as correct
    AssistResult.objects.filter(run=second, question=bank["hard"]).update(parsed={"correct": True})
    AssistResult.objects.filter(run=first, question=bank["hard"]).update(parsed={"correct": True})
    response = client.post(URL, post_data([first, second], None, fingerprint))
    body = response.content.decode()
    assert response.status_code == 409 and "changed since the preview (2 now)" in body
    assert 'data-count="2"' in body and fingerprint_in(body) != fingerprint
    assert not Question.objects.filter(status=Question.Status.REJECTED).exists()


def test_it_says_which_run_is_not_finished_or_not_scored(researcher, login, bank, runs):
    first, _second, _text = runs
    running = filter_run(researcher, Kind.SMALL_MODEL_FILTER, {bank["easy"]: "最终答案：B"}, model="small-c",
                         job_status=Job.Status.RUNNING)  # fmt: skip
    pending = filter_run(researcher, Kind.SMALL_MODEL_FILTER, {bank["easy"]: "pending"}, model="small-d")
    failed = filter_run(researcher, Kind.TEXT_ONLY_FILTER, {bank["easy"]: "call_failed"}, model="large-2")
    client = login(researcher)
    response = client.get(URL, query([first, running, pending], failed))
    body = response.content.decode()
    assert response.status_code == 400 and 'id="filter-preview"' not in body
    assert f"small-c small_model_filter (run {running.pk}) is not finished: job Running, 0 questions pending" in body
    assert f"(run {pending.pk}) is not finished: job Succeeded, 1 questions pending" in body
    assert f"(run {failed.pk}) is not scored" in body
    assert client.post(URL, post_data([first, running], None, "x" * 64)).status_code == 400
    assert not Question.objects.filter(status=Question.Status.REJECTED).exists()


def test_it_keeps_released_and_already_rejected_questions_as_they_are(researcher, bank, runs):
    first, second, text = runs
    Question.objects.filter(pk=bank["easy"].pk).update(status=Question.Status.RELEASED)
    Question.objects.filter(pk=bank["image_free"].pk).update(status=Question.Status.REJECTED, reject_reason="dup")
    preview = difficulty.preview_filters([first, second], text)
    assert (len(preview.candidates), preview.to_remove, preview.released, preview.already_rejected) == (2, (), 1, 1)
    assert difficulty.confirm_filters(small_runs=[first, second], text_only_run=text,
                                  fingerprint=preview.fingerprint, user=researcher) == 0  # fmt: skip
    assert Question.objects.get(pk=bank["easy"].pk).status == Question.Status.RELEASED
    assert Question.objects.get(pk=bank["image_free"].pk).reject_reason == "dup"


def test_a_question_a_small_model_could_not_answer_is_never_removed_on_its_word(researcher, login, bank, runs, english):
    first, _second, _text = runs
    shaky = filter_run(researcher, Kind.SMALL_MODEL_FILTER,
                       {bank["easy"]: "parse_failed", bank["image_free"]: "最终答案：B"}, model="small-e")  # fmt: skip
    preview = difficulty.preview_filters([first, shaky], None)
    assert preview.candidates == () and preview.unchecked == {shaky.pk: 1}
    body = login(researcher).get(URL, query([first, shaky])).content.decode()
    assert f'<span data-run="{shaky.pk}">' in body and 'id="filter-nothing"' in body
    # A question without a reference answer is unchecked too (assist.skip_reason), and the page says so.
    assert "no reference answer to check against" in body


def test_it_checks_the_choice_of_runs(researcher, runs, english):
    first, _second, text = runs
    with pytest.raises(difficulty.FilterError, match="at least one"):
        difficulty.preview_filters([], None)
    with pytest.raises(difficulty.FilterError, match="chosen twice"):
        difficulty.preview_filters([first, first], None)
    with pytest.raises(difficulty.FilterError, match="is not a small-model difficulty run"):
        difficulty.preview_filters([text], None)
    with pytest.raises(difficulty.FilterError, match="is not a text-only run"):
        difficulty.preview_filters([], first)


def test_it_offers_only_ones_own_runs_and_keeps_annotators_out(researcher, annotator, login, runs):
    first, _second, _text = runs
    other = make_person("rob", Role.RESEARCHER)
    client = login(other)
    assert f'value="{first.pk}"' not in client.get(URL).content.decode()
    response = client.post(URL, post_data([first], None, "0" * 64))
    assert response.status_code == 400 and not Question.objects.filter(status=Question.Status.REJECTED).exists()
    assert client.get(URL, {"small": ["nonsense"]}).status_code == 400
    assert login(annotator).get(URL).status_code == 403


def test_it_asks_for_a_run_when_none_is_chosen(researcher, login, runs):
    client = login(researcher)
    page = client.get(URL)
    assert page.status_code == 200 and 'id="filter-form"' in page.content.decode()
    assert "research/difficulty/" in client.get("/research/runs/").content.decode()  # in the research menu
    response = client.get(URL, {"text_only": ""})
    assert response.status_code == 400 and "Choose at least one" in response.content.decode()
