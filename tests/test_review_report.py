"""The report: rates with Wilson intervals per stratum and overall, the majority
rule, agreement between inspectors, defects per annotator, the plan's decision,
exports and the dashboard."""

import csv
import io
import json

import pytest
from django.urls import reverse

from k12vista.stats import wilson_interval
from review import reports, sampling, services
from review.models import Rating
from tests.review_factories import audit_of, bulk_questions, rate, rate_everything, three_inspectors

pytestmark = pytest.mark.django_db


def items_of(audit, stratum):
    return list(audit.items.filter(stratum=stratum).order_by("position"))


@pytest.fixture
def rated_audit(inspector, annotator, other_annotator):
    bulk_questions(10, subjects=["math"], worker=annotator)
    bulk_questions(10, subjects=["physics"], worker=other_annotator)
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=10)
    failing = {item.pk for item in items_of(audit, "math")[:2]}
    rate_everything(audit, fail_items=failing, fail=("solution",))
    return audit


def test_it_reports_rates_with_wilson_intervals_per_stratum_and_overall(rated_audit):
    report = reports.build_report(rated_audit)
    math = next(s for s in report["strata"] if s["stratum"] == "math")
    assert math["rates"]["solution"] == {"successes": 8, "n": 10, "value": 0.8, "ci95": list(wilson_interval(8, 10))}
    assert math["rates"]["question"]["value"] == 1.0 and math["rates"]["all"]["successes"] == 8
    physics = next(s for s in report["strata"] if s["stratum"] == "physics")
    assert physics["rates"]["solution"]["value"] == 1.0
    overall = report["overall"]["rates"]["solution"]
    assert (overall["successes"], overall["n"]) == (18, 20)
    assert report["overall"]["decision"] is None  # no plan, no decision
    geography = next(s for s in report["strata"] if s["stratum"] == "geography")
    assert geography["sampled"] == 0 and geography["rates"]["solution"]["value"] is None


def test_an_item_passes_a_dimension_when_most_inspectors_pass_it(inspector):
    bulk_questions(2, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=2)
    first, second = items_of(audit, "math")
    for item, fails in ((first, 1), (second, 2)):
        for i, rating in enumerate(item.ratings.order_by("inspector_id").select_related("item", "inspector")):
            rate(rating, fail=("answer",) if i < fails else ())
    rows = {row["item"].pk: row["verdict"] for row in reports.rated_items(audit)}
    assert rows[first.pk]["answer"] is True and rows[second.pk]["answer"] is False
    ratings = list(first.ratings.order_by("inspector_id"))
    assert services.item_verdict(ratings[:2], ["answer"]) == {"answer": False}  # a 1-1 tie fails


def test_it_measures_agreement_between_inspectors(inspector):
    bulk_questions(4, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=4)
    fails_per_item = [0, 0, 1, 3]  # pass counts 3, 3, 2, 0
    for item, fails in zip(items_of(audit, "math"), fails_per_item, strict=True):
        for i, rating in enumerate(item.ratings.order_by("inspector_id").select_related("item", "inspector")):
            rate(rating, fail=("solution",) if i < fails else ())
    solution = reports.build_report(audit)["agreement"]["solution"]
    # Fleiss: P-bar = (1 + 1 + 1/3 + 1) / 4, Pe = (8/12)^2 + (4/12)^2, kappa = (P - Pe) / (1 - Pe) = 0.625
    assert solution["fleiss_kappa"]["value"] == pytest.approx(0.625)
    assert (solution["unanimous"]["successes"], solution["unanimous"]["n"]) == (3, 4)
    question = reports.build_report(audit)["agreement"]["question"]
    assert question["fleiss_kappa"]["value"] is None and question["unanimous"]["value"] == 1.0  # all passed


def test_it_counts_defects_per_annotator(rated_audit):
    table = reports.build_report(rated_audit)["annotators"]
    assert [row["annotator"] for row in table] == ["alice", "amy"]
    alice = table[0]
    assert (alice["rate"]["successes"], alice["rate"]["n"]) == (2, 10)
    assert alice["by_dimension"] == {"question": 0, "answer": 0, "solution": 2}
    assert table[1]["rate"]["successes"] == 0


def test_it_decides_each_stratum_by_the_plans_numbers(inspector):
    bulk_questions(60, subjects=["math", "physics"])
    audit = audit_of(inspectors=[inspector], inspectors_per_item=1, per_stratum=None, aql=2.5)
    plan = sampling.single_sampling_plan(60, 2.5)
    assert (plan.sample_size, plan.accept, plan.reject) == (20, 1, 2)
    report = reports.build_report(audit)
    assert {s["stratum"]: s["decision"]["decision"] for s in report["strata"] if s["decision"]} == {
        "math": "pending", "physics": "pending"}  # fmt: skip
    assert report["overall"]["decision"] == "pending"
    math_items = items_of(audit, "math")
    rate_everything(audit, fail_items={math_items[0].pk}, fail=("question",))
    report = reports.build_report(audit)
    math = next(s for s in report["strata"] if s["stratum"] == "math")
    assert math["decision"] == {"decision": "accept", "defects": 1, "accept": 1, "reject": 2}
    assert report["overall"]["decision"] == "accept"
    rate(Rating.objects.select_related("item", "inspector").get(item=math_items[1]), fail=("answer",))
    report = reports.build_report(audit)
    assert next(s for s in report["strata"] if s["stratum"] == "math")["decision"]["decision"] == "reject"
    assert next(s for s in report["strata"] if s["stratum"] == "physics")["decision"]["decision"] == "accept"
    assert report["overall"]["decision"] == "reject"


def test_the_report_page_shows_rates_intervals_and_the_decision(rated_audit, login, inspector):
    page = login(inspector).get(reverse("review:report", args=[rated_audit.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    low, high = wilson_interval(8, 10)
    assert f'data-rate="0.8000" data-n="10" data-passed="8" data-ci-low="{low:.4f}" data-ci-high="{high:.4f}"' in html
    assert 'data-annotator="alice"' in html and 'id="agreement"' in html and "<svg" in html


def test_it_exports_the_report_as_csv_and_json(rated_audit, login, inspector):
    client = login(inspector)
    response = client.get(reverse("review:report_export", args=[rated_audit.pk, "csv"]))
    assert response["Content-Type"].startswith("text/csv")
    assert f"audit-{rated_audit.pk}-report.csv" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    math_solution = next(r for r in rows if r["stratum"] == "math" and r["dimension"] == "solution")
    assert (math_solution["rated"], math_solution["passed"], math_solution["rate"]) == ("10", "8", "0.8000")
    assert any(r["stratum"] == "overall" and r["dimension"] == "all" for r in rows)
    document = json.loads(client.get(reverse("review:report_export", args=[rated_audit.pk, "json"])).content)
    assert document["overall"]["rates"]["solution"]["successes"] == 18
    assert document["audit"]["seed"] == rated_audit.seed
    assert client.get(f"/api/inspect/audits/{rated_audit.pk}/report/").json()["sampled"] == 20


def test_the_report_is_for_inspectors_and_admins(rated_audit, login, annotator, administrator):
    assert login(annotator).get(reverse("review:report", args=[rated_audit.pk])).status_code == 403
    assert login(administrator).get(reverse("review:report", args=[rated_audit.pk])).status_code == 200
    assert login(administrator).get(reverse("review:report", args=[rated_audit.pk + 1])).status_code == 404


def test_the_dashboard_shows_pass_rates_and_the_annotators_with_most_defects(rated_audit, login, administrator):
    page = login(administrator).get(reverse("review:home")).content.decode()
    assert 'id="pass-rates"' in page and 'data-rate="0.9000"' in page  # 18 of 20 items passed everything
    assert 'data-annotator="alice"' in page and 'data-annotator="amy"' not in page
    assert 'id="audits-in-progress"' in page and rated_audit.name in page
