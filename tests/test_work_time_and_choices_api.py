"""Issue 25: the active time of OCR review and step correction through the work API and on a reject (page and
API), and the PEBench label queue's choices through the API, as the page takes them."""

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation import queues
from annotation.models import Assignment, Question
from k12vista import guidelines
from pem import labelling
from tests.pem_factories import make_cot
from tests.review_factories import bulk_questions

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("english")]


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_work_api_reports_and_counts_active_time_on_save_and_reject(annotator, administrator):
    guidelines.publish(kind="ocr_review", text="Check every formula.", by=administrator)
    bulk_questions(1, subjects=["math", "physics"], status=Question.Status.IMPORTED)
    api = api_as(annotator)
    work = api.post("/api/work/claim/", {"task": "ocr_review"}, format="json").json()
    assert (work["active_seconds"], work["guideline_version"]) == (None, "")
    saved = api.post(f"/api/work/{work['id']}/save/", {"version": work["question"]["version"], "active_seconds": 20},
                     format="json").json()  # fmt: skip
    assert saved["active_seconds"] == 20
    assert api.post(f"/api/work/{work['id']}/reject/", {"reason": "x", "active_seconds": -1},
                    format="json").status_code == 400  # fmt: skip
    rejected = api.post(f"/api/work/{work['id']}/reject/", {"reason": "题目不完整", "active_seconds": 15},
                        format="json")  # fmt: skip
    assert rejected.status_code == 200, rejected.content
    assert (rejected.json()["active_seconds"], rejected.json()["guideline_version"]) == (35, "ocr_review.v1")
    held = Assignment.objects.get(pk=work["id"])
    assert (held.active_seconds, held.guideline_version) == (35, "ocr_review.v1")
    second = api.post("/api/work/claim/", {"task": "ocr_review"}, format="json").json()
    body = {"version": second["question"]["version"], "active_seconds": 8}
    accepted = api.post(f"/api/work/{second['id']}/accept/", body, format="json").json()
    assert (accepted["active_seconds"], accepted["guideline_version"]) == (8, "ocr_review.v1")


@pytest.mark.parametrize(
    ("task", "page"), [("ocr_review", "annotation:review"), ("step_correction", "annotation:steps")]
)
def test_a_reject_from_the_page_sends_and_counts_the_active_time(annotator, login, task, page):
    status = Question.Status.IMPORTED if task == "ocr_review" else Question.Status.OCR_REVIEWED
    bulk_questions(1, subjects=["math"], status=status)
    held = queues.next_assignment(annotator=annotator, task=task)
    client = login(annotator)
    html = client.get(reverse(page, args=[held.pk])).content.decode()
    action = reverse("annotation:reject", args=[held.pk])
    reject_form = re.search(rf'<form [^>]*action="{action}"[^>]*>', html)
    assert reject_form and "data-active-time" in reject_form.group(0)  # active_time.js adds the seconds to it
    client.post(reverse("annotation:reject", args=[held.pk]), {"reason": "", "active_seconds": "5"})  # refused
    client.post(reverse("annotation:reject", args=[held.pk]), {"reason": "图不清楚", "active_seconds": "12.4"})
    held.refresh_from_db()
    assert held.done_at is not None and held.active_seconds == 17


def test_the_next_label_task_through_the_api_follows_the_queue_choices(annotator):
    math = make_cot(subject="math")
    physics = make_cot(subject="physics", stage="high", qtype="free_response")
    for cot in (math, physics):
        labelling.open_labelling(cot)
    api = api_as(annotator)
    url = reverse("pem_api:task_next")
    assert api.post(url, {"subject": "nonsense"}, format="json").status_code == 400
    assert api.post(url, {"subject": "physics", "teacher": "x"}, format="json").status_code == 400
    assert api.post(url, {"subject": "physics", "stage": "primary"}, format="json").status_code == 204
    taken = api.post(url, {"subject": "physics", "stage": "high", "qtype": "free_response"}, format="json")
    assert taken.status_code == 200, taken.content
    assert (taken.json()["item"]["id"], taken.json()["outside_choices"]) == (physics.pk, False)
    # Held work comes first whatever the choices, and says so, as the page does.
    again = api.post(url, {"subject": "math"}, format="json").json()
    assert (again["id"], again["outside_choices"]) == (taken.json()["id"], True)
    assert api.post(url).json()["outside_choices"] is False  # no choices: nothing is outside them
