"""People labelling steps: handing items out, drafts, submission, consensus, rework, and expert scores."""

import html
import re
import threading

import pytest
from django.db import connection
from django.urls import reverse

from inference.models import Response
from k12vista.roles import Role
from pem import labelling
from pem.models import Adjudication, ChainOfThought, ExpertScore, LabellingTask, StepLabel
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.pem_factories import answer, make_cot, make_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("english")]


ALL_CORRECT = {"1": {"label": "CS"}, "2": {"label": "CS"}, "3": {"label": "CS"}}


def opened_cot(**fields) -> ChainOfThought:
    cot = make_cot(**fields)
    labelling.open_labelling(cot)
    return cot


def label_and_submit(task: LabellingTask, draft: dict) -> LabellingTask:
    task = labelling.save_draft(task=task, draft=draft, expected_version=task.version)
    return labelling.submit(task)


# --- handing out work -------------------------------------------------------------------


def test_it_opens_only_new_items_and_refuses_items_without_steps():
    cot = make_cot()
    assert labelling.open_labelling(cot) is True
    assert cot.status == ChainOfThought.Status.LABELLING
    assert labelling.open_labelling(cot) is False  # idempotent
    empty = make_cot(steps=[])
    with pytest.raises(labelling.LabellingError, match="no steps"):
        labelling.open_labelling(empty)
    assert ChainOfThought.objects.get(pk=empty.pk).status == ChainOfThought.Status.NEW


def test_it_gives_each_item_to_k_distinct_annotators(annotator, other_annotator, settings):
    settings.PEM_ANNOTATORS_PER_ITEM = 2
    first, second = opened_cot(), opened_cot()
    third_person = make_person("ann", Role.ANNOTATOR)
    tasks = [labelling.next_task(user) for user in (annotator, other_annotator, third_person)]
    # Two people on the first item (started items are finished first), the third starts the next.
    assert [t.cot_id for t in tasks] == [first.pk, first.pk, second.pk]
    assert labelling.next_task(annotator) == tasks[0]  # the task already held comes back


def test_it_does_not_hand_out_items_outside_the_pool_or_an_item_twice(annotator):
    make_cot()  # new, not opened
    opened_cot()
    task = labelling.next_task(annotator)
    label_and_submit(task, ALL_CORRECT)
    assert labelling.next_task(annotator) is None


def test_it_gives_back_work_sent_for_rework_first(annotator, other_annotator, inspector):
    done, waiting = opened_cot(), opened_cot()
    for user in (annotator, other_annotator):
        label_and_submit(labelling.next_task(user), ALL_CORRECT)
    newer = labelling.next_task(annotator)
    assert newer.cot == waiting
    labelling.return_for_rework(cot=done, annotator=annotator, note="step 2 is wrong", by=inspector)
    assert labelling.next_task(annotator).cot == done


@pytest.mark.django_db(transaction=True)
def test_ten_annotators_pulling_at_once_never_share_a_slot(settings):
    settings.PEM_ANNOTATORS_PER_ITEM = 2
    cots = [opened_cot() for _ in range(3)]
    people = [make_person(f"a{k}", Role.ANNOTATOR) for k in range(10)]
    start = threading.Barrier(len(people))
    results, errors = {}, []

    def pull(user):
        try:
            start.wait()
            results[user.username] = labelling.next_task(user)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=pull, args=(user,)) for user in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    given = [task for task in results.values() if task is not None]
    assert len(given) == 6  # three items, two people each; four people get nothing
    for cot in cots:
        holders = list(LabellingTask.objects.filter(cot=cot).values_list("annotator", flat=True))
        assert len(holders) == 2 and len(set(holders)) == 2


# --- drafts and submission ----------------------------------------------------------------


def test_it_refuses_a_draft_saved_on_a_stale_version(annotator):
    opened_cot()
    task = labelling.next_task(annotator)
    labelling.save_draft(task=task, draft={"1": {"label": "CE", "reason": "7×8 is not 54"}}, expected_version=0)
    with pytest.raises(labelling.DraftConflict, match="version 1"):
        labelling.save_draft(task=task, draft={"1": {"label": "CS"}}, expected_version=0)
    task.refresh_from_db()
    assert task.version == 1 and task.draft == {"1": {"label": "CE", "reason": "7×8 is not 54"}}


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        ({"9": {"label": "CS"}}, "no step 9"),
        ({"x": {"label": "CS"}}, "not a step number"),
        ({"1": {"label": "XX"}}, "not one of the nine"),
        ({"1": "CS"}, "a label and a reason"),
        ({"1": {"label": "CE", "reason": "x" * 2001}}, "longer than 2000"),
        ([], "object keyed by step"),
    ],
)
def test_it_refuses_a_malformed_draft(annotator, draft, message):
    opened_cot()
    task = labelling.next_task(annotator)
    with pytest.raises(labelling.LabellingError, match=message):
        labelling.save_draft(task=task, draft=draft, expected_version=0)
    task.refresh_from_db()
    assert task.version == 0 and task.draft == {}


def test_it_refuses_to_submit_a_step_without_label_or_an_error_without_reason(annotator):
    opened_cot()
    task = labelling.next_task(annotator)
    task = labelling.save_draft(
        task=task, draft={"1": {"label": "CS"}, "2": {"label": "ICE", "reason": "  "}}, expected_version=0
    )
    with pytest.raises(labelling.IncompleteLabels) as refused:
        labelling.submit(task)
    assert set(refused.value.problems) == {2, 3}
    task.refresh_from_db()
    assert task.submitted is None
    assert not StepLabel.objects.exists()


def test_submitting_writes_the_annotators_labels(annotator, settings):
    settings.PEM_GUIDELINE_VERSION = "guideline.v7"
    cot = opened_cot()
    task = labelling.next_task(annotator)
    label_and_submit(task, {"1": {"label": "CS"}, "2": {"label": "CE", "reason": " 3+4 is 7 "}, "3": {"label": "CS"}})
    labels = list(StepLabel.objects.filter(step__cot=cot).order_by("step__position"))
    assert [(lab.source, lab.rater, lab.user, lab.label) for lab in labels] == [
        ("person", "alice", annotator, "CS"),
        ("person", "alice", annotator, "CE"),
        ("person", "alice", annotator, "CS"),
    ]
    assert labels[1].explanation == "3+4 is 7"
    assert {lab.guideline_version for lab in labels} == {"guideline.v7"}
    task.refresh_from_db()
    assert task.submitted is not None
    with pytest.raises(labelling.LabellingError, match="already submitted"):
        labelling.submit(task)
    with pytest.raises(labelling.LabellingError, match="already submitted"):
        labelling.save_draft(task=task, draft=ALL_CORRECT, expected_version=task.version)
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.LABELLING  # one of two annotators


def test_agreeing_annotators_set_the_gold_labels(annotator, other_annotator):
    cot = opened_cot()
    draft = {"1": {"label": "CS"}, "2": {"label": "ICE", "reason": "misread the axis"}, "3": {"label": "CS"}}
    label_and_submit(labelling.next_task(annotator), draft)
    label_and_submit(labelling.next_task(other_annotator), {**draft, "2": {"label": "ICE", "reason": "axis"}})
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.GOLD
    gold = list(StepLabel.objects.gold().filter(step__cot=cot).order_by("step__position"))
    assert [(g.rater, g.label) for g in gold] == [("consensus", "CS"), ("consensus", "ICE"), ("consensus", "CS")]
    assert gold[1].explanation == "misread the axis"  # the first submitter's reason
    assert not Adjudication.objects.exists()


def test_a_disagreement_goes_to_adjudication(annotator, other_annotator):
    cot = opened_cot()
    label_and_submit(labelling.next_task(annotator), ALL_CORRECT)
    label_and_submit(labelling.next_task(other_annotator), {**ALL_CORRECT, "3": {"label": "IAE", "reason": "no B"}})
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.ADJUDICATION
    assert Adjudication.objects.get(cot=cot).decided is None
    assert not StepLabel.objects.gold().exists()
    assert list(labelling.adjudication_queue()) == [cot]


def test_it_waits_for_all_k_annotators(annotator, other_annotator, settings):
    settings.PEM_ANNOTATORS_PER_ITEM = 3
    cot = opened_cot()
    label_and_submit(labelling.next_task(annotator), ALL_CORRECT)
    label_and_submit(labelling.next_task(other_annotator), ALL_CORRECT)
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.LABELLING
    label_and_submit(labelling.next_task(make_person("ann", Role.ANNOTATOR)), ALL_CORRECT)
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.GOLD


def test_rework_reopens_the_task_and_the_item_is_decided_again(annotator, other_annotator, inspector):
    cot = opened_cot()
    label_and_submit(labelling.next_task(annotator), ALL_CORRECT)
    label_and_submit(labelling.next_task(other_annotator), ALL_CORRECT)
    assert StepLabel.objects.gold().filter(step__cot=cot).count() == 3

    task = labelling.return_for_rework(cot=cot, annotator=other_annotator, note="step 3 misses the unit", by=inspector)
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.LABELLING
    assert task.submitted is None and task.rework_note == "step 3 misses the unit"
    assert {p: e["label"] for p, e in task.draft.items()} == {"1": "CS", "2": "CS", "3": "CS"}  # theirs, to correct
    assert not StepLabel.objects.gold().filter(step__cot=cot).exists()

    label_and_submit(task, {**ALL_CORRECT, "3": {"label": "IAE", "reason": "no unit"}})
    cot.refresh_from_db()
    task.refresh_from_db()
    assert cot.status == ChainOfThought.Status.ADJUDICATION and task.rework_note == ""
    assert StepLabel.objects.get(step__cot=cot, step__position=3, rater="amy").label == "IAE"


def test_rework_is_refused_for_work_not_submitted_or_not_done(annotator, other_annotator, inspector):
    cot = opened_cot()
    labelling.next_task(annotator)
    with pytest.raises(labelling.LabellingError, match="not submitted"):
        labelling.return_for_rework(cot=cot, annotator=annotator, note="redo", by=inspector)
    with pytest.raises(labelling.LabellingError, match="did not label"):
        labelling.return_for_rework(cot=cot, annotator=other_annotator, note="redo", by=inspector)
    with pytest.raises(labelling.LabellingError, match="what needs reworking"):
        labelling.return_for_rework(cot=cot, annotator=annotator, note=" ", by=inspector)


# --- the labelling screens -------------------------------------------------------------------


def test_the_queue_is_for_annotators_only(login, annotator, inspector):
    assert login(inspector).get(reverse("pem:label_queue")).status_code == 403
    opened_cot()
    response = login(annotator).get(reverse("pem:label_queue"))
    assert response.status_code == 200
    assert b'id="label-waiting">1<' in response.content


def test_next_takes_an_item_and_opens_the_screen(login, annotator):
    client = login(annotator)
    response = client.post(reverse("pem:label_next"))
    assert response.status_code == 302 and response.url == reverse("pem:label_queue")  # nothing waiting
    cot = opened_cot(question_text="已知 $x^2=4$")
    response = client.post(reverse("pem:label_next"))
    task = LabellingTask.objects.get(annotator=annotator)
    assert response.url == reverse("pem:label_task", args=[task.pk])
    page = client.get(response.url).content.decode()
    assert "已知 $x^2=4$" in page and cot.steps.get(position=2).text in page
    assert page.count('data-key="9"') == 3  # nine keys on each of the three steps
    assert "static/js/labelling.js" in page and 'id="label-definitions"' in page
    assert client.get(reverse("pem:label_next")).status_code == 405


def test_the_screen_shows_the_question_figures(login, annotator):
    question = make_question()
    opened_cot(question=question)
    task = labelling.next_task(annotator)
    page = login(annotator).get(reverse("pem:label_task", args=[task.pk])).content.decode()
    assert question.figures.first().image.url in page


def test_another_persons_task_is_not_found(login, annotator, other_annotator):
    opened_cot()
    task = labelling.next_task(annotator)
    assert login(other_annotator).get(reverse("pem:label_task", args=[task.pk])).status_code == 404


def form(task, draft, action="save", version=None):
    data = {"version": task.version if version is None else version, "action": action}
    for position, entry in draft.items():
        data[f"label-{position}"] = entry.get("label", "")
        data[f"reason-{position}"] = entry.get("reason", "")
    return data


def test_the_screen_saves_and_submits(login, annotator):
    cot = opened_cot()
    task = labelling.next_task(annotator)
    client = login(annotator)
    url = reverse("pem:label_task", args=[task.pk])
    response = client.post(url, form(task, {"1": {"label": "HE", "reason": "invented a point"}}))
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.version == 1 and task.draft == {"1": {"label": "HE", "reason": "invented a point"}}
    page = client.get(url).content.decode()
    assert 'value="HE" data-key="7" data-error="1" checked' in page and "invented a point" in page

    refused = client.post(url, form(task, {"1": {"label": "HE"}}, action="submit"))
    assert refused.status_code == 400
    assert b'data-problem="1"' in refused.content and b'data-problem="2"' in refused.content
    task.refresh_from_db()
    assert task.submitted is None

    full = {"1": {"label": "HE", "reason": "invented a point"}, "2": {"label": "CS"}, "3": {"label": "CS"}}
    response = client.post(url, form(task, full, action="submit"))
    assert response.status_code == 302 and response.url == reverse("pem:label_queue")
    assert StepLabel.objects.by_people().filter(step__cot=cot).count() == 3


def test_the_screen_refuses_a_stale_save_and_keeps_the_posted_labels(login, annotator):
    opened_cot()
    task = labelling.next_task(annotator)
    labelling.save_draft(task=task, draft={"1": {"label": "CS"}}, expected_version=0)  # another tab
    response = login(annotator).post(
        reverse("pem:label_task", args=[task.pk]), form(task, {"1": {"label": "QM", "reason": "mine"}}, version=0)
    )
    assert response.status_code == 409
    page = response.content.decode()
    assert 'id="refusal"' in page and 'name="version" value="1"' in page and "mine" in page
    task.refresh_from_db()
    assert task.draft == {"1": {"label": "CS", "reason": ""}}


def test_a_stale_save_from_the_tab_that_saved_last_is_no_conflict_but_one_from_another_tab_is(annotator):
    opened_cot()
    task = labelling.next_task(annotator)
    # Tab "a" saved v1 just before reloading; the reloaded page was drawn at v0 and saves on from there.
    labelling.save_draft(task=task, draft={"1": {"label": "CS"}}, expected_version=0, writer="a")
    task = labelling.save_draft(task=task, draft={"1": {"label": "QM", "reason": "x"}}, expected_version=0, writer="a")
    assert task.version == 2 and task.draft["1"]["label"] == "QM"
    with pytest.raises(labelling.DraftConflict):  # tab "b" never saw v1 or v2
        labelling.save_draft(task=task, draft={"1": {"label": "CS"}}, expected_version=1, writer="b")
    with pytest.raises(labelling.DraftConflict):  # nor does a save that names no tab
        labelling.save_draft(task=task, draft={"1": {"label": "CS"}}, expected_version=1)
    task.refresh_from_db()
    assert task.draft == {"1": {"label": "QM", "reason": "x"}}


# --- the labelling API ------------------------------------------------------------------------


def test_the_api_hands_out_saves_and_submits(api, annotator):
    client = api(annotator)
    assert client.post(reverse("pem_api:task_next")).status_code == 204
    cot = opened_cot()
    task = client.post(reverse("pem_api:task_next")).json()
    assert task["item"]["id"] == cot.pk and [s["position"] for s in task["item"]["steps"]] == [1, 2, 3]
    assert set(task["item"]) >= {"question_text", "reference_answer", "reference_solution", "figures"}
    draft_url = reverse("pem_api:task_draft", args=[task["id"]])
    saved = client.put(draft_url, {"version": 0, "draft": {"1": {"label": "CE", "reason": "slip"}}}, format="json")
    assert saved.status_code == 200 and saved.json()["version"] == 1
    stale = client.put(draft_url, {"version": 0, "draft": {"1": {"label": "CS"}}}, format="json")
    assert stale.status_code == 409 and stale.json()["version"] == 1
    assert stale.json()["draft"] == {"1": {"label": "CE", "reason": "slip"}}  # the page shows what was saved
    bad = client.put(draft_url, {"version": 1, "draft": {"1": {"label": "ZZ"}}}, format="json")
    assert bad.status_code == 400 and "nine labels" in bad.json()["detail"]

    submit_url = reverse("pem_api:task_submit", args=[task["id"]])
    incomplete = client.post(submit_url, {}, format="json")
    assert incomplete.status_code == 400 and set(incomplete.json()["problems"]) == {"2", "3"}
    done = client.post(
        submit_url,
        {"version": 1, "draft": {"1": {"label": "CE", "reason": "slip"}, "2": {"label": "CS"}, "3": {"label": "CS"}}},
        format="json",
    )
    assert done.status_code == 200 and done.json()["submitted"]
    listed = client.get(reverse("pem_api:tasks")).json()
    assert [t["id"] for t in listed] == [task["id"]]


def test_the_api_keeps_tasks_private(api, annotator, other_annotator, inspector):
    opened_cot()
    task = labelling.next_task(annotator)
    assert api(other_annotator).get(reverse("pem_api:task", args=[task.pk])).status_code == 404
    put = api(other_annotator).put(
        reverse("pem_api:task_draft", args=[task.pk]), {"version": 0, "draft": {}}, format="json"
    )
    assert put.status_code == 404
    assert api(inspector).get(reverse("pem_api:tasks")).status_code == 403


# --- expert scores ------------------------------------------------------------------------------


def scored_run(n=5):
    run = make_run()
    responses = [answer(run, make_question(), f"答案 {k}") for k in range(n)]
    answer(run, make_question(), "", status=Response.Status.FAILED)
    return run, responses


def test_the_sample_is_the_same_for_every_expert_and_grows_by_extension():
    run, responses = scored_run(6)
    small, large = labelling.sample_responses(run, 3), labelling.sample_responses(run, 10)
    assert large.response_ids[:3] == small.response_ids
    assert sorted(large.response_ids) == sorted(r.pk for r in responses)  # answered only, all of them


def test_experts_score_sampled_responses(login, inspector, researcher):
    run, responses = scored_run(3)
    client = login(inspector)
    page = client.get(reverse("pem:expert_run", args=[run.pk]) + "?n=2")
    assert page.status_code == 200 and page.content.decode().count('class="card expert-row"') == 2
    target = responses[0]
    response = client.post(reverse("pem:expert_score", args=[target.pk]), {"score": "0.75", "note": "mostly", "n": 2})
    assert response.status_code == 302
    assert ExpertScore.objects.get(response=target, expert=inspector).score == 0.75
    # Saved again, replaced; an htmx save answers with the row.
    row = client.post(reverse("pem:expert_score", args=[target.pk]), {"score": "1"}, headers={"HX-Request": "true"})
    assert row.status_code == 200 and f'id="response-{target.pk}"'.encode() in row.content
    assert ExpertScore.objects.get(response=target, expert=inspector).score == 1.0
    refused = client.post(
        reverse("pem:expert_score", args=[target.pk]), {"score": "1.5"}, headers={"HX-Request": "true"}
    )
    assert refused.status_code == 400 and b'role="alert"' in refused.content
    assert ExpertScore.objects.get(response=target, expert=inspector).score == 1.0
    # A researcher scores the answers of their own runs (not other researchers': tests/test_run_access.py).
    run.created_by = researcher
    run.save(update_fields=["created_by"])
    login(researcher).post(reverse("pem:expert_score", args=[target.pk]), {"score": "0"})
    assert ExpertScore.objects.filter(response=target).count() == 2


@pytest.mark.parametrize("score", ["-0.1", "nan", "abc", ""])
def test_it_refuses_scores_outside_zero_to_one(score, inspector):
    _run, responses = scored_run(1)
    with pytest.raises(labelling.LabellingError, match="from 0 to 1"):
        labelling.record_expert_score(response=responses[0], expert=inspector, score=score)
    assert not ExpertScore.objects.exists()


def test_expert_screens_are_for_inspectors_and_researchers(login, annotator, researcher):
    run, responses = scored_run(1)
    client = login(annotator)
    assert client.get(reverse("pem:expert_runs")).status_code == 403
    assert client.post(reverse("pem:expert_score", args=[responses[0].pk]), {"score": "1"}).status_code == 403
    run.created_by = researcher  # researchers see their own runs here (tests/test_run_access.py)
    run.save(update_fields=["created_by"])
    page = login(researcher).get(reverse("pem:expert_runs"))
    assert page.status_code == 200 and f'data-run="{run.pk}"'.encode() in page.content


def test_the_queue_lists_open_tasks_in_keyset_pages_of_fifty(login, annotator, django_assert_max_num_queries):
    from datetime import timedelta

    from django.utils import timezone

    start = timezone.now()
    tasks = [
        LabellingTask.objects.create(cot=opened_cot(), annotator=annotator, created=start + timedelta(seconds=i // 2))
        for i in range(120)
    ]  # fmt: skip  (pairs share a timestamp: the id breaks the tie)
    client = login(annotator)
    seen, url, pages = [], reverse("pem:label_queue"), 0
    while url:
        body = client.get(url).content.decode()
        ids = [int(x) for x in re.findall(r'<tr data-task="(\d+)"', body.split('id="label-submitted"')[0])]
        pages += 1
        assert len(ids) == (50 if pages < 3 else 20)
        seen += ids
        more = re.search(r'id="label-open-more" href="([^"]+)"|href="(\?after=[^"]+)" id="label-open-more"', body)
        url = reverse("pem:label_queue") + html.unescape(more.group(2)) if more else None
    assert pages == 3 and seen == [t.pk for t in tasks]  # in (created, id) order, no overlap, none missed
    with django_assert_max_num_queries(12):
        client.get(reverse("pem:label_queue"), {"after": "not-a-cursor"})


def test_the_queue_counts_the_items_waiting_up_to_a_cap(login, annotator, other_annotator, settings, monkeypatch):
    from pem import views

    settings.PEM_ANNOTATORS_PER_ITEM = 2
    free, started, full, mine = opened_cot(), opened_cot(), opened_cot(), opened_cot()
    make_cot()  # not in the pool
    LabellingTask.objects.create(cot=started, annotator=other_annotator)
    for person in (other_annotator, make_person("ann", Role.ANNOTATOR)):
        LabellingTask.objects.create(cot=full, annotator=person)
    LabellingTask.objects.create(cot=mine, annotator=annotator, submitted=mine.created)
    assert labelling.count_waiting(annotator, cap=10) == 2  # free and started: fewer than K, not theirs
    assert labelling.count_waiting(annotator, cap=1) == 2  # cap + 1: "more than the cap"
    assert list(labelling.waiting_for(annotator).values_list("pk", flat=True)) == [started.pk, free.pk]
    client = login(annotator)
    assert b'id="label-waiting">2<' in client.get(reverse("pem:label_queue")).content
    monkeypatch.setattr(views, "WAITING_CAP", 1)
    assert b'id="label-waiting">1+<' in client.get(reverse("pem:label_queue")).content
    # Someone who also reads every label is counted only the items nobody labelled yet (the blind rule).
    reader = make_person("rita", Role.ANNOTATOR, Role.RESEARCHER)
    StepLabel.objects.create(step=started.steps.first(), source=StepLabel.Source.PERSON, rater="amy", label="CS")
    assert labelling.count_waiting(reader, cap=10) == 2  # started now has a label, full has K people
    assert list(labelling.waiting_for(reader).values_list("pk", flat=True)) == [mine.pk, free.pk]


def test_the_queue_shows_each_task_with_its_link_local_times_and_rework_note(login, annotator, settings):
    from datetime import UTC, datetime, timedelta

    settings.TIME_ZONE = "Asia/Shanghai"
    taken = datetime(2026, 3, 1, 23, 30, 10, tzinfo=UTC)
    held = LabellingTask.objects.create(cot=opened_cot(key="held-item"), annotator=annotator, created=taken,
                                        rework_note="Step 2 is <b>right</b>")  # fmt: skip
    older, newer = (
        LabellingTask.objects.create(
            cot=opened_cot(key=f"done-{n}"), annotator=annotator, created=taken, submitted=taken + timedelta(hours=n)
        )
        for n in (1, 2)
    )
    body = login(annotator).get(reverse("pem:label_queue")).content.decode()
    opened, submitted = body.split('id="label-submitted"')
    url = reverse("pem:label_task", args=[held.pk])
    link = f'<tr data-task="{held.pk}" data-rework><td><a href="{url}">held-item</a>'
    assert link in opened and "<td>2026-03-02 07:30</td>" in opened  # local time, to the minute
    assert "Step 2 is &lt;b&gt;right&lt;/b&gt;" in opened  # escaped
    assert re.findall(r'<tr data-task="(\d+)"', submitted) == [str(newer.pk), str(older.pk)]  # newest first
    assert "<td>2026-03-02 09:30</td>" in submitted and "<td>2026-03-02 08:30</td>" in submitted


def test_the_blind_rule_counts_what_it_keeps_from_a_person_who_also_reads_every_label():
    both = make_person("both", Role.ANNOTATOR, Role.INSPECTOR)
    plain = make_person("plain", Role.ANNOTATOR)
    fresh, started = opened_cot(), opened_cot()
    StepLabel.objects.create(step=started.steps.first(), source=StepLabel.Source.PERSON, rater="zhao", label="CS")
    assert labelling.count_waiting(both, 10) == 1 and labelling.count_kept_from(both, 10) == 1
    assert labelling.count_waiting(plain, 10) == 2 and labelling.count_kept_from(plain, 10) == 0
    assert fresh in labelling.waiting_for(both)
