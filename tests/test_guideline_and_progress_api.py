"""Issue 25: the guidelines and the team's progress through the API, as /manage/guidelines/ and the team page
show them (the same functions: guidelines.publish, work.progress_by_person, work.overall_progress)."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import queues
from annotation.models import Assignment
from k12vista import guidelines
from k12vista.models import Guideline
from pem import labelling
from tests.annotation_factories import make_question
from tests.pem_factories import add_to_pebench, make_cot

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("english")]

ALL_CORRECT = {"1": {"label": "CS"}, "2": {"label": "CS"}, "3": {"label": "CS"}}


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_anyone_signed_in_reads_the_current_guideline_of_each_kind(no_role_user, annotator, administrator, settings):
    settings.PEM_GUIDELINE_VERSION = "guideline.v7"
    guidelines.publish(kind="audit", text="Rate each dimension on its own.", by=administrator)
    guidelines.publish(kind="audit", text="Rate each dimension on its own. A typo fails.", by=administrator)
    assert APIClient().get(reverse("api:api_guidelines")).status_code in (401, 403)
    for person in (no_role_user, annotator):
        listed = {g["kind"]: g for g in api_as(person).get(reverse("api:api_guidelines")).json()}
        assert set(listed) == set(Guideline.Kind.values)
        assert listed["audit"] == {
            "kind": "audit", "kind_label": "Audit criteria", "version": 2, "version_name": "audit.v2",
            "text": "Rate each dimension on its own. A typo fails.", "updated_by": administrator.username,
            "created": listed["audit"]["created"],
        }  # fmt: skip
        # Before any is written: no text, and step labels keep the configured version, as labels record it.
        assert (listed["step_labels"]["version"], listed["step_labels"]["version_name"]) == (None, "guideline.v7")
        assert listed["ocr_review"]["text"] == "" and listed["ocr_review"]["version_name"] == ""
    one = api_as(annotator).get(reverse("api:api_guideline", args=["audit"]))
    assert one.status_code == 200 and one.json()["version"] == 2
    assert api_as(annotator).get(reverse("api:api_guideline", args=["nonsense"])).status_code == 404


def test_an_administrator_publishes_a_new_version_as_the_page_does(annotator, inspector, administrator):
    url = reverse("api:api_guideline", args=["step_labels"])
    for person in (annotator, inspector):
        assert api_as(person).post(url, {"text": "mine"}, format="json").status_code == 403
    api = api_as(administrator)
    made = api.post(url, {"text": "Label each step on its own.\r\n"}, format="json")
    assert made.status_code == 201
    assert (made.json()["version"], made.json()["version_name"]) == (1, "guideline.v1")
    again = api.post(url, {"text": "Label each step on its own."}, format="json")
    assert again.status_code == 200 and again.json()["version"] == 1  # the same text makes no version
    assert api.post(url, {"text": "A slip is CE."}, format="json").status_code == 201
    assert guidelines.current_version_name("step_labels") == "guideline.v2"
    assert list(Guideline.objects.of_kind("step_labels").values_list("text", "updated_by")) == [
        ("A slip is CE.", administrator.pk), ("Label each step on its own.", administrator.pk),
    ]  # fmt: skip
    for body in ({"text": ""}, {"text": "   "}, {"text": "x" * 20001}, {"text": "a\x00b"}, {},
                 {"text": "ok", "kind": "audit"}):  # fmt: skip
        assert api.post(url, body, format="json").status_code == 400, body
    assert api.post(reverse("api:api_guideline", args=["nonsense"]), {"text": "x"}, format="json").status_code == 404
    assert Guideline.objects.count() == 2


def test_inspectors_and_administrators_read_the_teams_progress(annotator, other_annotator, inspector,
                                                                administrator, researcher):  # fmt: skip
    for seconds in (10, 30, 200):
        make_question()
        held = queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
        held.count_active_time(seconds)
        held.complete()
    make_question()
    queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)  # held, not done
    labelled, waiting = make_cot(), make_cot()
    add_to_pebench(labelled, waiting)
    labelling.open_labelling(labelled)
    task = labelling.next_task(other_annotator)
    labelling.submit(labelling.save_draft(task=task, draft=ALL_CORRECT, expected_version=0, active_seconds=95))
    url = reverse("api:api_team_progress")
    for person in (annotator, researcher):
        assert api_as(person).get(url).status_code == 403
    for person in (inspector, administrator):
        body = api_as(person).get(url).json()
        rows = {(row["person"], row["kind"]): row for row in body["people"]}
        assert rows[("alice", "ocr_review")] == {
            "person": "alice", "kind": "ocr_review", "kind_label": "OCR review", "held": 1, "done": 3,
            "done_today": 3, "done_week": 3, "median_seconds": 30,
        }  # fmt: skip
        assert rows[("amy", "pebench_labels")]["done_today"] == 1
        assert rows[("amy", "pebench_labels")]["median_seconds"] == 95
        overall = {o["code"]: o for o in body["overall"]}
        assert overall["pebench"]["label"] == "PEBench items by stage"
        stages = {c["stage"]: c["items"] for c in overall["pebench"]["counts"]}
        assert stages["New"] == 1 and sum(stages.values()) == 2
