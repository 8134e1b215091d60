"""Nothing succeeds while doing nothing (issue 29): references to objects that do not exist and empty
inputs are refused before a job starts, with a message naming what is missing."""

import pytest
from rest_framework.test import APIClient

from annotation.models import CandidateSet, Question
from inference import services
from inference.models import AssistRun, InferenceRun, ModelEndpoint, Response, ScoringRun
from k12vista.models import Job
from pem.models import FilterRun, PanelRun, SplitRun, StepLabel, TrainingExport
from pem.training import exports, filters, train
from tests.annotation_factories import make_question
from tests.pem_factories import answer, judge, make_run, make_scoring_run
from tests.test_pem800k_export import kept_run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]


@pytest.fixture
def rita(api, researcher, no_broker):
    """The researcher's API client; the jobs it starts send no message."""
    return api(researcher)


def test_a_filter_run_on_a_panel_that_does_not_exist_is_refused_naming_the_known_ones(rita, researcher, english):
    kept_run(researcher)  # labels of the import "pem" exist
    response = rita.post("/api/pem/training/filter-runs/", {"source": "panel", "rater": "no-such-panel"}, format="json")
    assert response.status_code == 400
    assert "no-such-panel" in response.json()["rater"][0]
    response = rita.post("/api/pem/training/filter-runs/", {"source": "imported", "rater": "nope"}, format="json")
    assert response.status_code == 400 and "pem" in response.json()["rater"][0]  # the known imports are named
    assert FilterRun.objects.count() == 1  # only kept_run's own


def test_exporting_a_filter_run_that_kept_nothing_is_refused(rita, researcher, english):
    run, _ = kept_run(researcher)
    run.kept = 0
    run.save(update_fields=["kept"])
    response = rita.post("/api/pem/training/exports/", {"filter_run": run.pk, "formats": ["trl"]}, format="json")
    assert response.status_code == 400 and "kept no chains" in response.json()["filter_run"][0]
    assert not TrainingExport.objects.exists()
    with pytest.raises(exports.ExportError):
        exports.start_export(filter_run=run, user=researcher)


def test_an_export_whose_chains_went_meanwhile_fails_instead_of_writing_nothing(researcher, english):
    run, cots = kept_run(researcher)
    export = exports.start_export(filter_run=run, user=researcher, formats_wanted=["trl"])
    for cot in cots:
        cot.delete()
    with pytest.raises(exports.ExportError, match="no chains left"):
        exports.write_export(export)


def test_training_on_an_export_without_records_is_refused_before_the_job(rita, researcher, english):
    run, _ = kept_run(researcher)
    empty = TrainingExport.objects.create(filter_run=run, formats=["trl"], status=TrainingExport.Status.DONE,
                                          records=0, created_by=researcher, min_pixels=1, max_pixels=2)  # fmt: skip
    response = rita.post("/api/pem/training/runs/", {"export": empty.pk, "base_model": "x"}, format="json")
    assert response.status_code == 400 and "no records" in response.json()["export"][0]
    with pytest.raises(train.TrainingError, match="no records"):
        train.start_training(export=empty, base_model="x", hyperparameters=None, user=researcher)


def test_labels_of_a_person_still_refused_and_imported_labels_still_run(researcher):
    with pytest.raises(filters.FilterError):
        filters.start_filter_run(source=StepLabel.Source.PERSON, rater="x", params=None, user=researcher)
    run, _ = kept_run(researcher)
    assert run.kept == 3


def test_clustering_without_knowledge_points_is_refused_before_a_job(researcher, english):
    from annotation import knowledge

    api = APIClient()
    api.force_authenticate(researcher)
    response = api.post("/api/benchmark/clustering/", {"subjects": ["math"]}, format="json")
    assert response.status_code == 400 and "no knowledge points" in response.json()["detail"]
    with pytest.raises(knowledge.KnowledgeError, match="no knowledge points"):
        knowledge.start_clustering(by=researcher)
    assert not Job.objects.exists()


# --- runs, scoring, splits and panels over nothing (issue 29) -------------------------------


@pytest.fixture
def local_servers(settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*", "http://localhost:*"]


def an_endpoint(name: str = "student") -> ModelEndpoint:
    return services.save_endpoint(endpoint=ModelEndpoint(name=name, base_url="http://127.0.0.1:8000/v1",
                                                         model_name=name), user=None)  # fmt: skip


def unanswered_run(researcher) -> InferenceRun:
    """A finished step-by-step run of the researcher's whose only question failed: nothing answered."""
    run = make_run(an_endpoint("unanswered"))
    InferenceRun.objects.filter(pk=run.pk).update(created_by=researcher)
    answer(run, make_question(), "", status=Response.Status.FAILED)
    return run


def test_an_inference_run_over_filters_matching_no_question_is_refused(rita, researcher, local_servers, english):
    endpoint = an_endpoint()
    response = rita.post("/api/runs/", {"endpoint": endpoint.pk, "mode": "direct"}, format="json")
    assert response.status_code == 400 and "no questions" in response.json()["filters"][0]
    make_question(subject="math")
    response = rita.post("/api/runs/", {"endpoint": endpoint.pk, "mode": "direct", "filters": {"subject": "physics"}},
                         format="json")  # fmt: skip
    assert response.status_code == 400 and "subject=physics" in response.json()["filters"][0]
    response = rita.post("/api/campaigns/", {"name": "c", "endpoints": [endpoint.pk], "mode": "direct",
                                             "filters": {"subject": "physics"}}, format="json")  # fmt: skip
    assert response.status_code == 400 and "subject=physics" in response.json()["filters"][0]
    assert not InferenceRun.objects.exists() and not Job.objects.exists()
    assert rita.post("/api/runs/", {"endpoint": endpoint.pk, "mode": "direct"}, format="json").status_code == 201


def test_scoring_a_split_and_a_panel_over_runs_with_no_answers_are_refused(rita, researcher, local_servers, english):
    run, judge_model = unanswered_run(researcher), an_endpoint("judge")
    response = rita.post(
        f"/api/runs/{run.pk}/scoring/", {"judge": judge_model.pk, "method": "judge_steps"}, format="json"
    )
    assert response.status_code == 400 and "no answers" in response.json()["detail"][0]
    response = rita.post("/api/pem/splits/", {"splitter": judge_model.pk, "runs": [run.pk]}, format="json")
    assert response.status_code == 400 and "no answers" in response.json()["runs"][0]
    response = rita.post("/api/pem/panels/", {"name": "p", "judges": [judge_model.pk], "runs": [run.pk]}, format="json")
    assert response.status_code == 400 and "no answers" in response.json()["runs"][0]
    assert not ScoringRun.objects.exists() and not SplitRun.objects.exists() and not PanelRun.objects.exists()
    assert not Job.objects.exists()


def test_chains_from_a_run_with_no_answer_are_refused(rita, researcher, english):
    run = unanswered_run(researcher)
    response = rita.post("/api/pem/data/from-run/", {"inference_run": run.pk}, format="json")
    assert response.status_code == 400 and "no answers" in response.json()["inference_run"][0]
    assert not Job.objects.exists()


def test_labels_from_a_scoring_run_without_judgments_or_chains_are_refused(rita, researcher, english):
    run = make_run(an_endpoint("student"))
    InferenceRun.objects.filter(pk=run.pk).update(created_by=researcher)
    answered = answer(run, make_question(), "步骤1：由 $x^2=4$ 得 $x=2$。\n最终答案：B")
    scoring_run = make_scoring_run(run)
    response = rita.post("/api/pem/data/from-scoring/", {"scoring_run": scoring_run.pk}, format="json")
    assert response.status_code == 400 and "no judgments" in response.json()["scoring_run"][0]
    judge(scoring_run, answered, [("由 $x^2=4$ 得 $x=2$。", "CS", "")])
    response = rita.post("/api/pem/data/from-scoring/", {"scoring_run": scoring_run.pk}, format="json")
    assert response.status_code == 400 and "make chains" in response.json()["scoring_run"][0]
    assert not Job.objects.exists()
    assert rita.post("/api/pem/data/from-run/", {"inference_run": run.pk}, format="json").status_code == 202


def test_a_draw_that_would_take_no_question_is_refused(rita, english):
    response = rita.post("/api/benchmark/draws/", {"targets": {"per_cell": 5}}, format="json")
    assert response.status_code == 400 and "no eligible question" in response.json()["targets"][0]
    Question.objects.filter(pk=make_question().pk).update(status=Question.Status.AUDITED)
    response = rita.post("/api/benchmark/draws/", {"targets": {"per_cell": 0, "cover_knowledge": False}}, format="json")
    assert response.status_code == 400 and "every target is 0" in response.json()["targets"][0]
    assert not CandidateSet.objects.exists() and not Job.objects.exists()
    assert rita.post("/api/benchmark/draws/", {"targets": {"per_cell": 5}}, format="json").status_code == 202


def test_an_assist_run_over_filters_matching_no_question_is_refused(rita, local_servers, english):
    endpoint = an_endpoint()
    make_question(subject="math")
    given = {"kind": "check_structure", "endpoint": endpoint.pk, "filters": {"subject": "physics"}}
    response = rita.post("/api/assist/", given, format="json")
    assert response.status_code == 400 and "subject=physics" in response.json()["filters"][0]
    assert not AssistRun.objects.exists() and not Job.objects.exists()
    assert rita.post("/api/assist/", {**given, "filters": {"subject": "math"}}, format="json").status_code == 201
