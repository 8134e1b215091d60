"""Who reads whose runs, one rule for the pages and the API (docs/security.md, *Runs*): a run, its
answers and their scoring are read by who started it, by administrators, and by inspectors (the
experts who check the checkers score any run's sampled answers); another researcher gets a 404
everywhere, the expert-scoring screens included."""

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from k12vista.roles import Role
from pem.models import ExpertScore
from tests.annotation_factories import make_question
from tests.conftest import make_person
from tests.pem_factories import answer, make_run

pytestmark = pytest.mark.django_db

SECRET_ANSWER = "RUN-ANSWER-SECRET-ww31"


@pytest.fixture
def run(researcher):
    run = make_run()
    run.created_by = researcher
    run.save(update_fields=["created_by"])
    response = answer(run, make_question(), SECRET_ANSWER)
    return run, response


def reads(user, run, response) -> dict[str, bool]:
    """Whether each page and API route shows this person the run's answers."""
    from django.test import Client

    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    api = APIClient()
    api.force_authenticate(user)
    shown = {
        "run page": client.get(reverse("inference:run", args=[run.pk])),
        "expert page": client.get(reverse("pem:expert_run", args=[run.pk])),
        "api run": api.get(reverse("inference_api:run", args=[run.pk])),
        "api answers": api.get(reverse("inference_api:responses", args=[run.pk])),
    }
    listed = client.get(reverse("pem:expert_runs"))
    result = {name: r.status_code == 200 for name, r in shown.items()}
    assert all(r.status_code in (200, 403, 404) for r in shown.values()), {n: r.status_code for n, r in shown.items()}
    result["expert list"] = (
        listed.status_code == 200 and reverse("pem:expert_run", args=[run.pk]).encode() in listed.content
    )
    scored = client.post(reverse("pem:expert_score", args=[response.pk]), {"score": "1"})
    result["expert score"] = ExpertScore.objects.filter(response=response, expert=user).exists()
    assert scored.status_code in (302, 403, 404)
    return result


def test_another_researcher_reads_nothing_of_a_run_anywhere(run):
    other = make_person("rob", Role.RESEARCHER)
    assert reads(other, *run) == dict.fromkeys(
        ["run page", "expert page", "api run", "api answers", "expert list", "expert score"], False
    )


def test_the_researcher_who_started_it_reads_it_everywhere(run, researcher):
    assert all(reads(researcher, *run).values())


def test_administrators_read_every_run(run, administrator):
    got = reads(administrator, *run)
    assert got["run page"] and got["api run"] and got["api answers"]


def test_inspectors_score_any_runs_answers_as_experts(run, inspector):
    got = reads(inspector, *run)
    assert got["expert page"] and got["expert list"] and got["expert score"]
    assert not (got["run page"] or got["api run"])  # the research screens are not theirs (their role)


def test_an_inspector_who_also_researches_sees_the_same_runs_on_both(run, inspector):
    both = make_person("ines", Role.INSPECTOR, Role.RESEARCHER)
    assert all(reads(both, *run).values())
