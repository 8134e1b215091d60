"""A day of step labelling without losing work: a reload mid-item reopens at the first unlabelled step with its
undo history, a key pressed just before a reload is no conflict, and a real conflict (two tabs) says what
happened, offers both versions and lets saving go on; a save that cannot reach the server retries and says so in
Chinese, a CSRF token renewed by a sign-in elsewhere is fetched again, and a stale form gets the studio's own page."""

import time

import pytest

from k12vista.roles import Role
from pem import labelling
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, make_person
from tests.pem_factories import make_cot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SEVEN = [f"第 {n} 步：$y_{n} = {n}$。" for n in range(1, 8)]
SAVED = "() => /v\\d+$/.test(document.getElementById('autosave-status').textContent)"


def open_item(page, cot):
    """Logs wang in and opens his labelling task on ``cot``; returns the task."""
    wang = make_person("wang", Role.ANNOTATOR)
    labelling.open_labelling(cot)
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    task = labelling.next_task(wang)
    page.goto(f"/pem/label/{task.pk}/")
    page.locator(".step-text .katex").first.wait_for()
    return task


def draft_of(task) -> dict[str, str]:
    task.refresh_from_db()
    return {position: entry["label"] for position, entry in task.draft.items()}


def test_a_reload_reopens_at_the_first_unlabelled_step_and_a_key_before_it_is_no_conflict(page, monkeypatch):
    task = open_item(page, make_cot(steps=SEVEN, key="seven"))
    for key in "111":
        page.keyboard.press(key)
    page.wait_for_function(SAVED)
    page.reload()
    page.locator(".step-text .katex").first.wait_for()
    assert page.locator("#label-current").inner_text() == "4"  # not step 1 again
    page.keyboard.press("7")
    page.wait_for_selector("#step-4 textarea:focus")  # HE is an error: its reason opens
    page.keyboard.press("Escape")
    page.wait_for_function(SAVED)
    assert draft_of(task) == {"1": "CS", "2": "CS", "3": "CS", "4": "HE"}
    page.keyboard.press("u")  # the undo history came through the reload: HE goes, then step 3's CS
    page.keyboard.press("u")
    page.wait_for_function(SAVED)
    assert draft_of(task) == {"1": "CS", "2": "CS"}
    assert page.locator("#label-current").inner_text() == "3"

    # A save still on its way when the page reloads lands after the new page was drawn: the new page's version
    # is then one behind, and its next save must not be refused as if another tab had saved.
    slow = labelling.save_draft

    def save_slowly(**kwargs):
        time.sleep(1.0)
        return slow(**kwargs)

    monkeypatch.setattr(labelling, "save_draft", save_slowly)
    with page.expect_request(lambda r: r.method == "PUT"):
        page.keyboard.press("1")
    page.reload()
    page.locator(".step-text .katex").first.wait_for()
    page.wait_for_timeout(1500)  # the slow save has landed
    monkeypatch.setattr(labelling, "save_draft", slow)
    page.keyboard.press("2")
    page.wait_for_function(SAVED)
    assert page.locator("#draft-conflict").is_hidden()
    assert draft_of(task) == {"1": "CS", "2": "CS", "3": "ICE"}
    assert page.problems == []


def test_a_conflict_between_two_tabs_offers_both_versions_and_saving_goes_on(page):
    task = open_item(page, make_cot(steps=SEVEN, key="two-tabs"))
    other = page.context.new_page()  # the same person's second tab on the same item
    other.problems = []
    other.set_default_timeout(15000)
    other.goto(f"/pem/label/{task.pk}/")
    other.locator(".step-text .katex").first.wait_for()
    page.keyboard.press("1")
    page.wait_for_function(SAVED)
    other.keyboard.press("8")  # based on the version before the first tab's save
    card = other.locator("#draft-conflict")
    card.wait_for()
    assert "CS" in card.inner_text()  # it says what the other tab saved
    other.keyboard.press("Escape")
    other.keyboard.press("2")  # labelling goes on while the choice waits; nothing says "saving" for ever
    other.keyboard.press("Escape")
    assert "…" not in other.locator("#autosave-status").inner_text()
    assert draft_of(task) == {"1": "CS"}
    other.click("#keep-mine")
    other.wait_for_function(SAVED)
    assert card.is_hidden()
    assert draft_of(task) == {"1": "CE", "2": "ICE"}
    other.keyboard.press("1")  # and saving works again afterwards
    other.wait_for_function("() => /v3$/.test(document.getElementById('autosave-status').textContent)")
    assert draft_of(task)["3"] == "CS"

    # The first tab, now behind, loads the other version instead.
    page.keyboard.press("1")
    page.locator("#draft-conflict").wait_for()
    page.click("#load-theirs")
    page.wait_for_load_state()
    page.locator(".step-text .katex").first.wait_for()
    assert page.locator("#step-1 input:checked").get_attribute("value") == "CE"
    assert page.locator("#label-current").inner_text() == "4"
    assert draft_of(task) == {"1": "CE", "2": "ICE", "3": "CS"}
    # The browser logs each refused save (409) itself; nothing else went wrong.
    assert [p for p in page.problems + other.problems if "409 (Conflict)" not in p] == []


def test_failed_saves_retry_in_the_readers_language_a_stale_token_is_renewed_and_leaving_asks(page):
    task = open_item(page, make_cot(steps=SEVEN, key="outage"))
    attempts = []

    def unreachable(route):
        attempts.append(time.monotonic())
        route.abort("connectionrefused")

    page.route("**/api/pem/tasks/*/draft/", unreachable)
    page.keyboard.press("1")
    page.wait_for_function("() => /无法连接服务器/.test(document.getElementById('autosave-status').textContent)")
    assert "Failed to fetch" not in page.locator("#autosave-status").inner_text()
    dialogs = []
    page.once("dialog", lambda dialog: (dialogs.append(dialog.type), dialog.dismiss()))
    page.evaluate("location.href = '/pem/label/'")  # the label is not saved: leaving asks first
    page.wait_for_timeout(300)
    assert dialogs == ["beforeunload"] and "/pem/label/" + str(task.pk) in page.url
    for _ in range(50):  # tried again by itself, with no key pressed (its first backoff: about a second)
        if len(attempts) >= 2:
            break
        page.wait_for_timeout(200)
    assert len(attempts) >= 2
    page.unroute("**/api/pem/tasks/*/draft/")
    page.wait_for_function(SAVED, timeout=8000)
    assert draft_of(task) == {"1": "CS"}

    # Signing in again in another tab renews the CSRF token: the next save fetches the new one and goes through.
    stale = page.context.new_page()
    stale.goto("/pem/label/")  # a form drawn before that sign-in
    again = page.context.new_page()
    again.goto("/pem/label/")
    again.click("form[action='/logout/'] button")
    log_in(again, "wang", PASSWORD)
    again.wait_for_url("**/annotate/")
    page.keyboard.press("1")
    page.wait_for_function(SAVED)
    assert draft_of(task) == {"1": "CS", "2": "CS"}
    assert "CSRF" not in page.content()

    # A form that was drawn before it gets the studio's own page, in Chinese, with a way back.
    stale.click("#label-next")
    stale.locator("#error-csrf").wait_for()
    assert "表单没有提交" in stale.content() and "CSRF" not in stale.locator("main").inner_text()
    stale.click("#csrf-back")
    stale.wait_for_url("**/pem/label/")
    assert [p for p in page.problems if "ERR_CONNECTION_REFUSED" not in p and "403" not in p] == []


def test_queue_choices_apply_when_chosen_and_a_question_held_from_before_says_so(page):
    from annotation.models import Assignment
    from tests.annotation_factories import make_question

    wang = make_person("wang", Role.ANNOTATOR)
    math = make_question(subject="math", text="数学题")
    physics = make_question(subject="physics", text="物理题")
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.select_option("#queue-choices select[name=subject]", "physics")  # no "count" pressed
    page.click("button[value=ocr_review]")
    page.wait_for_url("**/annotate/review/*/")
    held = Assignment.objects.get(annotator=wang)
    assert held.question == physics
    assert page.locator(".messages").count() == 0

    # Another day: he still holds the physics question and now chooses mathematics.
    page.goto("/annotate/")
    page.select_option("#queue-choices select[name=subject]", "math")
    page.click("button[value=ocr_review]")
    page.wait_for_url(f"**/annotate/review/{held.pk}/")
    assert physics.hash_id in page.locator(".messages").inner_text()  # returned, and it says why
    page.locator("#id_text").focus()
    page.keyboard.press("Control+Enter")  # accepted: the next one follows the choice
    page.wait_for_url(lambda url: "/annotate/review/" in url and not url.endswith(f"/{held.pk}/"))
    assert Assignment.objects.get(annotator=wang, done_at__isnull=True).question == math
    assert page.problems == []


def test_a_role_under_the_blind_rule_says_why_the_queue_is_empty_and_the_user_page_warns_first(browser, live_server):
    from k12vista.roles import roles_of
    from tests.browser.conftest import open_page
    from tests.pem_factories import label_steps

    make_person("boss", Role.ADMIN)
    wang = make_person("wang", Role.ANNOTATOR)
    started = make_cot(steps=SEVEN[:2], key="started")
    labelling.open_labelling(started)
    label_steps(started, ["CS", "CS"], rater="zhao")  # someone has labelled it already

    admin = open_page(browser, live_server.url)
    log_in(admin, "boss", PASSWORD)
    admin.wait_for_url("**/manage/users/")
    admin.goto(f"/manage/users/{wang.pk}/")
    warning = admin.locator("#blind-rule-warning")
    assert warning.is_hidden()
    admin.check("input[name=roles][value=inspector]")
    warning.wait_for()  # said before the change is saved
    assert "盲" in warning.inner_text()
    assert roles_of(type(wang).objects.get(pk=wang.pk)) == [Role.ANNOTATOR]
    admin.click("#user-roles-form button[type=submit]")
    admin.wait_for_url("**/manage/users/")
    assert set(roles_of(type(wang).objects.get(pk=wang.pk))) == {Role.ANNOTATOR, Role.INSPECTOR}

    page = open_page(browser, live_server.url)
    log_in(page, "wang", PASSWORD)
    page.goto("/pem/label/")
    assert page.locator("#label-waiting").inner_text() == "0"
    assert "1" in page.locator("#blind-rule-note").inner_text()  # the queue says why it is empty
    page.click("#label-next")
    page.wait_for_url("**/pem/label/")
    assert page.locator("#blind-rule-note").is_visible()
    assert admin.problems == [] and page.problems == []
    admin.context.close()
    page.context.close()


def test_audit_decisions_ask_move_the_questions_say_how_many_and_name_lots_in_words(page):
    from annotation.models import Question
    from review.models import Audit
    from tests.review_factories import audit_of, bulk_questions, rate_everything

    inspector = make_person("ivan", Role.INSPECTOR)
    alice = make_person("alice", Role.ANNOTATOR)
    bulk_questions(3, subjects=["math", "biology"], worker=alice)
    fixed = audit_of(inspectors=[inspector], inspectors_per_item=1, per_stratum=2)  # no sampling plan
    rate_everything(fixed)
    bulk_questions(30, subjects=["physics"], status=Question.Status.IMPORTED)
    imported = {"kind": "status", "status": "imported"}
    planned = audit_of(imported, inspectors=[inspector], inspectors_per_item=1, per_stratum=None, aql=6.5)
    first_two = set(planned.items.order_by("position").values_list("pk", flat=True)[:2])
    rate_everything(planned, fail_items=first_two)
    log_in(page, "ivan", PASSWORD)
    page.wait_for_url("**/inspect/")

    page.goto(f"/inspect/audits/{fixed.pk}/")
    assert page.locator("#close-audit-confirm").is_hidden()  # closing asks first
    page.click("#close-audit summary")
    page.locator("#close-audit-confirm").wait_for()
    page.click("tr[data-stratum=biology] [data-decide=reject]")
    page.locator(".messages").wait_for()
    said = page.locator(".messages").inner_text()
    assert "生物" in said and "biology" not in said and "3 道题退回返工" in said
    page.click("tr[data-stratum=math] [data-decide=accept]")
    page.locator(".messages").wait_for()
    assert (
        "数学" in page.locator(".messages").inner_text()
        and "3 道题进入已审核" in page.locator(".messages").inner_text()
    )
    assert Question.objects.filter(subject="math", status="audited").count() == 3
    assert Audit.objects.get(pk=fixed.pk).closed is None

    page.goto(f"/inspect/audits/{planned.pk}/")
    page.click("#apply-decision")
    page.locator(".messages").wait_for()
    said = page.locator(".messages").inner_text()
    assert "物理" in said and "physics" not in said and "30 道题留在原处" in said  # and why
    page.click("#close-audit summary")
    page.click("#close-audit-confirm")
    page.locator("#close-audit").wait_for(state="detached")
    assert Audit.objects.get(pk=planned.pk).closed is not None
    assert page.problems == []


def test_the_ocr_review_retries_its_autosave_and_renews_a_stale_token(page):
    from annotation.models import Question
    from tests.annotation_factories import make_question

    make_person("wang", Role.ANNOTATOR)
    question = make_question()
    log_in(page, "wang", PASSWORD)
    page.wait_for_url("**/annotate/")
    page.click("button[value=ocr_review]")
    page.wait_for_url("**/annotate/review/*/")
    review_url = page.url
    page.route(review_url, lambda route: route.abort("connectionrefused") if route.request.method == "POST" else
               route.continue_())  # fmt: skip
    page.fill("#id_answers", "C")
    page.wait_for_function("() => /无法连接服务器/.test(document.getElementById('autosave-status').textContent)",
                           timeout=10000)  # fmt: skip
    page.unroute(review_url)
    page.wait_for_function(SAVED, timeout=10000)  # tried again by itself
    question.refresh_from_db()
    assert question.answers == ["C"]

    again = page.context.new_page()
    again.goto("/annotate/")
    again.click("form[action='/logout/'] button")
    log_in(again, "wang", PASSWORD)
    again.wait_for_url("**/annotate/")
    refused = []
    page.on("response", lambda r: r.status == 403 and refused.append(r.url))
    page.fill("#id_answers", "D")
    page.wait_for_function("() => /v\\d+$/.test(document.getElementById('autosave-status').textContent) && "
                           "document.getElementById('id_version').value > 2", timeout=10000)  # fmt: skip
    assert Question.objects.get(pk=question.pk).answers == ["D"]
    assert refused == [review_url]  # the stale token was refused once, then renewed
