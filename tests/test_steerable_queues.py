"""Queues people steer: the PEBench labelling and adjudication queues narrow to a subject, stage or
type as soon as it is chosen, and submitting opens the next item within those choices."""

import pytest
from django.urls import reverse

from k12vista.roles import Role
from pem import labelling
from pem.models import ChainOfThought, LabellingTask
from review.models import Rating
from tests.conftest import make_person
from tests.pem_factories import make_cot
from tests.review_factories import audit_of, bulk_questions, three_inspectors

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("english")]

CORRECT = {"label-1": "CS", "label-2": "CS", "label-3": "CS"}


def opened(**fields) -> ChainOfThought:
    cot = make_cot(**fields)
    labelling.open_labelling(cot)
    return cot


def test_the_label_queue_counts_and_hands_out_only_what_was_chosen(annotator, login):
    maths = [opened(subject="math") for _ in range(3)]
    physics = opened(subject="physics")
    client = login(annotator)
    assert '<span id="label-waiting">4</span>' in client.get(reverse("pem:label_queue")).content.decode()
    page = client.get(reverse("pem:label_queue"), {"subject": "physics"}).content.decode()
    assert '<span id="label-waiting">1</span>' in page
    assert '<input type="hidden" name="subject" value="physics">' in page  # the next-item form follows the choice
    opened_task = client.post(reverse("pem:label_next"), {"subject": "physics", "stage": "", "qtype": ""})
    task = LabellingTask.objects.get(annotator=annotator)
    assert task.cot == physics and opened_task.url == reverse("pem:label_task", args=[task.pk])
    # Submit and next: nothing else in physics waits, so the queue opens and says so; math items stay untouched.
    form = {"version": task.version, "action": "submit", **CORRECT}
    done = client.post(reverse("pem:label_task", args=[task.pk]), form)
    assert done.url == reverse("pem:label_queue")
    assert not LabellingTask.objects.filter(cot__in=maths).exists()
    # The choice is kept: the queue shows it again, and a new choice (math) hands out math items in turn.
    assert '<option value="physics" selected>' in client.get(reverse("pem:label_queue")).content.decode()
    client.post(reverse("pem:label_next"), {"subject": "math"})
    first = LabellingTask.objects.get(annotator=annotator, submitted__isnull=True)
    following = client.post(reverse("pem:label_task", args=[first.pk]), {"version": first.version, "action": "submit",
                                                                          **CORRECT})  # fmt: skip
    second = LabellingTask.objects.get(annotator=annotator, submitted__isnull=True)
    assert following.url == reverse("pem:label_task", args=[second.pk]) and second.cot.subject == "math"


def test_a_held_item_outside_the_choices_opens_first_and_says_why(annotator, login):
    held = opened(subject="math")
    opened(subject="physics")
    labelling.next_task(annotator)
    client = login(annotator)
    page = client.post(reverse("pem:label_next"), {"subject": "physics"}, follow=True).content.decode()
    assert f"You still hold {held.key}, which is outside your choices" in page


def test_hostile_choices_are_ignored(annotator, login):
    opened(subject="math")
    client = login(annotator)
    page = client.get(reverse("pem:label_queue"), {"subject": "<script>", "stage": ["a", "b"]})
    assert page.status_code == 200 and '<span id="label-waiting">1</span>' in page.content.decode()
    assert client.post(reverse("pem:label_next"), {"subject": "\x00"}).status_code == 302
    assert labelling.item_filter({"subject": ["math"], "qtype": 3, "other": "x"}).children == []


def disputed(subject: str) -> ChainOfThought:
    cot = opened(subject=subject)
    for n, label in enumerate(("CS", "CE")):
        person = make_person(f"labeller-{cot.pk}-{n}", Role.ANNOTATOR)
        task = labelling.next_task(person)
        draft = {"1": {"label": "CS"}, "2": {"label": label, "reason": "why"}, "3": {"label": "CS"}}
        labelling.submit(labelling.save_draft(task=task, draft=draft, expected_version=0))
    assert ChainOfThought.objects.get(pk=cot.pk).status == ChainOfThought.Status.ADJUDICATION
    return cot


def test_the_adjudication_queue_narrows_and_deciding_opens_the_next_within_it(inspector, login):
    first_math, physics, second_math = disputed("math"), disputed("physics"), disputed("math")
    client = login(inspector)
    page = client.get(reverse("pem:adjudication_queue"), {"subject": "math"}).content.decode()
    assert f'data-item="{first_math.pk}"' in page and f'data-item="{second_math.pk}"' in page
    assert f'data-item="{physics.pk}"' not in page
    assert f'href="{reverse("pem:adjudicate", args=[first_math.pk])}?subject=math"' in page
    gold = {"gold-1": "CS", "gold-2": "CE", "reason-2": "3+4 is 7", "gold-3": "CS"}
    decided = client.post(reverse("pem:adjudicate", args=[first_math.pk]) + "?subject=math", gold)
    assert decided.url == reverse("pem:adjudicate", args=[second_math.pk]) + "?subject=math"
    last = client.post(reverse("pem:adjudicate", args=[second_math.pk]) + "?subject=math", gold)
    assert last.url == reverse("pem:adjudication_queue") + "?subject=math"
    assert ChainOfThought.objects.get(pk=physics.pk).status == ChainOfThought.Status.ADJUDICATION


def test_an_inspector_narrows_the_audit_queue_to_one_lot_and_rating_opens_the_next_in_it(inspector, login):
    bulk_questions(2, subjects=["math", "physics"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=2)
    mine = Rating.objects.filter(item__audit=audit, inspector=inspector).select_related("item")
    physics = sorted((r for r in mine if r.item.stratum == "physics"), key=lambda r: (r.item.position, r.item_id))
    assert len(physics) == 2 and mine.count() == 4
    client = login(inspector)
    page = client.get(reverse("review:audit", args=[audit.pk]), {"lot": "physics"}).content.decode()
    assert f'href="{reverse("review:rate", args=[physics[0].item_id])}?lot=physics"' in page
    assert '<option value="physics" selected>' in page
    url = reverse("review:rate", args=[physics[0].item_id]) + "?lot=physics"
    saved = client.post(url, {"question": "pass", "answer": "pass", "solution": "pass"})
    assert saved.url == reverse("review:rate", args=[physics[1].item_id]) + "?lot=physics"
    url = reverse("review:rate", args=[physics[1].item_id]) + "?lot=physics"
    last = client.post(url, {"question": "pass", "answer": "pass", "solution": "pass"})
    assert last.url == reverse("review:audit", args=[audit.pk]) + "?lot=physics"  # the math lot is left alone
    assert mine.filter(submitted__isnull=True).count() == 2
    # A lot that is not the audit's is no filter at all.
    assert client.get(reverse("review:audit", args=[audit.pk]), {"lot": "<x>"}).status_code == 200
