import re

import pytest
from django.utils.html import escape

from annotation import queues, services
from annotation.models import Assignment, Question, StepProposal
from tests.annotation_factories import make_question

OCR = Assignment.Task.OCR_REVIEW
STEPS = Assignment.Task.STEP_CORRECTION


def review_post(question, **overrides):
    data = {
        "version": question.version, "subject": question.subject, "grade": question.grade, "qtype": question.qtype,
        "text": question.text, "options": "\n".join(f"{o['label']}. {o['text']}" for o in question.options),
        "answers": "\n".join(question.answers), "raw_solution": question.raw_solution,
        "knowledge_points": "平方根", "difficulty": "", "action": "save",
    }  # fmt: skip
    data.update(overrides)
    return data


@pytest.fixture
def held(annotator):
    make_question()
    return queues.next_assignment(annotator=annotator, task=OCR)


def test_it_lists_only_my_assignments_in_my_queue(held, annotator, other_annotator, login):
    make_question()
    queues.next_assignment(annotator=other_annotator, task=OCR)
    body = login(annotator).get("/annotate/").content.decode()
    assert held.question.hash_id in body
    assert Assignment.objects.exclude(pk=held.pk).get().question.hash_id not in body


def test_it_claims_the_next_question_and_opens_its_screen(annotator, login):
    question = make_question()
    response = login(annotator).post("/annotate/claim/", {"task": "ocr_review"})
    assignment = Assignment.objects.get()
    assert response.url == f"/annotate/review/{assignment.pk}/"
    assert assignment.question == question and assignment.annotator == annotator


def test_it_says_so_when_nothing_is_waiting(annotator, login):
    response = login(annotator).post("/annotate/claim/", {"task": "ocr_review"}, follow=True)
    assert response.redirect_chain[-1][0] == "/annotate/"
    assert not Assignment.objects.exists()


def test_it_hides_another_annotators_assignment(held, other_annotator, login):
    client = login(other_annotator)
    assert client.get(f"/annotate/review/{held.pk}/").status_code == 404
    assert client.post(f"/annotate/work/{held.pk}/reject/", {"reason": "x"}).status_code == 404
    held.question.refresh_from_db()
    assert held.question.status == Question.Status.IMPORTED


@pytest.mark.parametrize("persona", ["inspector", "researcher", "administrator"])
def test_it_keeps_other_roles_out_of_annotation_screens(held, persona, request, login):
    client = login(request.getfixturevalue(persona))
    assert client.get(f"/annotate/review/{held.pk}/").status_code == 403
    assert client.post("/annotate/claim/", {"task": "ocr_review"}).status_code == 403


def test_it_shows_the_question_with_its_flags(annotator, login):
    question = make_question(answers=[])
    assignment = queues.next_assignment(annotator=annotator, task=OCR)
    body = login(annotator).get(f"/annotate/review/{assignment.pk}/").content.decode()
    assert escape(question.text) in body and 'data-code="missing_answer"' in body


def test_it_saves_corrections_and_returns_to_the_screen(held, annotator, login):
    question = held.question
    response = login(annotator).post(f"/annotate/review/{held.pk}/", review_post(question, answers="C", grade="8"))
    assert response.status_code == 302
    question.refresh_from_db()
    assert question.answers == ["C"] and question.grade == 8 and question.version == 2


def test_it_autosaves_through_htmx_and_returns_the_new_version(held, annotator, login):
    response = login(annotator).post(
        f"/annotate/review/{held.pk}/", review_post(held.question, text="改过的题干", action="autosave"),
        headers={"HX-Request": "true"},
    )  # fmt: skip
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert 'name="version" value="2"' in body and 'hx-swap-oob="true"' in body


def test_it_refuses_a_stale_save_and_shows_what_changed(held, annotator, other_annotator, login):
    question = held.question
    mine = review_post(question, text="我的修改")  # what the page had when I opened it (version 1)
    services.edit_question(question=question, user=other_annotator, expected_version=1, changes={"answers": ["D"]})
    response = login(annotator).post(f"/annotate/review/{held.pk}/", mine)
    assert response.status_code == 409
    body = response.content.decode()
    # What the other person changed, by the field's label and its value as the form shows it.
    assert re.search(
        r'data-field="answers"><dt>(Answers|答案)</dt><dd><del data-math>B</del> → <ins data-math>D</ins>', body
    )
    assert "我的修改" in body  # my version kept in the form
    question.refresh_from_db()
    assert question.answers == ["D"] and question.text != "我的修改"


def test_it_accepts_and_moves_the_question_on(held, annotator, login):
    response = login(annotator).post(f"/annotate/review/{held.pk}/", review_post(held.question, action="accept"))
    assert response.url == "/annotate/"
    held.refresh_from_db()
    held.question.refresh_from_db()
    assert held.done_at is not None and held.question.status == Question.Status.OCR_REVIEWED


def test_it_rejects_with_a_reason(held, annotator, login):
    client = login(annotator)
    client.post(f"/annotate/work/{held.pk}/reject/", {"reason": ""})
    held.question.refresh_from_db()
    assert held.question.status == Question.Status.IMPORTED
    client.post(f"/annotate/work/{held.pk}/reject/", {"reason": "题目不完整"})
    held.question.refresh_from_db()
    assert held.question.status == Question.Status.REJECTED


def test_it_reports_a_malformed_option_line(held, annotator, login):
    response = login(annotator).post(f"/annotate/review/{held.pk}/", review_post(held.question, options="nonsense"))
    assert response.status_code == 200 and "nonsense" in response.content.decode()
    held.question.refresh_from_db()
    assert held.question.version == 1


@pytest.fixture
def steps_held(annotator):
    question = make_question(solution_steps=[])
    question.accept_ocr(by=annotator)
    services.add_step_proposal(question=question, steps=["第一步", "第二步", "第三步"], run_ref="run:1", model_name="m")
    return queues.next_assignment(annotator=annotator, task=STEPS)


def test_it_starts_step_correction_from_the_models_proposal(steps_held, annotator, login):
    body = login(annotator).get(f"/annotate/steps/{steps_held.pk}/").content.decode()
    assert body.count('name="step"') == 3 and "第二步" in body


def test_it_saves_edited_steps_and_shows_the_diff(steps_held, annotator, login):
    client = login(annotator)
    data = {"version": steps_held.question.version, "step": ["第一步", "改正的第二步", "", "第三步", "第四步"]}
    assert client.post(f"/annotate/steps/{steps_held.pk}/", {**data, "action": "save"}).status_code == 302
    question = Question.objects.get()
    assert question.solution_steps == ["第一步", "改正的第二步", "第三步", "第四步"]
    body = client.get(f"/annotate/steps/{steps_held.pk}/").content.decode()
    assert 'class="diff-removed">− 第二步' in body and 'class="diff-added">+ 改正的第二步' in body


def test_it_submits_steps_and_marks_the_proposal_used(steps_held, annotator, login):
    data = {"version": steps_held.question.version, "step": ["只有一步"], "action": "submit"}
    assert login(annotator).post(f"/annotate/steps/{steps_held.pk}/", data).url == "/annotate/"
    question = Question.objects.get()
    assert question.status == Question.Status.SOLUTION_CORRECTED
    assert StepProposal.objects.get().status == StepProposal.Status.USED


def test_it_refuses_an_empty_solution(steps_held, annotator, login):
    data = {"version": steps_held.question.version, "step": ["", " "], "action": "submit"}
    assert login(annotator).post(f"/annotate/steps/{steps_held.pk}/", data).status_code == 200
    assert Question.objects.get().status == Question.Status.OCR_REVIEWED


def test_it_lets_researchers_browse_and_filter_with_keyset_pages(researcher, login):
    math = [make_question(figures=[], text="如图，求 $x$") for _ in range(3)]
    make_question(subject="physics", figures=[])
    client = login(researcher)
    body = client.get("/annotate/questions/", {"subject": "math"}).content.decode()
    assert all(q.hash_id in body for q in math) and "physics" not in body.split("<tbody")[1]
    page = client.get("/annotate/questions/", {"subject": "math", "after": math[0].pk}).content.decode()
    assert math[0].hash_id not in page.split("<tbody")[1] and math[1].hash_id in page
    flagged = client.get("/annotate/questions/", {"flag": "figure_missing"}).content.decode()
    assert math[0].hash_id in flagged


def test_it_shows_a_questions_history_to_researchers(researcher, annotator, login):
    question = make_question()
    services.edit_question(question=question, user=annotator, expected_version=1, changes={"answers": ["A"]})
    body = login(researcher).get(f"/annotate/questions/{question.hash_id}/").content.decode()
    assert "alice" in body and "<td>答案</td>" in body  # the field by its name


def test_it_keeps_annotators_out_of_the_question_browser(annotator, login):
    question = make_question()
    client = login(annotator)
    assert client.get("/annotate/questions/").status_code == 403
    assert client.get(f"/annotate/questions/{question.hash_id}/").status_code == 403


def test_it_serves_figures_only_to_people_who_may_see_the_question(client, held, other_annotator, login):
    url = held.question.figures.get().image.url
    assert client.get(url).status_code == 302  # to the login page
    assert login(other_annotator).get(url).status_code == 404  # holds no task on it
    assert login(held.annotator).get(url).status_code == 200


def test_it_shows_team_progress_to_inspectors_and_admins(held, inspector, administrator, annotator, login):
    for person in (inspector, administrator):
        body = login(person).get("/annotate/team/").content.decode()
        assert "alice" in body and held.question.hash_id in body
    assert login(annotator).get("/annotate/team/").status_code == 403


def test_it_lets_only_admins_reassign(held, administrator, inspector, other_annotator, login):
    assert (
        login(inspector)
        .post(f"/annotate/assignments/{held.pk}/reassign/", {"annotator": other_annotator.pk})
        .status_code
        == 403
    )
    login(administrator).post(f"/annotate/assignments/{held.pk}/reassign/", {"annotator": other_annotator.pk})
    held.refresh_from_db()
    assert held.annotator == other_annotator


def test_it_refuses_to_reassign_to_someone_who_is_not_an_annotator(held, administrator, researcher, login):
    response = login(administrator).post(f"/annotate/assignments/{held.pk}/reassign/", {"annotator": researcher.pk})
    assert response.status_code == 404
