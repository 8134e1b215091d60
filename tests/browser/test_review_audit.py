"""The audit in a real browser: an inspector draws 200 questions per subject and
a sample from a sampling plan, three inspectors rate the plan's sample, the
report shows rates with intervals per subject and the plan's decision, and a
failed item goes back to its annotator with the note and is audited again."""

import pytest
from django.utils import timezone

from annotation.models import Assignment, Question
from k12vista.roles import Role
from k12vista.vocabulary import Subject
from review import sampling
from review.models import Audit, AuditItem
from tests.annotation_factories import make_question
from tests.browser.conftest import log_in, open_page
from tests.conftest import PASSWORD, make_person
from tests.review_factories import bulk_questions

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AQL = "10"


def new_page(browser, live_server, username):
    page = open_page(browser, live_server.url, timeout_ms=20000)
    log_in(page, username, PASSWORD)
    page.wait_for_url("**/inspect/" if username != "alice" else "**/annotate/")
    return page


def worked_by(questions, annotator):
    now = timezone.now()
    Assignment.objects.bulk_create(
        Assignment(question=q, annotator=annotator, task=task, locked_until=now, done_at=now)
        for q in questions
        for task in (Assignment.Task.OCR_REVIEW, Assignment.Task.STEP_CORRECTION)
    )


def rate_queue(page, audit_pk, failing: dict[str, str]):
    """Rates every item in the inspector's queue: pass, except the dimensions in ``failing``."""
    page.goto(f"/inspect/audits/{audit_pk}/")
    page.click("#rate-next")
    while "/rate/" in page.url:
        page.locator("#audited-item [data-math] .katex").first.wait_for()  # LaTeX typeset
        label = page.get_attribute("#rating-form", "data-item")
        for dimension in ("question", "answer", "solution"):
            fail = failing.get(label) == dimension
            page.check(f"input[name={dimension}][value={'fail' if fail else 'pass'}]")
            if fail:
                page.fill(f"#id_{dimension}_note", f"第二步推导有误 ({label})")
        with page.expect_navigation():
            page.click("#save-rating")


def test_it_audits_rates_reports_and_sends_back_for_rework(browser, live_server):
    alice = make_person("alice", Role.ANNOTATOR)
    inspectors = [make_person(name, Role.INSPECTOR) for name in ("ivan", "irene", "igor")]
    bulk_questions(200, worker=alice)
    # Two real questions per subject (figures, LaTeX) for the plan's audit.
    small = [make_question(subject=subject) for subject in Subject.values for _ in range(2)]
    Question.objects.filter(pk__in=[q.pk for q in small]).update(status=Question.Status.SOLUTION_CORRECTED)
    worked_by(small, alice)

    ivan = new_page(browser, live_server, "ivan")
    # 1. An audit of 200 questions per subject, from the form's defaults.
    ivan.click("#new-audit")
    ivan.fill("#id_name", "200 per subject")
    for person in inspectors:
        ivan.check(f"input[name=inspectors][value='{person.pk}']")
    with ivan.expect_navigation():
        ivan.click("#draw-sample")
    for subject in Subject.values:
        row = ivan.locator(f"#strata tr[data-stratum={subject}]")
        assert row.get_attribute("data-taken") == "200"
    big = Audit.objects.get(name="200 per subject")
    assert big.items.count() == 1000 and big.per_stratum == 200

    # 2. An audit from the sampling plan, over a batch of ten questions (two per subject).
    ivan.goto("/inspect/audits/new/")
    ivan.fill("#id_name", "plan audit")
    ivan.check("input[name=population][value=batch]")
    ivan.fill("#id_hash_ids", "\n".join(q.hash_id for q in small))
    ivan.check("input[name=size_rule][value=plan]")
    ivan.select_option("#id_aql", AQL)
    for person in inspectors:
        ivan.check(f"input[name=inspectors][value='{person.pk}']")
    with ivan.expect_navigation():
        ivan.click("#draw-sample")
    audit = Audit.objects.get(name="plan audit")
    plan = sampling.single_sampling_plan(2, float(AQL))
    assert ivan.locator("#strata tr[data-stratum=math] [data-code-letter]").get_attribute("data-code-letter") == "A"
    assert ivan.locator("#strata tr[data-stratum=math]").get_attribute("data-taken") == "2"
    assert audit.items.count() == 10

    # 3. Three inspectors rate it: math's first question fails on its solution (two of three
    # inspectors say so), both physics questions fail (everyone says so).
    math_first = small[0].hash_id
    physics = [q.hash_id for q in small if q.subject == "physics"]
    everyone = dict.fromkeys(physics, "solution")
    rate_queue(ivan, audit.pk, {**everyone, math_first: "solution"})
    for name, failing in (("irene", {**everyone, math_first: "solution"}), ("igor", everyone)):
        page = new_page(browser, live_server, name)
        rate_queue(page, audit.pk, failing)
        assert page.problems == []
        page.context.close()

    # 4. The report: rates with intervals per subject and the plan's decision.
    ivan.goto(f"/inspect/audits/{audit.pk}/report/")
    math_solution = ivan.locator("#rates tr[data-stratum=math] td[data-dimension=solution] .audit-rate")
    assert math_solution.get_attribute("data-rate") == "0.5000"
    assert math_solution.get_attribute("data-ci-low") is not None
    assert ivan.locator("#rates tr[data-stratum=chemistry] td[data-dimension=all] .audit-rate").get_attribute(
        "data-rate") == "1.0000"  # fmt: skip
    decisions = {s: sampling.decide(plan, d) for s, d in (("math", 1), ("physics", 2), ("chemistry", 0))}
    for subject, expected in decisions.items():
        shown = ivan.locator(f"#rates tr[data-stratum={subject}] [data-decision]").get_attribute("data-decision")
        assert shown == expected
    assert ivan.get_attribute("#overall-decision", "data-decision") == "reject"
    assert ivan.locator("#rates svg.rate-bar").count() > 0

    # 5. Rework: the failed math question goes back to alice with the note.
    item = AuditItem.objects.get(audit=audit, question__hash_id=math_first)
    ivan.goto(f"/inspect/items/{item.pk}/")
    assert "第二步推导有误" in ivan.input_value("#id_note")
    with ivan.expect_navigation():
        ivan.click("#rework-form button[type=submit]")
    assert ivan.locator(".rework[data-stage=step_correction][data-done='0']").count() == 1

    annotator = new_page(browser, live_server, "alice")
    assert "第二步推导有误" in annotator.inner_text("#my-queue")
    annotator.click("#my-queue a")
    annotator.wait_for_url("**/annotate/steps/*/")
    assert "第二步推导有误" in annotator.inner_text("#rework-note")
    annotator.locator("textarea[name=step]").first.fill("由 $x^2=4$ 且 $x>0$ 得 $x=2$。")
    with annotator.expect_navigation():
        annotator.click("button[value=submit]")
    assert Question.objects.get(hash_id=math_first).status == Question.Status.SOLUTION_CORRECTED
    assert annotator.problems == []

    # 6. Re-audit: the item is back in the inspectors' queues as round 2, with its history.
    ivan.goto(f"/inspect/items/{item.pk}/")
    with ivan.expect_navigation():
        ivan.click("#reaudit-form button")
    assert ivan.locator("#history [data-round]").count() == 2
    second = AuditItem.objects.get(audit=audit, question__hash_id=math_first, round=2)
    ivan.goto(f"/inspect/audits/{audit.pk}/")
    ivan.click("#rate-next")
    assert ivan.get_attribute("#rating-form", "data-item-id") == str(second.pk)
    assert ivan.problems == []
