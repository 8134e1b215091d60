"""The OpenAPI schema types the shapes the studio expects (issue 29): walked, it holds no free-form object
(an object without properties, or additionalProperties without a schema) but the allowlisted ones, each
with its reason; the typed inputs refuse a wrong field by name."""

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from k12vista import jobs
from tests.test_pem800k_export import kept_run

pytestmark = pytest.mark.django_db

# Where a free-form object is what the operation means, each with its reason.
ALLOWED = {
    # Open by design, each declared as such (k12vista.schema_fields.open_object) rather than left a bare {}:
    # what a job is given and answers differs by its kind, an error code's parameters by the code.
    "#/components/schemas/Job/properties/params": "a job's parameters differ by its kind",
    "#/components/schemas/Job/properties/result": "a job's result differs by its kind",
    "#/components/schemas/Job/properties/error_params": "an error code's parameters differ by the code",
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
    # The reports' parts whose keys differ by what was rated (their top level is typed).
    "#/components/schemas/AgreementReportOutput/properties/statistics": "label or score statistics, by the scale",
    "#/components/schemas/AgreementReportOutput/properties/against_reference": "by the kind and scale",
    "#/components/schemas/PEBenchReleaseDetailOutput/properties/agreement": "the agreement report, by who rated",
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
    queue = components["Job"]["properties"]["queue"]
    assert queue["type"] == "string" and "enum" not in queue and "$ref" not in queue and "allOf" not in queue
    part = jobs.start_job(kind="inference.score_offline", user=researcher, params={}, queue="gpu-4x80g")
    client = APIClient()
    client.force_authenticate(researcher)
    assert client.get(f"/api/jobs/{part.pk}/").json()["queue"] == "gpu-4x80g"
