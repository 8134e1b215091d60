"""The OpenAPI schema types the shapes the studio expects (issue 29): walked, it holds no free-form object
(an object without properties, or additionalProperties without a schema) but the allowlisted ones, each
with its reason; the typed inputs refuse a wrong field by name."""

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from k12vista import jobs
from tests.test_pem800k_export import kept_run

pytestmark = pytest.mark.django_db

# Where a free-form object is what the operation means, or is a report whose shape is documented elsewhere.
ALLOWED = {
    "#/components/schemas/CampaignOutput/properties/summary": "a campaign's summary table, keyed by model and cell",
    "#/paths/~1api~1benchmark~1allocation~1/get/responses/200": "allocation per cell, keyed by the cell",
    "#/paths/~1api~1benchmark~1clustering~1/post/responses/202": "the job and its params; follow the job",
    "#/paths/~1api~1benchmark~1releases~1compare~1/get/responses/200": "a diff of two releases, keyed by question",
    "#/paths/~1api~1inspect~1audits~1{id}~1report~1/get/responses/200": "the audit report (review/reports.py)",
    "#/paths/~1api~1leaderboard~1/get/responses/200": "the board: columns vary with the cells drawn",
    "#/paths/~1api~1leaderboard~1pins~1/post/responses/201": "the pin as the board shows it",
    "#/paths/~1api~1pem~1agreement~1/post/responses/200": "agreement statistics keyed by label",
    "#/paths/~1api~1pem~1releases~1compare~1/get/responses/200": "a diff of two PEBench releases, keyed by item",
}


def free_objects(node, where="#"):
    if isinstance(node, dict):
        extra = node.get("additionalProperties")
        untyped = node.get("type") == "object" and "properties" not in node and extra in (None, True, {})
        if untyped or extra is True or extra == {}:
            yield where
        for key, value in node.items():
            yield from free_objects(value, f"{where}/{str(key).replace('/', '~1')}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from free_objects(value, f"{where}/{index}")


def test_the_schema_has_no_free_form_object_but_the_allowlisted_ones():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = {path.split("/content/")[0] for path in free_objects(schema)}
    assert found - set(ALLOWED) == set(), "type these, or allow them with a reason"
    assert set(ALLOWED) - found == set(), "allowed but typed now: take them off the list"


def test_the_typed_inputs_are_in_the_schema():
    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    assert {"max_steps", "learning_rate", "lora"} <= set(components["Hyperparameters"]["properties"])
    assert {"format", "consistency", "coverage", "balance"} == set(components["FilterParams"]["properties"])
    assert {"kind", "status", "hash_ids"} <= set(components["PopulationInput"]["properties"])
    assert "points_per_unit" in components["ClusterParamsInput"]["properties"]


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
