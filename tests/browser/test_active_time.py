"""Active time, measured by the page on a clock the test drives: only seconds while the tab is visible
and the person acted within the last minute count; they reach the labels when the item is submitted.
The guideline sits beside the task, and the queue's choices apply as soon as they are chosen."""

import pytest
from django.urls import reverse

from k12vista import guidelines
from k12vista.roles import Role
from pem import labelling
from pem.models import LabellingTask, StepLabel
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person
from tests.pem_factories import make_cot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def set_visibility(page, state: str) -> None:
    page.evaluate(
        """state => {
          Object.defineProperty(document, "visibilityState", { configurable: true, get: () => state });
          document.dispatchEvent(new Event("visibilitychange"));
        }""",
        state,
    )


def test_only_visible_attended_seconds_count_and_reach_the_labels(page):
    annotator = make_person("timer", Role.ANNOTATOR)
    admin = make_person("boss", Role.ADMIN)
    guidelines.publish(kind="step_labels", text="GUIDE-LINE: label each step on its own.", by=admin)
    math = make_cot(subject="math")
    physics = make_cot(subject="physics")
    for cot in (math, physics):
        labelling.open_labelling(cot)
    page.clock.install()
    log_in(page, "timer", PASSWORD)
    page.goto(reverse("pem:label_queue"))
    assert page.text_content("#label-waiting") == "2"
    # Choosing a subject applies at once: the count follows and the next item is a physics one.
    page.select_option("#label-choices select[name=subject]", "physics")
    page.wait_for_url("**/pem/label/?*subject=physics*")
    assert page.text_content("#label-waiting") == "1"
    page.click("#label-next")
    page.wait_for_url("**/pem/label/*/")
    task = LabellingTask.objects.get(annotator=annotator)
    assert task.cot_id == physics.pk
    panel = page.locator("details.guideline[data-guideline=step_labels]")
    assert not panel.evaluate("el => el.open")  # collapsed until asked for
    panel.locator("summary").click()
    assert "GUIDE-LINE: label each step on its own." in panel.inner_text()
    for _ in range(3):
        page.keyboard.press("1")
    page.clock.run_for(10_000)  # at work: counts
    page.clock.run_for(300_000)  # no key, no movement for five minutes: only the first minute counts
    set_visibility(page, "hidden")
    page.mouse.move(40, 40)
    page.clock.run_for(30_000)  # another tab in front: nothing counts, movement or not
    set_visibility(page, "visible")
    page.click("#label-submit")
    page.wait_for_url("**/pem/label/")
    seconds = set(StepLabel.objects.filter(step__cot=physics).values_list("active_seconds", flat=True))
    assert len(seconds) == 1
    (counted,) = seconds
    assert 55 <= counted <= 62, counted
    assert LabellingTask.objects.get(pk=task.pk).active_seconds == counted
    assert page.problems == []
