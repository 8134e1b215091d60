"""Labelling at speed, measured in keys and time: a 6-step all-correct item in 7 keys from the queue to the
next item with no mouse and no Tab; an error label's reason left with Esc for the next step; CS clears a
reason; U undoes; the question stays in view; a label's save goes out at once."""

import pytest

from k12vista.roles import Role
from pem import labelling
from pem.models import LabellingTask
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person
from tests.pem_factories import make_cot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIX = [f"第 {n} 步：$x_{n} = {n}$。" for n in range(1, 7)]


def saved_version(page) -> None:
    page.wait_for_function("() => /v\\d+$/.test(document.getElementById('autosave-status').textContent)")


def test_a_six_step_correct_item_takes_seven_keys_and_opens_the_next(page):
    make_person("wang", Role.ANNOTATOR)
    first, second = make_cot(steps=SIX, key="six-1"), make_cot(steps=SIX, key="six-2")
    labelling.open_labelling(first)
    labelling.open_labelling(second)
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.goto("/pem/label/")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'label-next'")
    keys = 0
    page.keyboard.press("Enter")  # the queue's "next item" has the focus: no Tab, no mouse
    page.wait_for_url("**/pem/label/*/")
    page.locator(".step-text .katex").first.wait_for()
    # The first label's save goes out on its own, before any other key and before the item is submitted
    # (how soon is a speed figure to measure, not a timed test's to assert: it failed under load).
    with page.expect_request(lambda r: r.method == "PUT"):
        page.keyboard.press("1")
    keys += 1
    for _ in SIX[1:]:
        page.keyboard.press("1")
        keys += 1
    assert page.locator("#label-done").inner_text() == "6" and page.locator("#label-current").inner_text() == "6"
    page.keyboard.press("Control+Enter")
    keys += 1
    page.wait_for_url(lambda url: "/pem/label/" in url and url.rstrip("/").split("/")[-1].isdigit())
    page.locator("h1:has-text('six-2')").wait_for()
    assert keys == 7
    task = LabellingTask.objects.get(cot=first)
    assert task.submitted is not None
    assert [task.draft[str(n)]["label"] for n in range(1, 7)] == ["CS"] * 6
    assert page.problems == []


def test_reasons_escape_to_the_next_step_cs_clears_them_and_u_undoes(page):
    make_person("wang", Role.ANNOTATOR)
    cot = make_cot(steps=SIX, key="six-e")
    labelling.open_labelling(cot)
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.goto("/pem/label/")
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'label-next'")
    page.keyboard.press("Enter")
    page.wait_for_url("**/pem/label/*/")
    page.locator(".step-text .katex").first.wait_for()
    assert page.locator("#step-1 textarea").is_hidden()  # no reason box until an error label
    page.keyboard.press("1")
    page.keyboard.press("8")  # CE on step 2: its reason opens
    page.wait_for_selector("#step-2 textarea:focus")
    page.keyboard.type("算错了")
    page.keyboard.press("Escape")
    page.keyboard.press("1")  # lands on step 3, not back on step 2
    assert page.locator("#step-2 input:checked").get_attribute("value") == "CE"
    assert page.locator("#step-3 input:checked").get_attribute("value") == "CS"
    page.keyboard.press("k")
    page.keyboard.press("k")
    page.keyboard.press("1")  # step 2 becomes correct: the reason goes with the error
    assert page.locator("#step-2 textarea").input_value() == "" and page.locator("#step-2 textarea").is_hidden()
    page.keyboard.press("u")  # undo: the error and its reason come back
    assert page.locator("#step-2 input:checked").get_attribute("value") == "CE"
    assert page.locator("#step-2 textarea").input_value() == "算错了"
    saved_version(page)
    page.wait_for_timeout(300)
    task = LabellingTask.objects.get(cot=cot)
    task.refresh_from_db()
    assert task.draft["2"] == {"label": "CE", "reason": "算错了"}
    # The question stays in view while the last step is labelled.
    page.locator("#step-6").scroll_into_view_if_needed()
    pane = page.locator(".item-pane").bounding_box()
    assert pane["y"] >= 0 and pane["y"] < page.viewport_size["height"]
    assert page.problems == []
