from unittest import mock

import pytest

from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from pem import jobs
from pem.build import build_pebench, largest_remainder
from pem.models import ChainOfThought, PEBenchBuild, PEBenchItem
from pem.services import PEBenchError
from tests.pem_factories import add_to_pebench, make_cot

FOUR_STEPS = ["一", "二", "三", "四"]


def population(**sizes):
    """``math_multiple_choice_middle=6`` makes six four-step chains in that stratum."""
    made = {}
    for name, count in sizes.items():
        subject, qtype, stage = name.split("__")
        made[name] = [make_cot(steps=FOUR_STEPS, subject=subject, qtype=qtype, stage=stage) for _ in range(count)]
    return made


def chosen(build: PEBenchBuild) -> list[int]:
    return sorted(build.items.values_list("cot_id", flat=True))


@pytest.mark.parametrize(
    ("available", "target", "seats"),
    [
        ({"a": 50, "b": 30, "c": 20}, 10, {"a": 5, "b": 3, "c": 2}),
        # 7 * (5, 3, 2) / 10 = 3.5, 2.1, 1.4: floors 3, 2, 1 and the largest remainder (a) takes the last seat.
        ({"a": 5, "b": 3, "c": 2}, 7, {"a": 4, "b": 2, "c": 1}),
        # Equal remainders go by stratum name, so the result never depends on dict order.
        ({"b": 1, "a": 1}, 1, {"a": 1, "b": 0}),
        # 50 / 101 of a seat is a smaller remainder than b's 49.5: a tiny stratum may get none.
        ({"a": 1, "b": 100}, 50, {"a": 0, "b": 50}),
        ({"a": 3, "b": 2}, 99, {"a": 3, "b": 2}),
    ],
)
def test_it_shares_seats_by_largest_remainder(available, target, seats):
    assert largest_remainder(available, target) == seats
    assert sum(seats.values()) == min(target, sum(available.values()))


@pytest.mark.django_db
def test_it_allocates_in_proportion_to_each_stratum(researcher):
    made = population(
        math__multiple_choice__middle=12, physics__free_response__high=6, biology__fill_in_blank__middle=2
    )
    build = build_pebench(target_size=10, min_steps=3, seed=1, user=researcher)
    strata = build.counts["strata"]
    assert strata["math|multiple_choice|middle"] == {"available": 12, "taken": 6}
    assert strata["physics|free_response|high"] == {"available": 6, "taken": 3}
    assert strata["biology|fill_in_blank|middle"] == {"available": 2, "taken": 1}
    assert build.counts["taken"] == 10 and build.counts["shortfall"] == 0
    assert build.strata == ["subject", "qtype", "stage"] and build.created_by == researcher
    math_ids = {cot.pk for cot in made["math__multiple_choice__middle"]}
    assert len(math_ids & set(chosen(build))) == 6


@pytest.mark.django_db
def test_it_chooses_the_same_chains_for_the_same_seed(researcher):
    population(math__multiple_choice__middle=20, physics__free_response__high=20)
    first = build_pebench(target_size=8, min_steps=3, seed=42, user=researcher)
    first_ids = chosen(first)
    PEBenchItem.objects.all().delete()
    ChainOfThought.objects.update(status=ChainOfThought.Status.NEW)
    again = build_pebench(target_size=8, min_steps=3, seed=42, user=researcher)
    assert chosen(again) == first_ids
    PEBenchItem.objects.all().delete()
    other = build_pebench(target_size=8, min_steps=3, seed=7, user=researcher)
    assert chosen(other) != first_ids


@pytest.mark.django_db
def test_it_leaves_out_training_data_short_chains_and_items_already_in(researcher):
    training = make_cot(steps=FOUR_STEPS, in_training_data=True)
    short = make_cot(steps=["一", "二"])
    already = make_cot(steps=FOUR_STEPS)
    add_to_pebench(already)
    fresh = [make_cot(steps=FOUR_STEPS) for _ in range(3)]
    build = build_pebench(target_size=10, min_steps=3, seed=0, user=researcher)
    assert chosen(build) == sorted(cot.pk for cot in fresh)
    assert build.counts["shortfall"] == 7
    for cot in (training, short):
        assert not PEBenchItem.objects.filter(cot=cot).exists()
    assert PEBenchItem.objects.get(cot=already).build is None


@pytest.mark.django_db
def test_it_opens_labelling_for_every_chain_it_takes(researcher):
    population(math__multiple_choice__middle=4)
    build = build_pebench(target_size=3, min_steps=3, seed=0, user=researcher)
    statuses = ChainOfThought.objects.filter(pk__in=chosen(build)).values_list("status", flat=True)
    assert list(statuses) == [ChainOfThought.Status.LABELLING] * 3
    assert ChainOfThought.objects.filter(status=ChainOfThought.Status.NEW).count() == 1


@pytest.mark.django_db
def test_it_stratifies_on_other_fields_when_asked(researcher):
    for model in ("a", "a", "a", "b"):
        make_cot(steps=FOUR_STEPS, model_name=model)
    build = build_pebench(target_size=2, min_steps=3, strata=["model_name"], seed=0, user=researcher)
    assert build.counts["strata"] == {"a": {"available": 3, "taken": 2}, "b": {"available": 1, "taken": 0}}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strata": ["difficulty"]}, "cannot stratify on difficulty"),
        ({"target_size": 0}, "at least 1"),
        ({"min_steps": 9}, "no chain of thought is eligible"),
    ],
)
def test_it_refuses_a_build_it_cannot_make(researcher, kwargs, message, english):
    population(math__multiple_choice__middle=2)
    with pytest.raises(PEBenchError, match=message):
        build_pebench(**({"target_size": 5, "min_steps": 3, "seed": 0, "user": researcher} | kwargs))
    assert not PEBenchBuild.objects.exists()


# --- the screens ------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/pem/data/", "/pem/data/chains/"])
def test_it_shows_the_data_screens_to_researchers_and_admins_only(url, personas, login, client):
    for role, user in personas.items():
        expected = 200 if role in (Role.RESEARCHER, Role.ADMIN) else 403
        assert login(user).get(url).status_code == expected, role
    client.logout()
    assert client.get(url).status_code == 302


@pytest.mark.django_db
def test_it_links_pebench_in_the_menu_for_researchers_only(researcher, annotator, login):
    assert b'id="nav-pebench"' in login(researcher).get("/pem/data/").content
    assert b'id="nav-pebench"' not in login(annotator).get("/annotate/").content


@pytest.mark.django_db
def test_it_builds_pebench_from_the_form_as_a_job(researcher, login):
    population(math__multiple_choice__middle=5)
    client = login(researcher)
    data = {"target_size": 3, "min_steps": 3, "strata": ["subject", "stage"], "seed": 9}
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        response = client.post("/pem/data/build/", data)
    job = Job.objects.get(kind=jobs.BUILD)
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    build = PEBenchBuild.objects.get()
    assert build.job == job and build.created_by == researcher and build.strata == ["subject", "stage"]
    job.refresh_from_db()
    assert job.result["build_id"] == build.pk and job.result["taken"] == 3
    page = client.get("/pem/data/").content.decode()
    assert f'data-build="{build.pk}"' in page and "<strong>3</strong>" in page


@pytest.mark.django_db
def test_it_finds_its_build_when_the_job_runs_again(researcher):
    population(math__multiple_choice__middle=5)
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        job = jobs.start_build(target_size=2, min_steps=3, strata=["subject"], seed=1, user=researcher)
    execute_job(job.pk)
    Job.objects.filter(pk=job.pk).update(status=Job.Status.QUEUED)  # as if the worker died before finishing
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    assert PEBenchBuild.objects.count() == 1 and PEBenchItem.objects.count() == 2


@pytest.mark.django_db
def test_it_says_why_a_build_was_refused(researcher, login):
    client = login(researcher)
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        client.post("/pem/data/build/", {"target_size": 3, "min_steps": 3, "strata": ["subject"], "seed": 1})
    job = Job.objects.get(kind=jobs.BUILD)
    assert execute_job(job.pk) == Job.Status.FAILED
    job.refresh_from_db()
    assert "no chain of thought is eligible" in job.error and not PEBenchBuild.objects.exists()
    response = client.post("/pem/data/build/", {"target_size": -1, "min_steps": 3, "seed": 1}, follow=True)
    assert response.status_code == 200 and Job.objects.count() == 1
    assert client.get("/pem/data/build/").status_code == 405


@pytest.mark.django_db
def test_it_lists_chains_with_filters_and_counts_by_status(researcher, login):
    physics = make_cot(steps=FOUR_STEPS, subject="physics", stage="high", key="phys-1")
    make_cot(steps=FOUR_STEPS, subject="physics", stage="high", key="phys-2", status=ChainOfThought.Status.GOLD)
    make_cot(steps=FOUR_STEPS, key="math-1")
    add_to_pebench(physics)
    client = login(researcher)
    page = client.get("/pem/data/chains/", {"subject": "physics", "status": "new"}).content.decode()
    assert 'data-key="phys-1"' in page and 'data-key="phys-2"' not in page and 'data-key="math-1"' not in page
    # The counts ignore the status filter: where do the physics chains stand?
    assert '<strong data-count="new">1</strong>' in page and '<strong data-count="gold">1</strong>' in page
    assert '<strong data-count="labelling">0</strong>' in page
    in_pebench = client.get("/pem/data/chains/", {"pebench": "yes"}).content.decode()
    assert 'data-key="phys-1"' in in_pebench and 'data-key="math-1"' not in in_pebench


@pytest.mark.django_db
def test_it_pages_the_chain_list_with_htmx(researcher, login, monkeypatch):

    monkeypatch.setattr("k12vista.pagination.PAGE_SIZE", 2)
    cots = [make_cot(steps=FOUR_STEPS) for _ in range(3)]
    client = login(researcher)
    first = client.get("/pem/data/chains/").content.decode()
    assert f"after={cots[1].pk}" in first and f'data-key="{cots[2].key}"' not in first
    more = client.get("/pem/data/chains/", {"after": cots[1].pk}, headers={"HX-Request": "true"}).content.decode()
    assert f'data-key="{cots[2].key}"' in more and "<html" not in more and "more-row" not in more


@pytest.mark.django_db
def test_it_loads_demo_chains_into_pebench_once(settings, tmp_path):
    from django.core.management import call_command

    settings.DEMO_MODE, settings.MEDIA_ROOT = True, tmp_path / "media"
    call_command("load_demo")
    call_command("load_demo")
    cots = ChainOfThought.objects.all()
    assert cots.count() == 8 and cots.in_pebench().count() == 8 and PEBenchBuild.objects.count() == 1
    assert set(cots.values_list("status", flat=True)) == {ChainOfThought.Status.LABELLING}
    assert not cots.filter(question__isnull=True).exists()
