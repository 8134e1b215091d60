"""Rating: the inspector's queue, one rating per inspector and item (a second
submit edits it), dimensions per kind, notes on failures, access."""

import pytest
from django.urls import reverse

from annotation.models import Question
from review import services
from review.models import Rating
from tests.annotation_factories import make_question
from tests.pem_factories import add_to_pebench, label_steps, make_cot
from tests.review_factories import audit_of, bulk_questions, rate, three_inspectors

pytestmark = pytest.mark.django_db

ALL_PASS = {"question": "pass", "answer": "pass", "solution": "pass"}


@pytest.fixture
def audit(inspector):
    question = make_question(subject="math")  # with a figure and LaTeX in its text
    Question.objects.filter(pk=question.pk).update(status=Question.Status.SOLUTION_CORRECTED)
    bulk_questions(2, subjects=["math"])
    return audit_of(inspectors=three_inspectors(inspector), per_stratum=3)


def mine(audit, inspector):
    return Rating.objects.filter(item__audit=audit, inspector=inspector).select_related("item")


def test_it_saves_a_rating_and_a_second_submit_edits_it(audit, inspector):
    rating = mine(audit, inspector).first()
    rate(rating, fail=["answer"], note="答案应为 $x=2$")
    first = Rating.objects.get(pk=rating.pk)
    assert first.verdicts == {"question": True, "answer": False, "solution": True}
    assert first.notes == {"answer": "答案应为 $x=2$"}
    rate(rating)
    again = Rating.objects.get(pk=rating.pk)
    assert again.verdicts == {"question": True, "answer": True, "solution": True} and again.notes == {}
    assert again.submitted == first.submitted and again.updated > first.updated
    assert Rating.objects.filter(item=rating.item, inspector=inspector).count() == 1


def test_it_refuses_a_failure_without_a_note_and_missing_dimensions(audit, inspector, english):
    rating = mine(audit, inspector).first()
    with pytest.raises(services.AuditError, match="note for each failed dimension: solution"):
        services.submit_rating(rating=rating, verdicts={"question": True, "answer": True, "solution": False},
                               notes={}, by=inspector)  # fmt: skip
    with pytest.raises(services.AuditError, match="rate each of"):
        services.submit_rating(rating=rating, verdicts={"question": True}, notes={}, by=inspector)
    assert Rating.objects.get(pk=rating.pk).submitted is None


def test_it_refuses_someone_elses_rating_and_a_closed_audit(audit, inspector, english):
    rating = mine(audit, inspector).first()
    other = Rating.objects.filter(item=rating.item).exclude(inspector=inspector).first()
    with pytest.raises(services.AuditError, match="not in your queue"):
        services.submit_rating(rating=other, verdicts=dict.fromkeys(["question", "answer", "solution"], True),
                               notes={}, by=inspector)  # fmt: skip
    services.close_audit(audit=audit, by=inspector)
    with pytest.raises(services.AuditError, match="closed"):
        rate(rating)


def test_two_inspectors_rating_the_same_item_at_once_both_count(audit, inspector, login, client):
    rating = mine(audit, inspector).first()
    other = Rating.objects.filter(item=rating.item).exclude(inspector=inspector).select_related("inspector").first()
    url = reverse("review:rate", args=[rating.item_id])
    first, second = login(inspector), None
    assert first.get(url).status_code == 200
    from django.test import Client

    second = Client()
    second.force_login(other.inspector, backend="django.contrib.auth.backends.ModelBackend")
    assert second.get(url).status_code == 200  # both have the page open
    first.post(url, ALL_PASS)
    second.post(url, {**ALL_PASS, "solution": "fail", "solution_note": "第二步错误"})
    saved = {r.inspector_id: r.verdicts["solution"] for r in Rating.objects.filter(item=rating.item).submitted()}
    assert saved == {inspector.pk: True, other.inspector_id: False}


def test_the_rating_page_shows_the_item_with_figures_and_latex(audit, inspector, login):
    item = audit.items.get(question__hash_id__startswith="q")
    page = login(inspector).get(reverse("review:rate", args=[item.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "<img src=" in html and "$x^2=4$" in html and "data-math" in html
    assert html.count('class="dimension"') == 3


def test_the_rating_page_saves_and_moves_to_the_next_item(audit, inspector, login, english):
    client = login(inspector)
    items = list(mine(audit, inspector).order_by("item__position").values_list("item_id", flat=True))
    response = client.post(reverse("review:rate", args=[items[0]]), ALL_PASS)
    assert response.status_code == 302 and response["Location"] == reverse("review:rate", args=[items[1]])
    bad = client.post(reverse("review:rate", args=[items[1]]), {**ALL_PASS, "answer": "fail"})
    assert bad.status_code == 400 and "failed dimension" in str(bad.context["form"].non_field_errors())
    assert mine(audit, inspector).submitted().count() == 1
    for item_id in items[1:]:
        response = client.post(reverse("review:rate", args=[item_id]), ALL_PASS)
    assert response["Location"] == reverse("review:audit", args=[audit.pk])  # queue empty
    again = client.get(reverse("review:rate", args=[items[0]]))
    assert b'id="already-rated"' in again.content
    assert again.context["form"].initial == {**ALL_PASS, "question_note": "", "answer_note": "", "solution_note": ""}


def test_an_item_not_in_the_inspectors_queue_is_a_404(audit, inspector, login, researcher):
    from k12vista.roles import Role
    from tests.conftest import make_person

    stranger = make_person("iris", Role.INSPECTOR)
    item = audit.items.first()
    client = login(stranger)
    assert client.get(reverse("review:rate", args=[item.pk])).status_code == 404
    assert client.post(reverse("review:rate", args=[item.pk]), ALL_PASS).status_code == 404
    api = client.post(f"/api/inspect/items/{item.pk}/rating/", {"verdicts": {}}, content_type="application/json")
    assert api.status_code == 404
    assert login(researcher).get(reverse("review:rate", args=[item.pk])).status_code == 403
    assert not Rating.objects.filter(inspector=stranger).exists()


def test_it_rates_over_the_api(audit, inspector, login, english):
    item_id = mine(audit, inspector).first().item_id
    client = login(inspector)
    url = f"/api/inspect/items/{item_id}/rating/"
    body = {"verdicts": {"question": True, "answer": True, "solution": False}, "notes": {"solution": "缺少一步"}}
    response = client.post(url, body, content_type="application/json")
    assert response.status_code == 200 and response.json()["verdicts"]["solution"] is False
    body["verdicts"]["solution"] = True
    assert client.post(url, body, content_type="application/json").json()["verdicts"]["solution"] is True
    assert Rating.objects.filter(item_id=item_id, inspector=inspector).count() == 1
    bad = client.post(url, {"verdicts": {"question": True}}, content_type="application/json")
    assert bad.status_code == 400 and "rate each of" in bad.json()["detail"]


def test_pebench_items_are_rated_on_question_solution_and_step_labels(inspector, login, annotator):
    cot = make_cot(reference_solution="由勾股定理 $AC=5$")
    label_steps(cot, ["CS", "CE", "CS"], source="gold", rater="gold", explanation="算错了")
    add_to_pebench(cot)
    audit = audit_of({"kind": "pebench"}, inspectors=three_inspectors(inspector), per_stratum=5)
    rating = mine(audit, inspector).get()
    page = login(inspector).get(reverse("review:rate", args=[rating.item_id]))
    assert b'data-dimension="step_labels"' in page.content and b'data-label="CE"' in page.content
    rate(rating, fail=["step_labels"])
    assert Rating.objects.get(pk=rating.pk).verdicts == {"question": True, "solution": True, "step_labels": False}


def test_the_home_page_is_the_inspectors_queue(audit, inspector, login):
    client = login(inspector)
    page = client.get(reverse("review:home"))
    assert f'data-audit="{audit.pk}"'.encode() in page.content and b'data-pending="3"' in page.content
    assert b'id="rate-next"' in page.content
    rate(mine(audit, inspector).first())
    assert b'data-pending="2"' in client.get(reverse("review:home")).content
    next_page = client.get(reverse("review:next", args=[audit.pk]))
    assert next_page.status_code == 302 and "/rate/" in next_page["Location"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_saves_of_one_item_are_all_kept(inspector):
    """Real threads, each on its own connection: three inspectors and a second tab of one
    of them save at the same moment; every inspector's rating is kept, once."""
    import threading

    from django.db import connection, connections

    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises writers on the whole file; this checks row locks on PostgreSQL")
    bulk_questions(1, subjects=["math"])
    audit = audit_of(inspectors=three_inspectors(inspector), per_stratum=1)
    ratings = list(Rating.objects.filter(item__audit=audit).select_related("item", "inspector"))
    start = threading.Barrier(len(ratings) + 1)
    errors = []

    def save(rating, fail):
        try:
            start.wait()
            rate(rating, fail=fail)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    jobs = [(r, ("solution",) if i == 0 else ()) for i, r in enumerate(ratings)] + [(ratings[0], ())]
    threads = [threading.Thread(target=save, args=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    saved = Rating.objects.filter(item__audit=audit)
    assert saved.count() == 3 and saved.submitted().count() == 3
    assert saved.get(pk=ratings[1].pk).verdicts["solution"] is True
