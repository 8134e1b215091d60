"""A number in a query or a form is read only when int() reads it: str.isdigit() also takes
superscripts and other digits int() refuses ("²"), which reached int() and answered 500."""

import pytest

from annotation.models import Question
from inference.leaderboard_views import chosen_release

pytestmark = pytest.mark.django_db

NOT_A_NUMBER = "²"  # isdigit() is True, int() raises ValueError


def test_the_question_filter_reads_a_superscript_release_as_no_release():
    assert not Question.objects.matching({"release": NOT_A_NUMBER}).exists()


def test_the_leaderboard_reads_a_superscript_release_as_every_run(rf):
    assert chosen_release(rf.get("/research/leaderboard/", {"release": NOT_A_NUMBER})) is None


def test_the_leaderboard_page_answers_a_superscript_release(researcher, login):
    client = login(researcher)
    assert client.get(f"/research/leaderboard/?release={NOT_A_NUMBER}").status_code == 200


def test_the_pebench_release_comparison_refuses_superscript_versions(researcher, login, api):
    assert login(researcher).get(f"/pem/releases/compare/?old={NOT_A_NUMBER}&new=1").status_code == 404
    assert api(researcher).get(f"/api/pem/releases/compare/?old=1&new={NOT_A_NUMBER}").status_code == 400


def test_the_inspectors_items_refuse_a_superscript_audit(inspector, api):
    assert api(inspector).get(f"/api/inspect/my-items/?audit={NOT_A_NUMBER}").status_code == 400


def test_the_difficulty_page_ignores_a_superscript_job(administrator, login):
    # 400: no runs chosen, as without the job; the job is not looked for.
    assert login(administrator).get(f"/research/difficulty/?job={NOT_A_NUMBER}").status_code == 400
