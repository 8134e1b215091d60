"""A field the API does not know is a 400 naming it, on every write operation (issue 29): walked from the
generated OpenAPI schema, so an operation added later is checked too."""

import re

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

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
