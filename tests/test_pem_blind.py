"""The blind rule, through the pages and the API: before submitting, an annotator sees
no model label, no imported label, no other person's label and no gold label of the item."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from k12vista.roles import Role
from pem import labelling
from pem.models import LabellingTask, StepLabel
from tests.conftest import make_person
from tests.pem_factories import label_steps, make_cot

pytestmark = pytest.mark.django_db

# Distinctive explanations and rater names: if any reaches the annotator, the rule is broken.
SECRETS = {
    "model": "MODEL-SECRET-qz41",
    "imported": "IMPORTED-SECRET-kp07",
    "amy": "AMY-SECRET-vb88",
    "gold": "GOLD-SECRET-tt19",
    "judge": "judge-model-xr5",
}
AMY_LABELS = {"1": {"label": "CS"}, "2": {"label": "LRE", "reason": SECRETS["amy"]}, "3": {"label": "CS"}}


@pytest.fixture
def item(annotator, other_annotator):
    """An item alice holds unsubmitted, amy has submitted on, with model, imported and gold labels."""
    cot = make_cot()
    labelling.open_labelling(cot)
    label_steps(cot, ["CS", "KAE", "CS"], source=StepLabel.Source.MODEL, rater=SECRETS["judge"],
                explanation=SECRETS["model"])  # fmt: skip
    label_steps(cot, ["CS", "HE", "CS"], source=StepLabel.Source.IMPORTED, rater="pebench-release",
                explanation=SECRETS["imported"])  # fmt: skip
    label_steps(cot, ["CS", "QM", "CS"], source=StepLabel.Source.GOLD, rater="someone",
                explanation=SECRETS["gold"])  # fmt: skip
    alice_task = labelling.next_task(annotator)
    amy_task = labelling.next_task(other_annotator)
    assert alice_task.cot == amy_task.cot == cot
    amy_task = labelling.save_draft(task=amy_task, draft=AMY_LABELS, expected_version=0)
    labelling.submit(amy_task)
    return cot, alice_task


def api_as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def leaks(text: str) -> list[str]:
    return [name for name, secret in SECRETS.items() if secret in text]


def test_the_labelling_page_shows_no_one_elses_labels_before_submitting(item, login, annotator):
    cot, task = item
    client = login(annotator)
    page = client.get(reverse("pem:label_task", args=[task.pk])).content.decode()
    assert cot.steps.get(position=2).text in page  # the page is the item's
    assert leaks(page) == []
    assert "data-others=" not in page and 'class="label-pill' not in page
    assert leaks(client.get(reverse("pem:label_queue")).content.decode()) == []


def test_the_api_shows_no_one_elses_labels_before_submitting(item, annotator):
    cot, task = item
    client = api_as(annotator)
    for url in (reverse("pem_api:task", args=[task.pk]), reverse("pem_api:tasks")):
        response = client.get(url)
        assert response.status_code == 200 and leaks(response.content.decode()) == []
    labels = client.get(reverse("pem_api:item_labels", args=[cot.pk]))
    assert labels.status_code == 200 and labels.json() == []
    # Their own draft comes back; their own labels, once written, would too.
    labelling.save_draft(task=task, draft={"2": {"label": "CE", "reason": "alice's own"}}, expected_version=0)
    detail = client.get(reverse("pem_api:task", args=[task.pk])).json()
    assert detail["draft"] == {"2": {"label": "CE", "reason": "alice's own"}}


def test_an_annotator_off_the_item_sees_nothing_of_it(item):
    cot, _task = item
    stranger = make_person("sam", Role.ANNOTATOR)
    assert api_as(stranger).get(reverse("pem_api:item_labels", args=[cot.pk])).status_code == 404
    assert list(labelling.visible_labels(cot, stranger)) == []


def test_annotators_cannot_reach_the_adjudication_screens(item, login, annotator):
    cot, _task = item
    client = login(annotator)
    assert client.get(reverse("pem:adjudicate", args=[cot.pk])).status_code == 403
    assert client.get(reverse("pem:adjudication_queue")).status_code == 403


def test_after_submitting_the_annotator_sees_the_others(item, login, annotator):
    cot, task = item
    full = {"1": {"label": "CS"}, "2": {"label": "CE", "reason": "alice's reason"}, "3": {"label": "CS"}}
    labelling.submit(labelling.save_draft(task=task, draft=full, expected_version=0))
    page = login(annotator).get(reverse("pem:label_task", args=[task.pk])).content.decode()
    assert set(leaks(page)) >= {"model", "imported", "amy", "judge"}
    labels = api_as(annotator).get(reverse("pem_api:item_labels", args=[cot.pk])).json()
    assert {(lab["source"], lab["rater"]) for lab in labels} >= {
        ("person", "alice"), ("person", "amy"), ("model", SECRETS["judge"]), ("imported", "pebench-release")
    }  # fmt: skip


def test_work_sent_back_for_rework_is_blind_again(item, inspector, login, annotator, other_annotator):
    cot, task = item
    alice = {"1": {"label": "CS"}, "2": {"label": "CE", "reason": "ALICE-SECRET-mm3"}, "3": {"label": "CS"}}
    labelling.submit(labelling.save_draft(task=task, draft=alice, expected_version=0))
    labelling.return_for_rework(cot=cot, annotator=other_annotator, note="look again at step 2", by=inspector)
    amy_task = labelling.next_task(other_annotator)
    page = login(other_annotator).get(reverse("pem:label_task", args=[amy_task.pk])).content.decode()
    assert "look again at step 2" in page
    assert leaks(page.replace(SECRETS["amy"], "")) == []  # her own reason stays in her draft
    assert "ALICE-SECRET-mm3" not in page
    labels = api_as(other_annotator).get(reverse("pem_api:item_labels", args=[cot.pk])).json()
    assert {(lab["source"], lab["rater"]) for lab in labels} == {("person", "amy")}


def test_inspectors_and_researchers_see_every_label(item, inspector, researcher):
    cot, _task = item
    for user in (inspector, researcher):
        labels = api_as(user).get(reverse("pem_api:item_labels", args=[cot.pk])).json()
        assert {lab["source"] for lab in labels} == {"model", "imported", "gold", "person"}


def test_an_inspector_labelling_an_item_is_blind_on_it(item):
    cot, _task = item
    both = make_person("iris", Role.ANNOTATOR, Role.INSPECTOR)
    # K=2 is full on this item; give her a slot as a third annotator would get one.
    LabellingTask.objects.create(cot=cot, annotator=both)
    labels = api_as(both).get(reverse("pem_api:item_labels", args=[cot.pk]))
    assert labels.status_code == 200 and labels.json() == []
