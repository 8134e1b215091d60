"""Inspectors deciding the gold labels of items the annotators disagreed on."""

import pytest
from django.urls import reverse

from k12vista.roles import Role
from pem import labelling
from pem.models import Adjudication, ChainOfThought, StepLabel
from tests.conftest import make_person
from tests.pem_factories import label_steps, make_cot

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("english")]


ALICE = {"1": {"label": "CS"}, "2": {"label": "CE", "reason": "ALICE says 3+4=8"}, "3": {"label": "CS"}}
AMY = {"1": {"label": "CS"}, "2": {"label": "KAE", "reason": "AMY says wrong theorem"}, "3": {"label": "CS"}}


@pytest.fixture
def disputed(annotator, other_annotator):
    cot = make_cot()
    labelling.open_labelling(cot)
    label_steps(cot, ["CS", "LRE", "IAE"], source=StepLabel.Source.MODEL, rater="judge-a", explanation="JUDGE reason")
    for user, draft in ((annotator, ALICE), (other_annotator, AMY)):
        task = labelling.next_task(user)
        labelling.submit(labelling.save_draft(task=task, draft=draft, expected_version=0))
    cot.refresh_from_db()
    assert cot.status == ChainOfThought.Status.ADJUDICATION
    return cot


def gold_form(labels: dict, note: str = "") -> dict:
    data = {"note": note}
    for position, (label, reason) in labels.items():
        data[f"gold-{position}"] = label
        data[f"reason-{position}"] = reason
    return data


def test_the_queue_lists_items_awaiting_a_decision(disputed, login, inspector, annotator):
    make_cot()  # new: not in the queue
    page = login(inspector).get(reverse("pem:adjudication_queue"))
    assert page.status_code == 200
    assert page.content.decode().count("data-item=") == 1 and f'data-item="{disputed.pk}"' in page.content.decode()
    assert b'data-count="adjudication">1<' in page.content
    assert login(annotator).get(reverse("pem:adjudication_queue")).status_code == 403


def test_the_screen_shows_every_label_and_reason_side_by_side(disputed, login, inspector):
    page = login(inspector).get(reverse("pem:adjudicate", args=[disputed.pk])).content.decode()
    for text in ("ALICE says 3+4=8", "AMY says wrong theorem", "JUDGE reason", 'data-annotator="alice"',
                 'data-annotator="amy"', 'data-judge="judge-a"'):  # fmt: skip
        assert text in page
    # Only step 2 is disputed; the agreed steps come preselected.
    assert page.count("data-disagree") == 1 and 'id="step-2" data-position="2" class="disagree"' in page
    assert page.count('<option value="CS" selected>') == 2


def test_the_inspector_sets_the_gold_labels(disputed, login, inspector):
    response = login(inspector).post(
        reverse("pem:adjudicate", args=[disputed.pk]),
        gold_form({1: ("CS", ""), 2: ("KAE", "uses the wrong theorem"), 3: ("CS", "")}, note="theorem misuse"),
    )
    assert response.status_code == 302 and response.url == reverse("pem:adjudication_queue")
    disputed.refresh_from_db()
    assert disputed.status == ChainOfThought.Status.GOLD
    gold = list(StepLabel.objects.gold().filter(step__cot=disputed).order_by("step__position"))
    assert [(g.label, g.rater, g.user) for g in gold] == [
        ("CS", "ivan", inspector), ("KAE", "ivan", inspector), ("CS", "ivan", inspector)
    ]  # fmt: skip
    assert gold[1].explanation == "uses the wrong theorem"
    decision = Adjudication.objects.get(cot=disputed)
    assert decision.decided_by == inspector and decision.decided is not None and decision.note == "theorem misuse"
    assert list(labelling.adjudication_queue()) == []
    # The people's own labels are kept beside the gold ones, for the agreement statistics.
    assert StepLabel.objects.by_people().filter(step__cot=disputed).count() == 6


def test_deciding_opens_the_next_item_the_inspector_may_decide(disputed, login, annotator, other_annotator):
    # Another inspector who also labels: the item they labelled is not theirs to decide, so it is skipped.
    ines = make_person("ines", Role.INSPECTOR, Role.ANNOTATOR)
    theirs, following = make_cot(), make_cot()
    for cot, pair in ((theirs, (ines, annotator)), (following, (annotator, other_annotator))):
        labelling.open_labelling(cot)
        for user, draft in zip(pair, (ALICE, AMY), strict=True):
            task = labelling.next_task(user)
            assert task.cot_id == cot.pk
            labelling.submit(labelling.save_draft(task=task, draft=draft, expected_version=0))
    client = login(ines)
    decided = client.post(reverse("pem:adjudicate", args=[disputed.pk]),
                          gold_form({1: ("CS", ""), 2: ("CS", ""), 3: ("CS", "")}))  # fmt: skip
    assert decided.status_code == 302 and decided.url == reverse("pem:adjudicate", args=[following.pk])
    last = client.post(reverse("pem:adjudicate", args=[following.pk]),
                       gold_form({1: ("CS", ""), 2: ("CS", ""), 3: ("CS", "")}))  # fmt: skip
    assert last.url == reverse("pem:adjudication_queue")  # only their own item is left


def test_it_refuses_an_incomplete_decision_and_writes_nothing(disputed, login, inspector):
    response = login(inspector).post(
        reverse("pem:adjudicate", args=[disputed.pk]), gold_form({1: ("CS", ""), 2: ("KAE", " "), 3: ("", "")})
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert 'data-problem="2"' in page and 'data-problem="3"' in page and 'data-problem="1"' not in page
    assert '<option value="KAE" selected>' in page  # the inspector's choice is kept
    disputed.refresh_from_db()
    assert disputed.status == ChainOfThought.Status.ADJUDICATION
    assert not StepLabel.objects.gold().exists()
    assert Adjudication.objects.get(cot=disputed).decided is None


def test_it_refuses_items_not_waiting_and_deciders_who_labelled_them(disputed, inspector):
    gold = {1: {"label": "CS"}, 2: {"label": "CE", "reason": "slip"}, 3: {"label": "CS"}}
    labeller = make_person("ines", Role.ANNOTATOR, Role.INSPECTOR)
    disputed.labelling_tasks.filter(annotator__username="amy").update(annotator=labeller)
    with pytest.raises(labelling.LabellingError, match="labelled this item yourself"):
        labelling.adjudicate(cot=disputed, gold_by_position=gold, by=labeller)
    labelling.adjudicate(cot=disputed, gold_by_position=gold, by=inspector)
    with pytest.raises(labelling.LabellingError, match="not waiting for adjudication"):
        labelling.adjudicate(cot=disputed, gold_by_position=gold, by=inspector)


def test_a_decided_item_shows_who_decided_and_no_form(disputed, login, inspector):
    gold = {1: {"label": "CS"}, 2: {"label": "CE", "reason": "slip"}, 3: {"label": "CS"}}
    labelling.adjudicate(cot=disputed, gold_by_position=gold, by=inspector, note="checked twice")
    page = login(inspector).get(reverse("pem:adjudicate", args=[disputed.pk])).content.decode()
    assert 'id="not-open"' in page and "checked twice" in page and 'data-gold="CE"' in page
    assert 'id="adjudication-submit"' not in page


def test_rework_after_a_decision_sends_the_item_back_through_the_flow(disputed, inspector, other_annotator):
    gold = {1: {"label": "CS"}, 2: {"label": "CE", "reason": "slip"}, 3: {"label": "CS"}}
    labelling.adjudicate(cot=disputed, gold_by_position=gold, by=inspector)
    auditor = make_person("otto", Role.INSPECTOR)
    task = labelling.return_for_rework(cot=disputed, annotator=other_annotator, note="step 2 is a slip", by=auditor)
    assert not StepLabel.objects.gold().filter(step__cot=disputed).exists()

    # Still disagreeing after rework: back in the queue, undecided.
    still = {**AMY, "2": {"label": "LRE", "reason": "a gap in the argument"}}
    labelling.submit(labelling.save_draft(task=task, draft=still, expected_version=task.version))
    disputed.refresh_from_db()
    decision = Adjudication.objects.get(cot=disputed)
    assert disputed.status == ChainOfThought.Status.ADJUDICATION and decision.decided is None

    # Reworked again into agreement: consensus gold, and no adjudication claims the decision.
    task = labelling.return_for_rework(cot=disputed, annotator=other_annotator, note="see the guideline", by=auditor)
    labelling.submit(labelling.save_draft(task=task, draft=ALICE, expected_version=task.version))
    disputed.refresh_from_db()
    assert disputed.status == ChainOfThought.Status.GOLD
    assert set(StepLabel.objects.gold().filter(step__cot=disputed).values_list("rater", flat=True)) == {"consensus"}
    assert not Adjudication.objects.filter(cot=disputed).exists()


def test_other_roles_cannot_adjudicate(disputed, login, researcher, annotator):
    for user in (researcher, annotator):
        client = login(user)
        assert client.get(reverse("pem:adjudicate", args=[disputed.pk])).status_code == 403
        assert client.post(reverse("pem:adjudicate", args=[disputed.pk]), {}).status_code == 403
    assert login(make_person("ivo", Role.INSPECTOR)).get(reverse("pem:adjudicate", args=[99999])).status_code == 404
