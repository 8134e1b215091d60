"""The benchmark API and management commands call the same services as the pages."""

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import CandidateSet, KnowledgePoint, Question, Release
from k12vista.jobs import execute_job
from tests.annotation_factories import make_question
from tests.review_factories import bulk_questions

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


def test_the_allocation_and_the_draw_through_the_api(researcher, annotator, client):
    bulk_questions(3, subjects=["math"])
    client.force_login(annotator)
    assert client.get(reverse("annotation_api:allocation")).status_code == 403
    client.force_login(researcher)
    body = client.get(reverse("annotation_api:allocation"), {"per_cell": 5}).json()
    assert body["cells"][0]["shortfall"] == 2
    assert client.get(reverse("annotation_api:allocation"), {"per_cell": "x"}).status_code == 400
    made = client.post(reverse("annotation_api:draws"), {"targets": {"per_cell": 2}, "seed": 3},
                       content_type="application/json").json()  # fmt: skip
    execute_job(made["job"])
    found = client.get(reverse("annotation_api:draw", args=[made["id"]])).json()
    assert found["seed"] == 3 and found["report"]["total"] == 2


def test_a_release_through_the_api_lists_the_questions_it_holds(researcher, client):
    q = make_question(researcher)
    Question.objects.filter(pk=q.pk).update(status="audited")
    candidate = CandidateSet.objects.create(name="c", seed=1, bank_fingerprint="x")
    candidate.questions.set([q])
    client.force_login(researcher)
    made = client.post(reverse("annotation_api:release_create", args=[candidate.pk]), {},
                       content_type="application/json").json()  # fmt: skip
    execute_job(made["job"])
    published = client.post(reverse("annotation_api:release_publish", args=[made["version"]])).json()
    assert published["release_status"] == "published" and len(published["files"]) == 3
    items = client.get(reverse("annotation_api:release_items", args=[made["version"]])).json()
    assert [i["hash_id"] for i in items["results"]] == [q.hash_id]
    again = client.post(reverse("annotation_api:release_publish", args=[made["version"]]))
    assert again.status_code == 400


def test_the_commands_cluster_draw_and_release(researcher, capsys):
    for name in ("勾股定理", "勾股定理的应用"):
        KnowledgePoint.objects.create(subject="math", name=name)
    call_command("cluster_knowledge", "--subject", "math", "--by", researcher.username)
    assert json.loads(capsys.readouterr().out)["subjects"][0]["units"] == 1
    bulk_questions(2, subjects=["math"], status=Question.Status.AUDITED)
    call_command("draw_benchmark", "--per-cell", "5")
    assert json.loads(capsys.readouterr().out)["short_cells"] == 1
    call_command("draw_benchmark", "--per-cell", "5", "--draw", "--seed", "1", "--by", researcher.username)
    drawn = json.loads(capsys.readouterr().out)
    assert drawn["total"] == 2
    call_command("release_benchmark", "--candidate-set", str(drawn["candidate_set"]), "--publish", "--by",
                 researcher.username)  # fmt: skip
    assert json.loads(capsys.readouterr().out)["status"] == "published"
    assert Release.objects.get().status == "published"
