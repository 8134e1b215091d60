"""The benchmark screens: researchers and administrators only; preview, draw,
units review actions, release build/publish/download/compare through the pages."""

import pytest
from django.urls import reverse

from annotation import knowledge, releases
from annotation.models import CandidateSet, CoreUnit, KnowledgePoint, Question, Release
from k12vista.jobs import execute_job
from tests.annotation_factories import make_question
from tests.review_factories import bulk_questions

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


PAGES = ["annotation:benchmark", "annotation:units"]


@pytest.mark.parametrize("name", PAGES)
def test_only_researchers_and_admins_see_the_benchmark_pages(name, personas, login):
    for role, person in personas.items():
        status = login(person).get(reverse(name)).status_code
        assert status == (200 if role in ("researcher", "admin") else 403), role


def test_the_preview_shows_each_cell_and_its_shortfall(researcher, login):
    bulk_questions(4, subjects=["math"])
    page = login(researcher).get(reverse("annotation:benchmark"), {"per_cell": 10}).content.decode()
    assert 'data-cell="math/9/multiple_choice" data-shortfall="6"' in page


def test_drawing_from_the_page_starts_the_job_with_the_seed(researcher, login):
    bulk_questions(4, subjects=["math"])
    response = login(researcher).post(reverse("annotation:draw_create"), {"per_cell": 2, "seed": 9, "name": "d"})
    candidate = CandidateSet.objects.get()
    assert response.status_code == 302 and candidate.seed == 9 and candidate.targets["per_cell"] == 2
    execute_job(candidate.job_id)
    page = login(researcher).get(reverse("annotation:candidate_set", args=[candidate.pk])).content.decode()
    assert 'data-cell="math/9/multiple_choice" data-drawn="2"' in page


def test_units_are_merged_and_renamed_from_the_review_screen(researcher, login):
    for name in ("勾股定理", "勾股定理的应用", "解一元二次方程", "一元二次方程的解法"):
        KnowledgePoint.objects.create(subject="math", name=name)
    knowledge.cluster_subject("math", knowledge.ClusterParams(points_per_unit=2))
    a, b = CoreUnit.objects.order_by("id")[:2]
    client = login(researcher)
    page = client.get(reverse("annotation:units"), {"subject": "math"}).content.decode()
    assert f'data-unit="{a.pk}"' in page
    client.post(reverse("annotation:unit_action", args=[a.pk]), {"action": "merge", "other": [b.pk]})
    client.post(reverse("annotation:unit_action", args=[a.pk]), {"action": "rename", "name": "数学基础"})
    a.refresh_from_db()
    assert a.name == "数学基础" and a.points.count() == 4 and CoreUnit.objects.count() == 1
    # Hostile input is a 404 or a message, never a 500.
    assert (
        client.post(reverse("annotation:unit_action", args=[a.pk]), {"action": "merge", "other": ["x"]}).status_code
        == 302
    )
    assert client.post(reverse("annotation:unit_action", args=[a.pk]), {"action": "nope"}).status_code == 404


def published(researcher) -> Release:
    q = make_question(researcher)
    Question.objects.filter(pk=q.pk).update(status=Question.Status.AUDITED)
    candidate = CandidateSet.objects.create(name="c", seed=1, bank_fingerprint="x")
    candidate.questions.set([q])
    release = releases.start_release(candidate_set=candidate, by=researcher)
    execute_job(release.job_id)
    return release


def test_files_are_downloaded_with_their_checksum_by_researchers_only(researcher, annotator, inspector, login):
    release = published(researcher)
    url = reverse("annotation:release_file", args=[release.version, "reference"])
    for outsider in (annotator, inspector):
        assert login(outsider).get(url).status_code == 403
    response = login(researcher).get(url)
    body = b"".join(response.streaming_content)
    import hashlib

    assert response.status_code == 200 and response["X-Checksum-SHA256"] == hashlib.sha256(body).hexdigest()
    assert login(researcher).get(reverse("annotation:release_file", args=[release.version, "x"])).status_code == 404


def test_publishing_from_the_page_and_reading_the_diff(researcher, login):
    v1 = published(researcher)
    client = login(researcher)
    assert client.get(reverse("annotation:release_publish", args=[1])).status_code == 405
    client.post(reverse("annotation:release_publish", args=[1]))
    assert Release.objects.get(pk=v1.pk).status == "published"
    question = Question.objects.get()
    from annotation import services

    services.edit_question(question=question, changes={"text": "新题干"}, user=researcher,
                           expected_version=question.version)  # fmt: skip
    v2 = releases.start_release(candidate_set=v1.candidate_set, by=researcher)
    execute_job(v2.job_id)
    page = client.get(reverse("annotation:release_compare"), {"old": 1, "new": 2}).content.decode()
    assert 'data-changed="1"' in page and "+新题干" in page
    assert client.get(reverse("annotation:release_compare"), {"old": "x", "new": 2}).status_code == 404
