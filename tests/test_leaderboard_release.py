"""A leaderboard over one release: runs over the release's questions only, the page and downloads say so,
and a run over another question set is left out (counted) or, with more filters, marked."""

from unittest import mock

import pytest

from annotation.models import Question, Release, ReleaseItem
from inference import services
from k12vista.models import Job
from tests.annotation_factories import make_question
from tests.test_inference_views import answer, make_endpoint, scored

pytestmark = pytest.mark.django_db


def published_release(questions, version=1) -> Release:
    release = Release.objects.create(version=version, name="K12Vista", status=Release.Status.PUBLISHED, licence="CC")
    ReleaseItem.objects.bulk_create(
        ReleaseItem(release=release, question=q, hash_id=q.hash_id, version=q.version, content_hash="x", content={})
        for q in questions
    )
    return release


def scored_run(user, name, filters, questions):
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        run = services.start_inference_run(
            endpoint=make_endpoint(name), mode="step_by_step", filters=filters, user=user
        )
    Job.objects.filter(pk=run.job_id).update(status=Job.Status.SUCCEEDED)
    for q in questions:
        answer(run, question=q)
    scored(run, labels=("CS",), score=1.0)
    return run


@pytest.fixture
def boards(researcher):
    inside = [make_question(subject="math") for _ in range(2)]
    outside = make_question(subject="physics")
    release = published_release(inside)
    scored_run(researcher, "on-release", {"release": 1}, inside)
    scored_run(researcher, "release-math", {"release": 1, "subject": "math"}, inside)
    scored_run(researcher, "whole-bank", {}, [*inside, outside])
    return release


def test_a_release_is_a_question_set_runs_can_cover(boards):
    assert set(Question.objects.matching({"release": 1})) == set(Question.objects.filter(subject="math"))
    assert not Question.objects.matching({"release": "x"}).exists()


def test_the_board_over_a_release_shows_only_its_runs_and_says_so(boards, researcher, login):
    client = login(researcher)
    everything = client.get("/research/leaderboard/?mode=step_by_step").content.decode()
    assert "whole-bank" in everything and "on-release" in everything
    body = client.get("/research/leaderboard/?mode=step_by_step&release=1").content.decode()
    assert 'id="release-board"' in body and "whole-bank" not in body
    assert "on-release" in body and "release-math" in body
    assert body.count("data-other-question-set") == 1  # the run with more filters than the release
    assert "1 run over another question set is left out" in body or "1 个" in body


def test_the_downloads_name_the_release(boards, researcher, login):
    client = login(researcher)
    csv = client.get("/research/leaderboard/download/csv/?release=1").content.decode()
    assert "release=1" in csv and "whole-bank" not in csv and "on-release" in csv


def test_the_run_form_offers_published_releases(boards, researcher, login):
    body = login(researcher).get("/research/runs/new/").content.decode()
    assert 'name="release"' in body and "v1 K12Vista" in body
