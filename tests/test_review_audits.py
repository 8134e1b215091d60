"""Creating audits: populations, strata, sizes fixed or from the sampling plan, seeds,
inspectors' queues, population changes; the screens and the API around them."""

import pytest
from django.urls import reverse

from annotation.models import Question
from k12vista.roles import Role
from k12vista.vocabulary import Subject
from pem.models import LabellingTask
from review import sampling, services
from review.models import Audit, AuditItem, Rating
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.pem_factories import add_to_pebench, make_cot
from tests.review_factories import audit_of, bulk_questions, three_inspectors

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _english(english):
    """Audit refusals are written in the reader's language; these tests read them in English."""


def sampled_ids(audit):
    return set(audit.items.values_list("question_id", flat=True))


def test_it_draws_200_questions_per_subject(inspector):
    bulk_questions(230)
    bulk_questions(5, status=Question.Status.IMPORTED)  # outside the population
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=200, seed=2024)
    counts = {s: audit.items.filter(stratum=s).count() for s in Subject.values}
    assert counts == dict.fromkeys(counts, 200)
    assert audit.population_count == 1150
    assert audit.strata_counts["math"] == {"available": 230, "size": 200, "taken": 200, "note": "", "plan": None}
    assert not audit.items.exclude(question__status=Question.Status.SOLUTION_CORRECTED).exists()
    assert audit.seed == 2024
    assert audit.items.values("question_id").distinct().count() == 1000


def test_it_draws_the_same_sample_again_with_the_same_seed(inspector):
    bulk_questions(40, subjects=["math", "physics"])
    people = three_inspectors(inspector)
    first = audit_of(inspectors=people, per_stratum=10, seed=99)
    again = audit_of(inspectors=people, per_stratum=10, seed=99)
    other = audit_of(inspectors=people, per_stratum=10, seed=100)
    assert sampled_ids(first) == sampled_ids(again)
    assert sampled_ids(first) != sampled_ids(other)


def test_it_records_a_new_seed_when_none_is_given(inspector):
    bulk_questions(20, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=5, seed=None)
    again = audit_of(inspectors=list(audit.inspectors.all()), per_stratum=5, seed=audit.seed)
    assert audit.seed is not None
    assert sampled_ids(audit) == sampled_ids(again)


def test_it_takes_the_whole_stratum_when_it_is_smaller_than_the_sample_and_says_so(inspector, english):
    bulk_questions(3, subjects=["math"])
    bulk_questions(8, subjects=["physics"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=5)
    assert audit.strata_counts["math"]["taken"] == 3
    assert "all of it is taken" in audit.strata_counts["math"]["note"]
    assert audit.strata_counts["physics"]["taken"] == 5 and audit.strata_counts["physics"]["note"] == ""


def test_it_reports_an_empty_stratum(inspector, english):
    bulk_questions(4, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=2)
    assert audit.strata_counts["geography"]["available"] == 0
    assert audit.strata_counts["geography"]["note"].startswith("empty stratum")
    assert audit.items.count() == 2


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"per_stratum": None}, "either a sample size"),
        ({"per_stratum": 5, "aql": 1.0}, "either a sample size"),
        ({"per_stratum": None, "aql": 0.3}, "not a column"),
        ({"strata": ["colour"]}, "unknown strata"),
        ({"inspectors_per_item": 4}, "needs 4 inspectors"),
    ],
)
def test_it_refuses_bad_audit_settings(inspector, arguments, message):
    bulk_questions(2, subjects=["math"])
    with pytest.raises(services.AuditError, match=message):
        audit_of(inspectors=three_inspectors(inspector), **arguments)
    assert not Audit.objects.exists()


def test_it_refuses_an_empty_population(inspector):
    with pytest.raises(services.AuditError, match="population is empty"):
        audit_of(inspectors=three_inspectors(inspector))
    assert not Audit.objects.exists()


def test_it_sizes_each_stratum_from_the_sampling_plan(inspector):
    bulk_questions(600, subjects=["math"])
    bulk_questions(30, subjects=["physics"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=None, aql=1.0)
    math_plan = sampling.single_sampling_plan(600, 1.0)
    assert (math_plan.code_letter, math_plan.sample_size) == ("J", 80)
    assert audit.strata_counts["math"]["plan"] == math_plan.as_dict()
    assert audit.items.filter(stratum="math").count() == 80
    physics_plan = sampling.single_sampling_plan(30, 1.0)  # code D, an arrow to a plan of n=13
    assert audit.strata_counts["physics"]["plan"]["arrow"] == physics_plan.arrow
    assert audit.items.filter(stratum="physics").count() == min(physics_plan.sample_size, 30)
    assert audit.size_rule == Audit.SizeRule.PLAN and audit.per_stratum is None


def test_it_stratifies_by_grade_type_and_annotator(inspector, annotator, other_annotator):
    bulk_questions(6, subjects=["math"], worker=annotator)
    bulk_questions(4, subjects=["math"], worker=other_annotator, grade=11)
    by_annotator = audit_of(inspectors=three_inspectors(inspector), strata=["annotator"], per_stratum=3)
    assert set(by_annotator.strata_counts) == {"alice", "amy"}
    assert by_annotator.strata_counts["amy"]["available"] == 4
    item = by_annotator.items.filter(stratum="alice").first()
    assert item.workers == {"ocr_review": [annotator.pk], "step_correction": [annotator.pk]}
    by_grade = audit_of(inspectors=list(by_annotator.inspectors.all()), strata=["subject", "grade"], per_stratum=2)
    assert set(by_grade.strata_counts) == {"math / 9", "math / 11"}


def test_it_records_who_moved_a_question_on_when_no_assignment_says(inspector, annotator):
    from annotation import services as bank

    question = make_question()
    question.accept_ocr(by=annotator)
    bank.submit_steps(question=question, user=annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=1)
    assert audit.items.get().workers == {"ocr_review": [annotator.pk], "step_correction": [annotator.pk]}


def test_it_samples_a_batch_and_an_import(inspector):
    questions = bulk_questions(5, subjects=["math"])
    batch = audit_of({"kind": "batch", "hash_ids": [q.hash_id for q in questions[:3]]},
                     inspectors=three_inspectors(inspector), per_stratum=10)  # fmt: skip
    assert sampled_ids(batch) == {q.pk for q in questions[:3]}
    with pytest.raises(services.AuditError, match="choose the import"):
        audit_of({"kind": "import"}, inspectors=list(batch.inspectors.all()))


def test_it_samples_pebench_items_with_their_labellers(inspector, annotator):
    cots = [make_cot(subject="physics") for _ in range(4)]
    add_to_pebench(*cots[:3])
    from django.utils import timezone

    LabellingTask.objects.create(cot=cots[0], annotator=annotator, submitted=timezone.now())
    audit = audit_of({"kind": "pebench"}, inspectors=three_inspectors(inspector), per_stratum=10)
    assert audit.kind == "pebench"
    assert set(audit.items.values_list("cot_id", flat=True)) == {c.pk for c in cots[:3]}
    assert audit.items.get(cot=cots[0]).workers == {"pebench_labelling": [annotator.pk]}


def test_it_puts_each_item_in_its_inspectors_queues_evenly(inspector):
    bulk_questions(8, subjects=["math"])
    people = [*three_inspectors(inspector), make_person("ines", Role.INSPECTOR)]
    audit = audit_of(inspectors=people, per_stratum=8, inspectors_per_item=3)
    for item in audit.items.all():
        assert item.ratings.values("inspector").distinct().count() == 3
    per_person = [Rating.objects.filter(item__audit=audit, inspector=p).count() for p in people]
    assert per_person == [6, 6, 6, 6]
    assert not Rating.objects.exclude(submitted=None).exists()


def test_it_keeps_the_sample_and_reports_a_population_change(inspector):
    questions = bulk_questions(6, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=4)
    assert services.population_change(audit) is None
    before = sampled_ids(audit)
    Question.objects.filter(pk=questions[0].pk).update(status=Question.Status.AUDITED)
    bulk_questions(2, subjects=["physics"])
    change = services.population_change(audit)
    assert change["then"] == 6 and change["now"] == 7
    assert {"stratum": "physics", "then": 0, "now": 2} in change["strata"]
    assert sampled_ids(audit) == before


# --- the screens ---------------------------------------------------------------------


def form_data(people, **overrides):
    data = {"name": "Paper audit", "population": "status", "status": "solution_corrected", "strata": ["subject"],
            "size_rule": "fixed", "per_stratum": "200", "aql": "1.0", "seed": "", "inspectors": [p.pk for p in people],
            "inspectors_per_item": "3"}  # fmt: skip
    data.update(overrides)
    return data


def test_it_creates_an_audit_from_the_form(login, inspector):
    bulk_questions(3, subjects=["math", "physics"])
    people = three_inspectors(inspector)
    client = login(inspector)
    assert client.get(reverse("review:audit_create")).status_code == 200
    response = client.post(reverse("review:audit_create"), form_data(people, per_stratum="2", seed="5"))
    audit = Audit.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("review:audit", args=[audit.pk])
    assert audit.items.count() == 4 and audit.seed == 5 and audit.created_by == inspector
    page = client.get(reverse("review:audit", args=[audit.pk]))
    assert page.status_code == 200
    assert b'data-stratum="math"' in page.content and b'id="rate-next"' in page.content


def test_it_creates_an_audit_from_a_sampling_plan_in_the_form(login, inspector):
    bulk_questions(60, subjects=["math"])
    client = login(inspector)
    client.post(reverse("review:audit_create"), form_data(three_inspectors(inspector), size_rule="plan", aql="2.5"))
    audit = Audit.objects.get()
    plan = sampling.single_sampling_plan(60, 2.5)
    assert audit.aql == 2.5 and audit.items.count() == plan.sample_size
    page = client.get(reverse("review:audit", args=[audit.pk]))
    assert f'data-code-letter="{plan.code_letter}"'.encode() in page.content


def test_it_shows_form_errors_and_creates_nothing(login, inspector):
    client = login(inspector)
    people = three_inspectors(inspector)
    response = client.post(reverse("review:audit_create"), form_data(people, per_stratum=""))
    assert response.status_code == 200 and response.context["form"].errors["per_stratum"]
    response = client.post(reverse("review:audit_create"), form_data(people))  # nothing to sample
    assert "population is empty" in str(response.context["form"].non_field_errors())
    response = client.post(reverse("review:audit_create"), form_data(people, population="batch"))
    assert response.context["form"].errors["hash_ids"]
    assert not Audit.objects.exists()


def test_it_lets_only_inspectors_and_admins_in(client, login, annotator, researcher, administrator, inspector):
    assert client.get(reverse("review:home")).status_code == 302  # to the login page
    for outsider in (annotator, researcher):
        assert login(outsider).get(reverse("review:home")).status_code == 403
        assert login(outsider).get(reverse("review:audit_create")).status_code == 403
    assert login(administrator).get(reverse("review:home")).status_code == 200
    assert login(inspector).get(reverse("review:audit", args=[999])).status_code == 404


def test_it_shows_the_population_change_on_the_audit_page(login, inspector):
    questions = bulk_questions(3, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=3)
    client = login(inspector)
    assert b'id="population-change"' not in client.get(reverse("review:audit", args=[audit.pk])).content
    Question.objects.filter(pk=questions[0].pk).delete()
    page = client.get(reverse("review:audit", args=[audit.pk]))
    assert b'id="population-change" data-then="3" data-now="2"' in page.content
    assert AuditItem.objects.filter(audit=audit).count() == 2  # the deleted question's item went with it


def test_it_closes_an_audit_and_its_queue(login, inspector):
    bulk_questions(2, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=2)
    client = login(inspector)
    assert client.get(reverse("review:audit_close", args=[audit.pk])).status_code == 405
    client.post(reverse("review:audit_close", args=[audit.pk]))  # not confirmed: nothing happens
    audit.refresh_from_db()
    assert audit.closed is None
    client.post(reverse("review:audit_close", args=[audit.pk]), {"confirm": "1"})
    audit.refresh_from_db()
    assert audit.closed is not None
    assert b'id="rate-next"' not in client.get(reverse("review:home")).content


# --- the API ---------------------------------------------------------------------------


def test_it_creates_and_lists_audits_over_the_api(login, inspector, annotator):
    bulk_questions(4, subjects=["math"])
    people = three_inspectors(inspector)
    client = login(inspector)
    body = {"population": {"kind": "status", "status": "solution_corrected"}, "per_stratum": 2, "seed": 3,
            "inspectors": [p.username for p in people]}  # fmt: skip
    response = client.post("/api/inspect/audits/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["items"] == 2 and response.json()["seed"] == 3
    assert response.json()["inspectors_per_item"] == 3
    listed = client.get("/api/inspect/audits/").json()["results"]
    assert [a["id"] for a in listed] == [response.json()["id"]]
    bad = client.post("/api/inspect/audits/", {**body, "per_stratum": None}, content_type="application/json")
    assert bad.status_code == 400 and "either a sample size" in bad.json()["detail"]
    assert login(annotator).get("/api/inspect/audits/").status_code == 403


@pytest.mark.parametrize(
    ("population", "message"),
    [
        ({"kind": "import", "source_document": "abc"}, "source_document"),
        ({"kind": "batch", "hash_ids": "q1"}, "hash_ids"),
        ({"kind": "status", "status": "lost"}, "status"),
        ({"kind": "everything"}, "kind"),
        ({"kind": "status", "stauts": "audited"}, "stauts"),
    ],
)
def test_the_api_refuses_a_population_it_cannot_mean(login, inspector, population, message):
    """The population is typed (issue 29): what it cannot mean is a 400 naming the field."""
    body = {"population": population, "per_stratum": 2, "inspectors": [p.username for p in three_inspectors(inspector)]}
    response = login(inspector).post("/api/inspect/audits/", body, content_type="application/json")
    assert response.status_code == 400 and message in response.json()["population"]
    assert not Audit.objects.exists()
