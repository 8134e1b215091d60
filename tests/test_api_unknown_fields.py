"""A field the API does not know is a 400 naming it, on every write operation (issue 29): walked from the
generated OpenAPI schema, so an operation added later is checked too."""

import json
import re

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from inference import sampling, services
from inference.models import ModelEndpoint
from k12vista.roles import Role
from tests.conftest import make_person

pytestmark = pytest.mark.django_db
UNKNOWN = "zz_not_a_field"


def write_operations():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method in ("post", "put", "patch") and "requestBody" in operation:
                yield path, method, operation["requestBody"]["content"]


def test_every_write_operation_refuses_an_unknown_field_and_names_it(settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*"]
    boss = make_person("boss", Role.RESEARCHER, Role.ADMIN, Role.INSPECTOR)
    ModelEndpoint.objects.create(pk=1, name="e", kind="openai", base_url="http://127.0.0.1:9/v1", model_name="m")
    api = APIClient()
    api.force_authenticate(boss)
    reached, refused = [], []
    for path, method, content in write_operations():
        url = re.sub(r"\{[^}]+\}", "1", path)
        fmt = "json" if "application/json" in content else "multipart"
        response = getattr(api, method)(url, {UNKNOWN: "1"}, format=fmt)
        if response.status_code in (403, 404, 405):
            continue  # not reached for this user or object: the serializer never ran
        reached.append(f"{method.upper()} {path}")
        if response.status_code != 400 or UNKNOWN not in response.content.decode():
            refused.append(f"{method.upper()} {path}: {response.status_code} {response.content[:200]!r}")
    assert not refused, "\n".join(refused)
    assert len(reached) >= 20, reached  # most operations were reached, not skipped


def test_a_panel_with_params_and_a_misspelt_nested_option_are_refused_naming_them(researcher):
    api = APIClient()
    api.force_authenticate(researcher)
    response = api.post("/api/pem/panels/", {"name": "p", "judges": [], "runs": [], "params": {"x": 1}}, format="json")
    assert response.status_code == 400 and "params" in response.json()
    endpoint = ModelEndpoint.objects.create(name="e", kind="openai", base_url="http://127.0.0.1:9/v1", model_name="m")
    run = {"endpoint": endpoint.pk, "mode": "direct", "params": {"temprature": 0.5}}
    response = api.post("/api/runs/", run, format="json")
    assert response.status_code == 400 and "temprature" in response.json()["params"]


# --- an endpoint's fields: unknown sampling parameters, and fields its kind never uses ------------------

HTTP_ENDPOINT = {"name": "e", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model_name": "m"}
FORM = {"max_concurrency": 8, "timeout_seconds": 60, "max_image_side": 1024, "active": "on"}


def test_a_misspelt_or_mistyped_sampling_parameter_is_refused_by_name_by_the_api_and_the_form(
    researcher, login, settings
):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*"]
    api = APIClient()
    api.force_authenticate(researcher)
    for params, name in (({"temprature": 0.5}, "temprature"), ({"max_tokens": "many"}, "max_tokens")):
        response = api.post("/api/endpoints/", {**HTTP_ENDPOINT, "default_params": params}, format="json")
        assert response.status_code == 400 and name in str(response.json()["default_params"]), response.content
        page = login(researcher).post("/research/endpoints/new/", {**HTTP_ENDPOINT, **FORM,
                                                                    "default_params": json.dumps(params)})  # fmt: skip
        assert page.status_code == 200 and name in str(page.context["form"].errors["default_params"])
    assert not ModelEndpoint.objects.exists()
    good = {"temperature": 0, "top_p": 0.9, "max_tokens": 64, "stop": ["\n\n"], "engine": {"max_model_len": 4096}}
    response = api.post("/api/endpoints/", {**HTTP_ENDPOINT, "default_params": good}, format="json")
    assert response.status_code == 201 and response.json()["default_params"] == good
    # The keys a model is sent are the ones the endpoint may set, and engine.
    assert services.ALLOWED_PARAMS | {"engine"} == sampling.KNOWN_KEYS


@pytest.mark.parametrize("kind", ["vllm_offline", "transformers"])
def test_replica_urls_on_an_engine_endpoint_are_refused_not_dropped(kind, researcher, settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*"]
    api = APIClient()
    api.force_authenticate(researcher)
    engine = {"name": "x", "kind": kind, "model_name": "/models/m", "replica_urls": ["http://127.0.0.1:8001/v1"]}
    response = api.post("/api/endpoints/", engine, format="json")
    assert response.status_code == 400 and "replica_urls" in response.json(), response.content
    assert not ModelEndpoint.objects.exists()
    assert api.post("/api/endpoints/", {**engine, "replica_urls": []}, format="json").status_code == 201


@pytest.mark.parametrize("kind", ["vllm_offline", "transformers"])
def test_replica_urls_on_an_engine_endpoint_are_refused_by_the_form_too(kind, researcher, login, settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*"]
    settings.LANGUAGE_CODE = "en"
    engine = {**FORM, "name": "x", "kind": kind, "model_name": "/models/m", "default_params": "{}",
              "gpu_count": 1, "gpu_memory_gib": 0}  # fmt: skip
    page = login(researcher).post("/research/endpoints/new/", {**engine, "replica_urls": "http://127.0.0.1:8001/v1"})
    assert page.status_code == 200
    assert "replica servers" in str(page.context["form"].errors["replica_urls"])
    page = login(researcher).post("/research/endpoints/new/", {**engine, "base_url": "http://127.0.0.1:8001/v1"})
    assert page.status_code == 200 and "base URL" in str(page.context["form"].errors["base_url"])
    assert not ModelEndpoint.objects.exists()
    assert login(researcher).post("/research/endpoints/new/", engine).status_code == 302
    assert ModelEndpoint.objects.get().replica_urls == []


def test_gpu_needs_on_an_endpoint_that_never_reads_them_are_refused(researcher, settings):
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*"]
    api = APIClient()
    api.force_authenticate(researcher)
    for kind, extra in (("openai", HTTP_ENDPOINT), ("transformers", {"name": "e", "model_name": "/models/m"})):
        for field, value in (("gpu_count", 4), ("gpu_memory_gib", 80)):
            response = api.post("/api/endpoints/", {**extra, "kind": kind, field: value}, format="json")
            assert response.status_code == 400 and field in response.json(), response.content
    assert not ModelEndpoint.objects.exists()
    # The defaults are what a client generated from the schema sends: still taken.
    response = api.post("/api/endpoints/", {**HTTP_ENDPOINT, "gpu_count": 1, "gpu_memory_gib": 0}, format="json")
    assert response.status_code == 201, response.content
    offline = {"name": "o", "kind": "vllm_offline", "model_name": "/models/m", "gpu_count": 4, "gpu_memory_gib": 80}
    response = api.post("/api/endpoints/", offline, format="json")
    assert response.status_code == 201 and ModelEndpoint.objects.get(name="o").gpu_count == 4
