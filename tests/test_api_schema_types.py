"""The OpenAPI schema types the shapes the studio expects (issue 29): walked, it holds no free-form object
(an object without properties, or additionalProperties without a schema) but the allowlisted ones, each
with its reason; the typed inputs refuse a wrong field by name."""

import functools
import json

import jsonschema
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.plumbing import force_instance
from rest_framework import serializers
from rest_framework.test import APIClient

from annotation import corrections, jsonl_import
from annotation.models import Question
from annotation.pdf import register_pdf_upload, start_pdf_import
from bench.generate import iter_pem
from inference import assist, campaigns, scoring
from inference.models import PublishedResult, ScoringRun
from inference.reference import results as reference_results
from k12vista import jobs
from k12vista.models import Job
from pem import agreement_store, splitting
from pem import jobs as pem_jobs
from pem.models import StepLabel
from pem.training import jobs as training_jobs
from review import decisions, services
from review.models import Audit, Rating
from review.sampling import AQL_HEADINGS
from tests.annotation_factories import make_question
from tests.fixtures_pdf import two_column_exam
from tests.pem_factories import add_to_pebench, label_steps, make_cot
from tests.review_factories import audit_of, bulk_questions, three_inspectors
from tests.test_inference_views import answer, make_endpoint, make_run, scored
from tests.test_jsonl_import import studio
from tests.test_pem800k_export import kept_run
from tests.test_pem_import import reference as pebench_line
from tests.test_pem_releases import bench, built  # noqa: F401 - bench is a fixture

pytestmark = pytest.mark.django_db

# Where a free-form object is what the operation means, each with its reason.
ALLOWED = {
    # Open by design, each declared as such (k12vista.schema_fields.open_object) rather than left a bare {}:
    # an error code's parameters differ by the code, as a line reason's do (an import report's rows).
    "#/components/schemas/ErrorParams": "an error code's parameters differ by the code",
    "#/components/schemas/ReasonParams": "a line reason's parameters differ by its code",
    "#/components/schemas/Flag/properties/detail": "a flag's facts differ by its code",
    "#/components/schemas/DefaultParams/properties/engine": "vllm.LLM's keyword arguments, passed as given",
    # Provenance: recorded at creation, its keys differ by the kind of run, protocol or question history.
    "#/components/schemas/RunOutput/properties/provenance": "a run's provenance, by kind and protocol",
    "#/components/schemas/ScoringRunOutput/properties/provenance": "a scoring run's provenance, by method",
    "#/components/schemas/AssistRunOutput/properties/provenance": "an assist run's provenance, by kind",
    "#/components/schemas/SplitOutput/properties/provenance": "a splitting run's provenance",
    "#/components/schemas/ReleaseItemOutput/properties/provenance": "a released question's history",
    # A correction's before and after are the value of the field it changed: that field's type.
    "#/components/schemas/ChangeOutput/properties/before": "the changed field's value, of that field's type",
    "#/components/schemas/ChangeOutput/properties/after": "the changed field's value, of that field's type",
    "#/components/schemas/ReleaseCorrectionRow/properties/before": "the changed field's value, of its type",
    "#/components/schemas/ReleaseCorrectionRow/properties/after": "the changed field's value, of its type",
    "#/components/schemas/ReleaseFieldChange/properties/old": "the changed field's value, of that field's type",
    "#/components/schemas/ReleaseFieldChange/properties/new": "the changed field's value, of that field's type",
}


def allowed_as(path: str) -> str:
    """The allowlisted path that covers ``path`` (itself, or an allowlisted object it is inside), or path."""
    return next((entry for entry in ALLOWED if path == entry or path.startswith(entry + "/")), path)


# Where a schema may sit, and what makes one say what it holds.
SUBSCHEMAS = ("items", "additionalProperties", "schema", "not")
COMBINERS = ("allOf", "oneOf", "anyOf")
SAYS_WHAT = ("type", "$ref", "enum", *COMBINERS)


def free_objects(node, where="#", is_schema=False):
    """Where the schema leaves a value free: an object without properties, additionalProperties without a
    schema, or a schema with no type, $ref or combiner at all (a bare {}, as a JSONField left untyped was)."""
    if isinstance(node, dict):
        extra = node.get("additionalProperties")
        untyped = node.get("type") == "object" and "properties" not in node and extra in (None, True, {})
        bare = is_schema and not any(key in node for key in SAYS_WHAT)
        if untyped or bare or extra is True or extra == {}:
            yield where
        for key, value in node.items():
            here = f"{where}/{str(key).replace('/', '~1')}"
            if key == "properties" and is_schema and isinstance(value, dict):
                for name, schema in value.items():
                    yield from free_objects(schema, f"{here}/{str(name).replace('/', '~1')}", is_schema=True)
            elif key == "schemas" and where == "#/components":
                for name, schema in value.items():
                    yield from free_objects(schema, f"{here}/{name}", is_schema=True)
            elif key in COMBINERS and isinstance(value, list):
                for index, schema in enumerate(value):
                    yield from free_objects(schema, f"{here}/{index}", is_schema=True)
            else:
                yield from free_objects(value, here, is_schema=key in SUBSCHEMAS and isinstance(value, dict))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from free_objects(value, f"{where}/{index}")


def test_the_schema_has_no_free_form_object_but_the_allowlisted_ones():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = {allowed_as(path.split("/content/")[0]) for path in free_objects(schema)}
    assert found - set(ALLOWED) == set(), "type these, or allow them with a reason"
    assert set(ALLOWED) - found == set(), "allowed but typed now: take them off the list"


def test_the_typed_inputs_are_in_the_schema():
    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    assert {"max_steps", "learning_rate", "lora"} <= set(components["Hyperparameters"]["properties"])
    assert {"format", "consistency", "coverage", "balance"} == set(components["FilterParams"]["properties"])
    assert {"kind", "status", "hash_ids"} <= set(components["PopulationInput"]["properties"])
    assert "points_per_unit" in components["ClusterParamsInput"]["properties"]


def test_the_outputs_are_typed_by_the_inputs_that_wrote_them():
    """A stored JSON value is answered as it is, and typed in the schema by the input that wrote it."""
    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]

    def ref(schema, field):
        found = components[schema]["properties"][field]
        return found.get("$ref") or found["allOf"][0]["$ref"]

    assert ref("AuditOutput", "population") == "#/components/schemas/PopulationInput"
    assert ref("TrainingRunOutput", "hyperparameters") == "#/components/schemas/Hyperparameters"
    assert ref("FilterRunOutput", "params") == "#/components/schemas/FilterParams"
    assert ref("EndpointOutput", "default_params") == "#/components/schemas/DefaultParams"
    assert ref("RunOutput", "filters") == "#/components/schemas/FiltersInput"
    assert components["AuditOutput"]["properties"]["strata"]["items"]["type"] == "string"


def test_a_wrong_field_inside_a_typed_object_is_refused_by_name(researcher, administrator, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    api = APIClient()
    api.force_authenticate(researcher)
    kept_run(researcher)
    bad = {"source": "imported", "rater": "pem", "params": {"coverage": {"min_model": 2}}}
    response = api.post("/api/pem/training/filter-runs/", bad, format="json")
    assert response.status_code == 400 and "min_model" in response.json()["params"]["coverage"]
    response = api.post("/api/benchmark/clustering/", {"params": {"svd_dim": 4}}, format="json")
    assert response.status_code == 400 and "svd_dim" in response.json()["params"]
    api.force_authenticate(administrator)
    audit = {"population": {"kind": "status", "stauts": "audited"}, "inspectors": []}
    response = api.post("/api/inspect/audits/", audit, format="json")
    assert response.status_code == 400 and "stauts" in response.json()["population"]


def test_a_jobs_queue_may_be_a_gpu_class_in_the_schema_and_in_the_answer(researcher):
    """A part of an offline run is queued on gpu-<class>: the schema's Job.queue is no enum of cpu/io/gpu,
    which a generated client would hold that job's answer against."""
    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    for variant in components["Job"]["oneOf"]:
        queue = components[variant["$ref"].split("/")[-1]]["properties"]["queue"]
        assert queue["type"] == "string" and "enum" not in queue and "$ref" not in queue and "allOf" not in queue
    part = jobs.start_job(kind="inference.score_offline", user=researcher, params={}, queue="gpu-4x80g")
    client = APIClient()
    client.force_authenticate(researcher)
    assert client.get(f"/api/jobs/{part.pk}/").json()["queue"] == "gpu-4x80g"


# --- real responses against the schema (issue 29): the reports the studio builds ------------------------------


@functools.cache
def openapi() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def strict(node):
    """An OpenAPI 3.0 schema as JSON Schema, and strict: ``nullable`` as a null type, and no key that an object
    with properties does not declare (so a report key the schema does not name fails, as a missing one does)."""
    if isinstance(node, list):
        return [strict(value) for value in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {name: strict(schema) for name, schema in value.items()}
        elif key in ("enum", "required", "default", "example"):
            out[key] = value
        else:
            out[key] = strict(value)
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if out.pop("nullable", False):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def disagreements(body, method: str, path: str, status: int) -> list[str]:
    """Where ``body`` disagrees with the schema of the operation's answer (empty: it agrees)."""
    schema = openapi()
    answer_schema = schema["paths"][path][method]["responses"][str(status)]["content"]["application/json"]["schema"]
    document = {**strict(answer_schema), "components": strict(schema["components"])}
    validator = jsonschema.Draft202012Validator(document)

    # Under a oneOf, the error says only that no variant fits: the deepest of the variants' own errors (that of
    # the variant which fits furthest) says where. A job's variant is its kind's: the others' errors are left.
    def said(error):
        if not error.context:
            return error
        by_variant: dict = {}
        for inner in error.context:
            by_variant.setdefault(inner.relative_schema_path[0], []).append(inner)
        kinds = [inner for inner in error.context if list(inner.relative_path) == ["kind"]]
        if kinds and len(by_variant) > 1:
            kinded = [
                errors for errors in by_variant.values() if all(list(e.relative_path) != ["kind"] for e in errors)
            ]
            if kinded:
                return said(max(kinded[0], key=lambda inner: len(inner.absolute_path)))
        return said(max(error.context, key=lambda inner: len(inner.absolute_path)))

    found = (said(error) for error in validator.iter_errors(body))
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in found]


def check(response, method: str, path: str, status: int = 200) -> dict:
    """The real answer is the one the schema describes: typed (no free-form object at its top, issue 29) and
    agreeing with it key by key."""
    assert response.status_code == status, response.content[:2000]
    answer_schema = openapi()["paths"][path][method]["responses"][str(status)]["content"]["application/json"]
    assert not list(free_objects(answer_schema["schema"], is_schema=True)), f"{method} {path} is a free-form object"
    body = response.json()
    assert disagreements(body, method, path, status) == []
    return body


def job_answered(client, job_id: int) -> dict:
    """The job's answer (GET /api/jobs/<id>/), succeeded and agreeing with its kind's variant of the schema."""
    body = check(client.get(f"/api/jobs/{job_id}/"), "get", "/api/jobs/{id}/")
    assert body["status"] == Job.Status.SUCCEEDED and body["result"], body
    return body


def test_an_answer_the_schema_does_not_describe_is_refused():
    """The check itself: a missing key, a key the schema does not name, a wrong type and a null where none is
    allowed each disagree; within an open mapping (additionalProperties of a type) a free key is fine."""
    path = "/api/leaderboard/pins/"
    assert disagreements({"inference_run": 1, "scoring_run": 2}, "post", path, 201) == []
    assert disagreements({"inference_run": 1}, "post", path, 201)
    assert disagreements({"inference_run": 1, "scoring_run": 2, "pinned": True}, "post", path, 201)
    assert disagreements({"inference_run": "1", "scoring_run": 2}, "post", path, 201)
    assert disagreements({"inference_run": None, "scoring_run": 2}, "post", path, 201)
    job = {"job": 1, "params": {"subjects": ["math"], "params": {
        "points_per_unit": 3.0, "ngram_min": 1, "ngram_max": 3, "svd_dims": 64, "questions_per_point": 3,
        "question_weight": 0.5, "seed": 0}}}  # fmt: skip
    assert disagreements(job, "post", "/api/benchmark/clustering/", 202) == []
    job["params"]["params"]["svd_dim"] = 4
    assert disagreements(job, "post", "/api/benchmark/clustering/", 202)


@pytest.mark.usefixtures("tmp_media", "no_broker")
def test_the_benchmarks_reports_are_answered_as_the_schema_says(researcher, inspector, annotator, settings, api):
    """An audited bank drawn, released twice around a correction and compared: the audit report, allocation,
    draw report, release summaries (Table 2, the audits, the corrections carried), compare and clustering."""
    settings.STATS_TOKENIZER_DIR = ""
    bulk_questions(6, subjects=["math"], worker=annotator)
    inspectors = three_inspectors(inspector)
    audit = audit_of(inspectors=inspectors, per_stratum=None, aql=float(AQL_HEADINGS[-1]), inspectors_per_item=2)
    for rating in Rating.objects.filter(item__audit=audit).select_related("item", "inspector"):
        names = services.dimension_names(rating.item.kind)
        services.submit_rating(rating=rating, verdicts=dict.fromkeys(names, True), notes={}, by=rating.inspector,
                               active_seconds=40)  # fmt: skip
    decisions.decide(audit=audit, by=inspector)
    assert Question.objects.filter(status=Question.Status.AUDITED).count() == 6
    ivan, rita = api(inspector), api(researcher)

    report = check(ivan.get(f"/api/inspect/audits/{audit.pk}/report/"), "get", "/api/inspect/audits/{id}/report/")
    math = next(s for s in report["strata"] if s["stratum"] == "math")
    assert math["plan"] and math["decision"]["decision"] == "accept" and report["active_time"]["by_inspector"]
    assert report["population_change"]["now"] == 0  # its questions left the population as the lot was accepted

    allocation = check(rita.get("/api/benchmark/allocation/", {"per_cell": 4}), "get", "/api/benchmark/allocation/")
    assert allocation["cells"][0]["shortfall"] == 0 and allocation["allocated"] == 4
    started = check(rita.post("/api/benchmark/draws/", {"targets": {"per_cell": 10}, "seed": 3}, format="json"),
                    "post", "/api/benchmark/draws/", 202)  # fmt: skip
    assert started["report"] == {}  # empty until the draw has run, as the schema allows
    assert jobs.execute_job(started["job"]) == Job.Status.SUCCEEDED
    drawn = check(rita.get(f"/api/benchmark/draws/{started['id']}/"), "get", "/api/benchmark/draws/{id}/")
    assert drawn["report"]["total"] == 6 and drawn["report"]["cells"][0]["shortfall"] == 4
    assert job_answered(rita, started["job"])["result"]["short_cells"] == 1

    building = check(rita.post(f"/api/benchmark/draws/{started['id']}/release/", {}, format="json"),
                     "post", "/api/benchmark/draws/{id}/release/", 202)  # fmt: skip
    assert jobs.execute_job(building["job"]) == Job.Status.SUCCEEDED
    assert job_answered(rita, building["job"])["result"]["questions"] == 6
    v1 = check(rita.get("/api/benchmark/releases/v1/"), "get", "/api/benchmark/releases/v{version}/")
    assert v1["summary"]["statistics"]["questions"] == 6 and v1["summary"]["audits"][0]["id"] == audit.pk
    check(rita.post("/api/benchmark/releases/v1/publish/"), "post", "/api/benchmark/releases/v{version}/publish/")

    question = Question.objects.filter(release_items__release__version=1).order_by("hash_id").first()
    correction = corrections.open_correction(question=question, problem="答案应为 C", by=researcher)
    corrections.fix_correction(correction=correction, changes={"answers": ["C"]}, by=annotator)
    corrections.check_correction(correction=correction, accept=True, by=inspector)
    building = rita.post(f"/api/benchmark/draws/{started['id']}/release/", {}, format="json").json()
    assert jobs.execute_job(building["job"]) == Job.Status.SUCCEEDED
    listed = check(rita.get("/api/benchmark/releases/"), "get", "/api/benchmark/releases/")
    v2 = next(release for release in listed["results"] if release["version"] == 2)
    assert v2["summary"]["corrections"][0]["after"] == ["C"]
    diff = check(rita.get("/api/benchmark/releases/compare/", {"old": 1, "new": 2}), "get",
                 "/api/benchmark/releases/compare/")  # fmt: skip
    assert diff["changed"] == [{"hash_id": question.hash_id, "fields": [
        {"field": "answers", "old": ["A"], "new": ["C"], "diff": ["@@ -1 +1 @@", "-A", "+C"]}]}]  # fmt: skip

    make_question(researcher, subject="math")  # a knowledge point to cluster
    clustering = check(rita.post("/api/benchmark/clustering/", {"subjects": ["math"]}, format="json"),
                       "post", "/api/benchmark/clustering/", 202)  # fmt: skip
    assert clustering["params"]["subjects"] == ["math"] and clustering["params"]["params"]["svd_dims"] == 64
    assert jobs.execute_job(clustering["job"]) == Job.Status.SUCCEEDED
    assert job_answered(rita, clustering["job"])["result"]["subjects"][0]["subject"] == "math"


@pytest.mark.usefixtures("no_broker")
def test_the_leaderboard_pins_and_a_campaigns_summary_are_answered_as_the_schema_says(researcher, api):
    """A scored run with published numbers beside it and a run waiting for its scoring, pinned; a campaign."""
    run = make_run(researcher, finished=True)
    answer(run), answer(run)
    first = scored(run, score=0.75)
    scored(run, score=0.5, name="second")
    PublishedResult.objects.create(model="GPT-4o", mode="direct", group="overall", score=0.6, source="paper")
    waiting = make_run(researcher, endpoint=make_endpoint("waits"), finished=True)
    ScoringRun.objects.create(name="going", inference_run=waiting, judge=waiting.endpoint,
                              method=ScoringRun.Method.JUDGE_STEPS)  # fmt: skip
    rita = api(researcher)

    pin = check(rita.post("/api/leaderboard/pins/", {"scoring_run": first.pk}, format="json"),
                "post", "/api/leaderboard/pins/", 201)  # fmt: skip
    assert pin == {"inference_run": run.pk, "scoring_run": first.pk}
    board = check(rita.get("/api/leaderboard/"), "get", "/api/leaderboard/")
    entry = next(e for e in board["entries"] if e["run"])
    assert entry["run"]["pinned"] and entry["errors"]["overall"]["steps"] == 4
    assert [(w["inference_run"], w["not_counted"][0]["name"]) for w in board["waiting"]] == [(waiting.pk, "going")]
    assert next(e for e in board["entries"] if not e["run"])["published"]["overall"]["score"] == 0.6

    campaign = campaigns.start_campaign(name="c", endpoints=[make_endpoint("a"), make_endpoint("b")], mode="direct",
                                        filters={}, user=researcher)  # fmt: skip
    answer(campaign.runs.order_by("pk").first(), Question.objects.first())
    body = check(rita.get(f"/api/campaigns/{campaign.pk}/"), "get", "/api/campaigns/{id}/")
    assert body["summary"]["ok"] == 1 and len(body["summary"]["runs"]) == 2


@pytest.mark.usefixtures("tmp_media")
def test_pebench_releases_and_the_agreement_report_are_answered_as_the_schema_says(bench, researcher, annotator,
                                                                                    other_annotator, api):  # fmt: skip
    rita = api(researcher)
    v1 = built(researcher)
    listed = check(rita.get("/api/pem/releases/"), "get", "/api/pem/releases/")
    assert listed[0]["summary"]["statistics"]["records"] == 1 and listed[0]["summary"]["gold_labels"]
    detail = check(rita.get(f"/api/pem/releases/v{v1.version}/"), "get", "/api/pem/releases/v{version}/")
    assert detail["agreement"] == v1.agreement and detail["agreement"]["judges"][0]["rater"] == "judge-72b"
    check(rita.post(f"/api/pem/releases/v{v1.version}/publish/"), "post", "/api/pem/releases/v{version}/publish/")
    label_steps(bench["open"], ["CS", "CE"], rater="amy", user=other_annotator)
    add_to_pebench(make_cot(key="q3"))
    started = check(rita.post("/api/pem/releases/", {}, format="json"), "post", "/api/pem/releases/", 202)
    assert jobs.execute_job(started["job"]) == Job.Status.SUCCEEDED
    assert job_answered(rita, started["job"])["result"]["version"] == 2
    diff = check(rita.get("/api/pem/releases/compare/", {"old": 1, "new": 2}), "get", "/api/pem/releases/compare/")
    assert diff["added"] == ["q3"] and diff["changed"][0]["key"] == "q2"

    # Each variant of a ratings file's report: labels (step labels: with the correct-vs-error collapse; listed
    # categories: without), scores on an interval scale (a rater sharing no item with the reference: units and
    # alpha only) and scores on an ordinal scale (label statistics on their distinct values).
    files = (
        ({"reference": "a"}, "labels.csv", "item,rater,label\n1,a,CS\n1,b,CS\n2,a,CE\n2,b,CS\n3,a,CE\n"),
        ({"categories": "yes,no"}, "labels.csv", "item,rater,label\n1,a,yes\n1,b,no\n2,a,yes\n2,b,yes\n"),
        ({"reference": "a"}, "scores.csv", "item,rater,score\n1,a,0.5\n1,b,0.5\n2,a,1\n2,b,0\n3,b,0.2\n3,c,0.3\n"),
        ({"reference": "b", "scale": "ordinal"}, "scores.jsonl",
         '{"item": 1, "rater": "a", "score": 1}\n{"item": 1, "rater": "b", "score": 2}\n{"item": 2, "rater": "a", '
         '"score": 2}\n{"item": 2, "rater": "b", "score": 2}\n'),
    )  # fmt: skip
    reports = []
    for options, name, lines in files:
        upload = SimpleUploadedFile(name, lines.encode())
        reports.append(check(rita.post("/api/pem/agreement/", {"file": upload, **options}), "post",
                             "/api/pem/agreement/"))  # fmt: skip
    steps, listed, scores, ordinal = reports
    assert steps["against_reference"]["reference"] == "a" and steps["statistics"]["binary"]["categories"]
    assert "binary" not in listed["statistics"] and "against_reference" not in listed
    assert scores["statistics"]["units"] == {"total": 3, "single_rating": 0, "pairable": 3}
    alone = next(rater for rater in scores["against_reference"]["raters"] if rater["rater"] == "c")
    assert alone["units"] == 0 and alone["krippendorff_alpha"]["metric"] == "interval"
    assert ordinal["categories"] == ["1", "2"] and ordinal["statistics"]["krippendorff_alpha"]["metric"] == "ordinal"
    assert ordinal["against_reference"]["raters"][0]["accuracy_by_reference"]["2"]["n"] == 2
    # The variants are told apart: a report with the other kind's statistics is not one the schema describes.
    labels_against, scores_against = steps["against_reference"], scores["against_reference"]
    swapped = ({**steps, "statistics": scores["statistics"]}, {**scores, "against_reference": labels_against},
               {**steps, "against_reference": scores_against})  # fmt: skip
    assert all(disagreements(body, "post", "/api/pem/agreement/", 200) for body in swapped)


# --- jobs (issue 29): each kind's params and result typed, one variant per kind ---------------------------------


def test_every_registered_kind_has_its_params_and_result_and_a_variant_of_job():
    components = openapi()["components"]["schemas"]
    variants = {ref["$ref"] for ref in components["Job"]["oneOf"]}
    mapping = components["Job"]["discriminator"]
    assert mapping["propertyName"] == "kind" and set(mapping["mapping"].values()) == variants
    for kind in jobs.registered_kinds():
        shapes = jobs.registration(kind)
        assert isinstance(force_instance(shapes.params), serializers.Serializer), kind
        assert isinstance(force_instance(shapes.result), serializers.Serializer), kind
        variant = components[mapping["mapping"][kind].split("/")[-1]]
        kind_schema = variant["properties"]["kind"]
        kind_schema = components[kind_schema["$ref"].split("/")[-1]] if "$ref" in kind_schema else kind_schema
        assert kind_schema["enum"] == [kind]
        assert "$ref" in variant["properties"]["params"] and "$ref" in variant["properties"]["result"]["anyOf"][0]
    assert len(variants) == len(jobs.registered_kinds())


def test_a_kind_cannot_be_registered_without_its_shapes():
    with pytest.raises(TypeError):
        jobs.job_handler("tests.shapeless")  # type: ignore[call-arg]


@pytest.mark.usefixtures("tmp_media", "no_broker")
def test_jobs_are_answered_as_their_kinds_variant_says(
    researcher, inspector, administrator, login, tmp_path, settings, api
):
    """Real jobs of several kinds, run, then read through /api/jobs/<id>/: a worker check, a question import
    with a bad line (its row's reason worded), an export, a PEBench import, the agreement report and an audit
    created as a job; a result of the wrong shape, or another kind's, is not one the schema describes."""
    rita = api(researcher)
    check_job = jobs.start_worker_check(queue="cpu", user=researcher)
    assert jobs.execute_job(check_job.pk) == Job.Status.SUCCEEDED
    checked = job_answered(rita, check_job.pk)
    assert checked["params"] == {} and checked["result"]["queue"] == "cpu"
    by_nobody = jobs.start_worker_check(queue="io", user=None)  # as a command starts it
    assert jobs.execute_job(by_nobody.pk) == Job.Status.SUCCEEDED
    assert job_answered(api(administrator), by_nobody.pk)["started_by"] is None

    lines = [json.dumps(studio("good1"), ensure_ascii=False), '{"hash_id": "broken", ']
    (tmp_path / "q.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    document = jsonl_import.register_upload(path=tmp_path / "q.jsonl", user=researcher)
    imported = jsonl_import.start_import(document=document, user=researcher)
    assert jobs.execute_job(imported.pk) == Job.Status.SUCCEEDED
    report = job_answered(rita, imported.pk)["result"]
    assert report["created"] == 1 and report["failed_lines"][0]["reason_code"] == "not_json_at"
    assert report["failed_lines"][0]["reason"] != report["failed_lines"][0]["reason_code"]

    login(researcher).post(reverse("annotation:export"), {"subject": "math", "fmt": "reference"})
    exported = Job.objects.get(kind="annotation.export_questions")
    assert jobs.execute_job(exported.pk) == Job.Status.SUCCEEDED
    export = job_answered(rita, exported.pk)
    assert export["params"] == {"filters": {"subject": "math"}, "fmt": "reference"}
    assert export["result"]["path"].endswith(".jsonl")

    chains = tmp_path / "chains.jsonl"
    chains.write_text(json.dumps(pebench_line("ok"), ensure_ascii=False) + "\n" + json.dumps(
        pebench_line("bad", labels=[["x", "wrong", ""]]), ensure_ascii=False) + "\n", encoding="utf-8")  # fmt: skip
    upload = SimpleUploadedFile("chains.jsonl", chains.read_bytes())
    pebench = pem_jobs.start_import(stored_name=pem_jobs.store_upload(upload), name="chains.jsonl", user=researcher)
    assert jobs.execute_job(pebench.pk) == Job.Status.SUCCEEDED
    assert job_answered(rita, pebench.pk)["result"]["failed_lines"][0]["key"] == "bad"
    agreement = agreement_store.start_agreement(scope="all", user=researcher)
    assert jobs.execute_job(agreement.pk) == Job.Status.SUCCEEDED
    assert job_answered(rita, agreement.pk)["result"]["scope"] == "all"

    settings.AUDIT_INLINE_POPULATION = 1  # two questions: a large population here, created by a job
    make_question(researcher, subject="math", hash_id="m2")
    Question.objects.update(status=Question.Status.SOLUTION_CORRECTED)
    audit_job = services.start_audit(name="", population={"kind": "status", "status": "solution_corrected"},
                                     strata=["subject"], per_stratum=1, aql=None,
                                     inspectors=three_inspectors(inspector), inspectors_per_item=3,
                                     by=inspector)  # fmt: skip
    assert jobs.execute_job(audit_job.pk) == Job.Status.SUCCEEDED
    audit = job_answered(api(inspector), audit_job.pk)
    made = Audit.objects.get(job_id=audit_job.pk)
    assert audit["params"]["population"]["kind"] == "status"
    assert audit["result"] == {"audit": made.pk, "items": made.items.count()} and made.items.count() == 2

    # The check itself: a result of the wrong type, a key the kind's result does not name, another kind's
    # result, or a kind no variant has, each disagree.
    body = checked
    assert disagreements(body, "get", "/api/jobs/{id}/", 200) == []
    wrongs = ({**body, "result": {**body["result"], "queue": 1}}, {**body, "result": {**body["result"], "x": 1}},
              {**body, "result": export["result"]}, {**body, "params": {"hold_seconds": "long"}},
              {**body, "kind": "tests.unknown"}, {**export, "result": {**export["result"], "count": None}})  # fmt: skip
    for wrong in wrongs:
        assert disagreements(wrong, "get", "/api/jobs/{id}/", 200), wrong


@pytest.mark.usefixtures("tmp_media", "no_broker")
def test_inference_and_pem_jobs_are_answered_as_their_kinds_variant_says(researcher, api):
    """Real jobs that call no model: a run whose questions are all answered, a scoring run over an answer that said
    nothing (no call to judge it), a campaign already answered, chains and judge labels from them, the reference
    results export, a PEBench build and export, PEM-800K filters and a training export."""
    rita = api(researcher)
    run = make_run(researcher)
    answer(run, Question.objects.get())
    assert jobs.execute_job(run.job_id) == Job.Status.SUCCEEDED
    assert job_answered(rita, run.job_id)["result"] == {"total": 1, "ok": 1, "failed": 0, "pending": 0}

    failed = make_run(researcher, endpoint=make_endpoint("failing"), finished=True)
    answer(failed, Question.objects.get(), raw_output=" ")  # answered with nothing: no call to judge it
    judging = scoring.start_scoring_run(inference_run=failed, judge=run.endpoint, method=ScoringRun.Method.JUDGE_STEPS,
                                        user=researcher)  # fmt: skip
    assert jobs.execute_job(judging.job_id) == Job.Status.SUCCEEDED
    coverage = job_answered(rita, judging.job_id)["result"]
    assert (coverage["no_response"], coverage["coverage"]) == (1, 0.0)

    campaign = campaigns.start_campaign(name="c", endpoints=[make_endpoint("a"), make_endpoint("b")], mode="direct",
                                        filters={}, user=researcher)  # fmt: skip
    for campaign_run in campaign.runs.all():
        answer(campaign_run, Question.objects.get())
    assert jobs.execute_job(campaign.job_id) == Job.Status.SUCCEEDED
    assert job_answered(rita, campaign.job_id)["result"]["answered"] == 2

    chains = pem_jobs.start_cots_from_run(inference_run=run, user=researcher)
    assert jobs.execute_job(chains.pk) == Job.Status.SUCCEEDED
    assert job_answered(rita, chains.pk)["result"]["created"] == 1
    judged = scored(run)
    labels = pem_jobs.start_labels_from_scoring_run(scoring_run=judged, user=researcher)
    assert jobs.execute_job(labels.pk) == Job.Status.SUCCEEDED
    assert job_answered(rita, labels.pk)["result"]["labelled"] == 1
    exported = jobs.start_job(kind=reference_results.KIND, user=researcher, params={"scoring_run_id": judged.pk})
    assert jobs.execute_job(exported.pk) == Job.Status.SUCCEEDED
    assert job_answered(rita, exported.pk)["result"]["path"].endswith(".zip")

    build = pem_jobs.start_build(target_size=1, min_steps=1, strata=["subject"], seed=0, user=researcher)
    assert jobs.execute_job(build.pk) == Job.Status.SUCCEEDED
    assert job_answered(rita, build.pk)["result"]["taken"] == 1
    pebench = pem_jobs.start_export(user=researcher)
    assert jobs.execute_job(pebench.pk) == Job.Status.SUCCEEDED
    assert job_answered(rita, pebench.pk)["params"] == {"build_id": None}

    kept_run(researcher)
    filtering = training_jobs.start_filters(source=StepLabel.Source.IMPORTED, rater="pem", params=None, user=researcher)
    assert jobs.execute_job(filtering.job_id) == Job.Status.SUCCEEDED
    assert job_answered(rita, filtering.job_id)["result"]["kept"] == 3
    filtering.refresh_from_db()
    training = training_jobs.start_export(filter_run=filtering, user=researcher)
    assert jobs.execute_job(training.job_id) == Job.Status.SUCCEEDED
    assert job_answered(rita, training.job_id)["result"]["records"] > 0


@pytest.mark.usefixtures("tmp_media", "no_broker")
def test_imports_of_papers_and_pem800k_are_answered_as_their_kinds_variant_says(researcher, tmp_path, api):
    """A PDF paper read by the rules (its consistency report, notes and timings) and a PEM-800K file with a bad
    line (its row's reason worded)."""
    rita = api(researcher)
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("exam.pdf", two_column_exam().pdf),
                                   user=researcher)  # fmt: skip
    paper = start_pdf_import(document=document, user=researcher, subject="physics", grade=8)
    assert jobs.execute_job(paper.pk) == Job.Status.SUCCEEDED
    read = job_answered(rita, paper.pk)
    assert read["params"]["grade"] == 8 and read["result"]["questions"] == 8 and read["result"]["report"]["numbers"]

    good = list(iter_pem(0.00002, 1))
    path = tmp_path / "pem.jsonl"
    path.write_text("\n".join([json.dumps(good[0]), json.dumps({**good[0], "step_labels": [["步骤", "XYZ", ""]]})])
                    + "\n", encoding="utf-8")  # fmt: skip
    pem800k = training_jobs.start_import(path=str(path), name="pem800k", user=researcher)
    assert jobs.execute_job(pem800k.pk) == Job.Status.SUCCEEDED
    report = job_answered(rita, pem800k.pk)["result"]
    assert (report["created"], report["failed"], report["rater"]) == (1, 1, "pem800k")
    assert "XYZ" in report["failed_lines"][0]["reason"] and report["failed_lines"][0]["reason_code"]


@pytest.mark.usefixtures("no_broker")
def test_an_assist_run_is_answered_as_its_kinds_variant_says(researcher, api):
    """An assist run over a question with no raw solution: skipped without a call, counted with why."""
    make_question(researcher, raw_solution="")
    run = assist.start_assist_run(kind="restructure_solution", endpoint=make_endpoint("helper"), filters={},
                                  user=researcher)  # fmt: skip
    assert jobs.execute_job(run.job_id) == Job.Status.SUCCEEDED
    counts = job_answered(api(researcher), run.job_id)["result"]
    assert (counts["ok"], counts["skipped"], sum(counts["skipped_why"].values())) == (0, 1, 1)


@pytest.mark.usefixtures("no_broker")
def test_a_splitting_run_is_answered_as_its_kinds_variant_says(researcher, api):
    """A splitting run over an answer that said nothing: no chain to split, every outcome counted (as zero)."""
    run = make_run(researcher, finished=True)
    answer(run, Question.objects.get(), raw_output=" ")
    split = splitting.start_split_run(splitter=run.endpoint, inference_runs=[run], user=researcher)
    assert jobs.execute_job(split.job_id) == Job.Status.SUCCEEDED
    counts = job_answered(api(researcher), split.job_id)["result"]
    assert counts == {"pending": 0, "model": 0, "fallback": 0, "conflict": 0, "skipped": 0, "total": 0}
