"""The API fuzzed from its own OpenAPI schema (schemathesis): every operation, as
every role (a DRF token each), with inputs that fit the schema and inputs that do
not. Whatever comes in, the answer is never a 5xx (issue 10, "no 5xx from input").

Bounded: FUZZ_EXAMPLES (5) examples per operation, role and mode, so each role's
run takes about a minute (more on a loaded machine). Runs through the WSGI app in the test's thread and transaction."""

import os
from collections import Counter
from unittest import mock

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode

from inference.models import InferenceRun, ModelEndpoint
from k12vista.models import Job
from tests.annotation_factories import make_question

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))


@pytest.fixture
def some_objects(researcher):
    """A few rows, so that ids in paths sometimes hit something."""
    question = make_question(hash_id="fuzz1")
    endpoint = ModelEndpoint.objects.create(name="fuzz", base_url="http://127.0.0.1:8000/v1", model_name="m")
    run = InferenceRun.objects.create(name="r", endpoint=endpoint, mode="direct", created_by=researcher)
    job = Job.objects.create(kind="annotation.import_questions", started_by=researcher, params={})
    return question, endpoint, run, job


def fuzz_operation(operation, role: str, token: str, mode: GenerationMode, server_errors: list, seen: Counter) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis_settings(
        max_examples=EXAMPLES, deadline=None, database=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    def run(case):
        response = case.call(headers={"Authorization": f"Token {token}"})
        seen[response.status_code // 100] += 1
        if response.status_code >= 500:
            server_errors.append(f"{role}: {case.method} {case.formatted_path} {case.query} -> {response.status_code}")

    try:
        run()
    except Unsatisfiable:  # nothing to make invalid (an operation without parameters or body)
        assert mode == GenerationMode.NEGATIVE


@pytest.fixture
def wsgi_app():
    """The WSGI app, keeping the test's database connection open between requests
    (as Django's test client does), so requests see the test's rows."""
    for signal in (signals.request_started, signals.request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        for signal in (signals.request_started, signals.request_finished):
            signal.connect(close_old_connections)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("role", ["annotator", "inspector", "researcher", "admin"])
def test_no_input_gives_a_server_error(role, personas, some_objects, settings, wsgi_app):
    settings.ALLOWED_HOSTS = ["*"]  # the WSGI transport's Host
    token = Token.objects.create(user=personas[role]).key
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/?format=json", wsgi_app, headers={"Authorization": f"Token {token}"}
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 20
    server_errors: list[str] = []
    seen: Counter = Counter()  # answers by class (2xx, 4xx...), so a run refused wholesale cannot pass unseen
    # Jobs are queued, never run: the broker is not what is tested here.
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        for operation in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                fuzz_operation(operation, role, token, mode, server_errors, seen)
    assert server_errors == [], "\n".join(dict.fromkeys(server_errors))
    assert seen[2] and seen[4], seen
