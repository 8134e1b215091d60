"""The API fuzzed from its own OpenAPI schema (schemathesis): every operation, as
every role (a DRF token each), with inputs that fit the schema and inputs that do
not, then statefully (issue 26): operations chained by the links schemathesis infers
from the schema (create, then read, retry, cancel, delete what was created). Whatever
comes in, the answer is never a 5xx; and every operation answers some role with a 2xx
at least once, so the run is known to reach past the input checks.

So that it does: the rate limit is raised for the test (the 600/min throttle answered
most cases 429); a seeded population holds an object of every kind the API addresses
by id, visible to the roles that may read it; and each valid case addresses a real
one (ids and versions drawn from the database at call time, so objects the fuzz itself
created are addressed too).

Bounded: FUZZ_EXAMPLES (4) examples per operation, role and mode, and FUZZ_SCENARIOS
(10) stateful scenarios a role. Runs through the WSGI app in the test's thread and
transaction. The fuzz's own jobs are queued, never run; the seed's jobs ran in the seed."""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter, defaultdict
from typing import Any
from unittest import mock

import pytest
import schemathesis
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core import signals
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from schemathesis import GenerationMode

from annotation import corrections, releases
from annotation.models import Assignment, CandidateSet, Correction, Question, Release, SourceDocument
from annotation.pdf import register_pdf_upload
from bench.generate import iter_pem
from inference import assist, services
from inference.models import (
    AssistRun,
    BoardPin,
    BoardSnapshot,
    Campaign,
    InferenceRun,
    ModelEndpoint,
    PromptTemplate,
    ScoringRun,
)
from inference.models import Response as ModelResponse
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.throttling import FailOpenUserRateThrottle
from pem import chains as pem_chains
from pem import releases as pem_releases
from pem.models import ChainOfThought, LabellingTask, PanelRun, PEBenchBuild, PEBenchRelease, SplitRun
from pem.training import jobs as training_jobs
from pem.training.models import FilterRun, TrainingExport, TrainingRun
from review import services as review_services
from review.models import DIMENSIONS, Audit, AuditItem, LotDecision, Rating
from review.sampling import AQL_HEADINGS
from tests import fixtures_pdf
from tests.model_server import ML_PYTHON
from tests.pem_factories import add_to_pebench, answer, judge, make_cot
from tests.review_factories import audit_of, bulk_questions, rate
from tests.scripted_models import ScriptedHandler, serve
from tests.test_import_views import reference_lines
from tests.test_pem800k_export import kept_run
from tests.test_review_rework import finish_rework

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "4"))
SCENARIOS = int(os.environ.get("FUZZ_SCENARIOS", "10"))
ROLES = ["annotator", "inspector", "researcher", "admin"]

# The object behind each route's path parameter: (route prefix, model, field).
ROUTES = [
    ("/api/assist/{id}", AssistRun, "pk"),
    ("/api/benchmark/draws/{id}", CandidateSet, "pk"),
    ("/api/benchmark/releases/v{version}", Release, "version"),
    ("/api/campaigns/{id}", Campaign, "pk"),
    ("/api/corrections/{id}", Correction, "pk"),
    ("/api/endpoints/{id}", ModelEndpoint, "pk"),
    ("/api/inspect/audits/{id}", Audit, "pk"),
    ("/api/inspect/items/{item_pk}", AuditItem, "pk"),
    ("/api/inspect/items/{id}", AuditItem, "pk"),
    ("/api/inspect/lots/{id}", LotDecision, "pk"),
    ("/api/imports/{id}", SourceDocument, "pk"),
    ("/api/jobs/{id}", Job, "pk"),
    ("/api/leaderboard/pins/{id}", BoardPin, "inference_run_id"),
    ("/api/pem/items/{id}", ChainOfThought, "pk"),
    ("/api/pem/adjudication/{id}", ChainOfThought, "pk"),
    ("/api/pem/expert/runs/{id}", InferenceRun, "pk"),
    ("/api/pem/expert/responses/{id}", ModelResponse, "pk"),
    ("/api/pem/panels/{id}", PanelRun, "pk"),
    ("/api/pem/releases/v{version}", PEBenchRelease, "version"),
    ("/api/pem/splits/{id}", SplitRun, "pk"),
    ("/api/pem/tasks/{id}", LabellingTask, "pk"),
    ("/api/pem/training/exports/{id}", TrainingExport, "pk"),
    ("/api/pem/training/filter-runs/{id}", FilterRun, "pk"),
    ("/api/pem/training/runs/{id}", TrainingRun, "pk"),
    ("/api/questions/{hash_id}", Question, "hash_id"),
    ("/api/runs/{id}", InferenceRun, "pk"),
    ("/api/scoring/{id}", ScoringRun, "pk"),
    ("/api/work/{id}", Assignment, "pk"),
]


def ran(job_id: int) -> None:
    """Runs a job here and now, as a worker would: the seed holds what jobs really leave behind."""
    assert execute_job(job_id) == Job.Status.SUCCEEDED, Job.objects.get(pk=job_id).error


@pytest.fixture
def population(personas, settings, tmp_path, tiny_model_dir):
    """An object of every kind the API addresses by id, each visible to the roles that may read it;
    what a job leaves behind (release files, checked answers, an export, a checkpoint) made by the
    job itself, run here (the tiny model trains for the checkpoint: skipped without .venv-ml)."""
    settings.MEDIA_ROOT = tmp_path / "media"
    annotator, inspector, researcher = personas["annotator"], personas["inspector"], personas["researcher"]
    bulk_questions(4, subjects=["math"], worker=annotator)
    question = Question.objects.order_by("pk").first()
    endpoint = ModelEndpoint.objects.create(name="fuzz", base_url="http://127.0.0.1:8000/v1", model_name="m",
                                            created_by=researcher)  # fmt: skip
    judge_endpoint = ModelEndpoint.objects.create(name="fuzz-judge", base_url="http://127.0.0.1:8000/v1",
                                                  model_name="j", created_by=researcher)  # fmt: skip
    # A registered reference PEBench prompt (its text made up here): what PEBench's given-steps mode needs.
    PromptTemplate.objects.create(kind=PromptTemplate.Kind.JUDGE_GIVEN_STEPS, prompt_set="K12Vista@fuzz", name="given",
                                  user_template="{question} {solution} {answer} {student_answer}",
                                  content_hash="0" * 64)  # fmt: skip
    run = InferenceRun.objects.create(name="r", endpoint=endpoint, mode=InferenceRun.Mode.STEP_BY_STEP,
                                      created_by=researcher)  # fmt: skip
    response = answer(run, question, "第一步：3 + 4 = 7。\n第二步：所以答案是 7。")
    scoring = ScoringRun.objects.create(name="s", inference_run=run, judge=judge_endpoint, created_by=researcher,
                                        method=ScoringRun.Method.JUDGE_STEPS)  # fmt: skip
    judge(scoring, response, [("3 + 4 = 7", "CS", ""), ("答案是 7", "CS", "")])
    pem_chains.cots_from_run(inference_run=run)  # the answer's chain: labels from the scoring run need one
    BoardSnapshot.objects.create(scoring_run=scoring)  # finished: it may represent its run
    BoardPin.objects.create(inference_run=run, scoring_run=scoring)
    # A small-model difficulty run whose job asked a model (a scripted one on a local port) about
    # every question and checked its answers: what the difficulty filters preview and confirm.
    with serve(AnswersB) as base_url:
        small = services.save_endpoint(
            endpoint=ModelEndpoint(name="fuzz-small", base_url=base_url, model_name="s", accepts_images=True),
            user=researcher,
        )
        ran(assist.start_assist_run(kind=AssistRun.Kind.SMALL_MODEL_FILTER, endpoint=small, filters={},
                                    user=researcher).job_id)  # fmt: skip
    Campaign.objects.create(name="c", mode=InferenceRun.Mode.DIRECT, created_by=researcher)
    Job.objects.create(kind="k12vista.worker_check", started_by=researcher, params={})
    for persona in personas.values():
        Job.objects.create(kind="k12vista.worker_check", started_by=persona, params={})
    audited = bulk_questions(2, subjects=["physics"], status=Question.Status.AUDITED, worker=annotator)
    candidate = CandidateSet.objects.create(name="d", seed=1, bank_fingerprint="x", created_by=researcher)
    candidate.questions.set(audited)
    for _version in (1, 2):  # built drafts, files written by their job: one to publish, two to compare
        ran(releases.start_release(candidate_set=candidate, by=researcher).job_id)
    # A published release (v3) of its own, and a correction opened on one of its questions.
    corrected = bulk_questions(2, subjects=["chemistry"], status=Question.Status.AUDITED, worker=annotator)
    published = CandidateSet.objects.create(name="p", seed=1, bank_fingerprint="y", created_by=researcher)
    published.questions.set(corrected)
    v3 = releases.start_release(candidate_set=published, by=researcher)
    ran(v3.job_id)
    releases.publish_release(release=v3, by=researcher)
    corrections.open_correction(question=corrected[0], problem="答案错了", by=researcher)
    audit_of(inspectors=[inspector], per_stratum=None, inspectors_per_item=1, aql=float(AQL_HEADINGS[-1]), by=inspector)
    # Issue 29's operations: a rejected lot to audit again, one failed item to send back and one reworked
    # item to audit again, a PDF upload whose import never ran (to start again).
    plan_audit = Audit.objects.filter(aql__isnull=False).first()
    LotDecision.objects.create(audit=plan_audit, stratum="math", decision=LotDecision.Decision.REJECT,
                               question_ids=list(Question.objects.filter(subject="math").values_list("pk", flat=True)),
                               decided_by=inspector)  # fmt: skip
    failing = bulk_questions(2, subjects=["chemistry"], worker=annotator)
    failed_audit = audit_of({"kind": "batch", "hash_ids": [q.hash_id for q in failing]}, inspectors=[inspector],
                            per_stratum=2, inspectors_per_item=1, name="failing")  # fmt: skip
    for rating in Rating.objects.filter(item__audit=failed_audit).select_related("item", "inspector"):
        rate(rating, fail=("solution",))
    reworked = failed_audit.items.order_by("position").first()
    rework = review_services.send_for_rework(item=reworked, stage="step_correction", note="x", by=inspector)
    finish_rework(Assignment.objects.get(pk=rework.work_ref), annotator)
    register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("e.pdf", fixtures_pdf.text_pages(1)), user=annotator)
    cots = [make_cot(key=f"fuzz-{n}", question=question) for n in range(3)]
    add_to_pebench(*cots)
    LabellingTask.objects.create(cot=cots[0], annotator=annotator)
    for _version in (1, 2):
        ran(pem_releases.start_release(by=researcher).job_id)
    split = SplitRun.objects.create(name="sp", splitter=endpoint, created_by=researcher)
    split.inference_runs.set([run])
    panel = PanelRun.objects.create(name="pa", threshold=1, created_by=researcher)
    panel.inference_runs.set([run])
    panel.scoring_runs.set([scoring])
    # PEM-800K labels filtered, exported and trained on (the tiny model, one step) by their jobs.
    settings.TRANSFORMERS_PYTHON = str(ML_PYTHON)
    kept, _cots = kept_run(researcher)
    export = training_jobs.start_export(filter_run=kept, user=researcher, formats_wanted=["trl"],
                                        min_pixels=28 * 28, max_pixels=64 * 64)  # fmt: skip
    ran(export.job_id)
    export.refresh_from_db()
    training = training_jobs.start_training(export=export, base_model=str(tiny_model_dir), user=researcher,
                                            hyperparameters={"max_steps": 1, "lora": True, "lora_r": 4})  # fmt: skip
    ran(training.job_id)
    # Issue 29: imported questions waiting in the OCR review queue, for the annotator's work through the API.
    bulk_questions(2, subjects=["biology"], status=Question.Status.IMPORTED)
    # Issue 29: an audit without a plan whose lot an inspector decides, an item the annotators disagreed on.
    unplanned = bulk_questions(2, subjects=["geography"], worker=annotator)
    audit_of({"kind": "batch", "hash_ids": [q.hash_id for q in unplanned]}, inspectors=[inspector], per_stratum=2,
             inspectors_per_item=1, name="unplanned")  # fmt: skip
    for rating in Rating.objects.filter(item__audit__name="unplanned").select_related("item", "inspector"):
        rate(rating)
    ChainOfThought.objects.filter(pk=make_cot(key="fuzz-disputed").pk).update(status=ChainOfThought.Status.ADJUDICATION)


class AnswersB(ScriptedHandler):
    """A model that answers B to every question."""

    def do_POST(self):  # noqa: N802
        self.send_completion(self.read_body(), "最终答案：B")


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


class Tally:
    """What the run saw: 5xx answers, answers by class, and the operations some role had a 2xx from."""

    def __init__(self) -> None:
        self.server_errors: list[str] = []
        self.classes: Counter = Counter()
        self.succeeded: set[str] = set()
        self.by_operation: dict[str, Counter] = defaultdict(Counter)
        self.stateful: Counter = Counter()  # calls made by each role's scenarios

    def record(self, role: str, case, response) -> None:
        label = f"{case.operation.method.upper()} {case.operation.path}"
        self.count(role, label, response.status_code, f"{case.method} {case.formatted_path} {case.query}")

    def count(self, role: str, label: str, status: int, where: str) -> None:
        self.classes[status // 100] += 1
        self.by_operation[label][status] += 1
        if 200 <= status < 300:
            self.succeeded.add(label)
        if status >= 500:
            self.server_errors.append(f"{role}: {where} -> {status}")


# The object behind an id in a body or a query: (model, field, filter).
FIELDS = {
    "endpoint": (ModelEndpoint, "pk", {}), "endpoints": (ModelEndpoint, "pk", {}), "judge": (ModelEndpoint, "pk", {}),
    "judges": (ModelEndpoint, "pk", {}), "splitter": (ModelEndpoint, "pk", {}), "explainer": (ModelEndpoint, "pk", {}),
    "runs": (InferenceRun, "pk", {}), "inference_run": (InferenceRun, "pk", {}), "scoring_run": (ScoringRun, "pk", {}),
    "filter_run": (FilterRun, "pk", {"finished__isnull": False}), "export": (TrainingExport, "pk", {"status": "done"}),
    "build": (PEBenchBuild, "pk", {}), "inspectors": (get_user_model(), "pk", {"username": "ivan"}),
    "small": (AssistRun, "pk", {}), "text_only": (AssistRun, "pk", {}),
}  # fmt: skip
COMPARED = {"/api/benchmark/releases/compare/": Release, "/api/pem/releases/compare/": PEBenchRelease}


def real(model, field: str, where: dict, rng: random.Random, like):
    values = list(model.objects.filter(**where).order_by("-pk").values_list(field, flat=True)[:10])
    if not values:
        return like
    return [rng.choice(values)] if isinstance(like, list) else rng.choice(values)


def with_real_ids(case, rng: random.Random):
    """The case addressing objects that exist (the newest few of their kind), where there are:
    in its path, in its body's id fields, and the versions a comparison compares."""
    for prefix, model, field in ROUTES:
        if case.operation.path.startswith(prefix):
            name = re.search(r"\{(\w+)\}", prefix).group(1)  # type: ignore[union-attr]
            given = dict(case.path_parameters or {})
            case.path_parameters = {**given, name: real(model, field, {}, rng, given.get(name))}
    if isinstance(case.body, dict):
        for name, (model, field, where) in FIELDS.items():
            if name in case.body:
                case.body[name] = real(model, field, where, rng, case.body[name])
    if case.operation.path in COMPARED:
        versions = list(COMPARED[case.operation.path].objects.values_list("version", flat=True))
        if len(versions) > 1:
            case.query = {**(case.query or {}), "old": min(versions), "new": max(versions)}
    return case


def fuzz_operation(operation, role: str, token: str, mode: GenerationMode, tally: Tally, rng: random.Random) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis_settings(
        max_examples=EXAMPLES, deadline=None, database=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    def run(case):
        if mode == GenerationMode.POSITIVE:
            case = with_real_ids(case, rng)
        tally.record(role, case, case.call(headers={"Authorization": f"Token {token}"}))

    try:
        run()
    except Unsatisfiable:  # nothing to make invalid (an operation without parameters or body)
        assert mode == GenerationMode.NEGATIVE


def fuzz_statefully(schema, role: str, token: str, tally: Tally) -> None:
    """Scenarios along the links schemathesis infers (a POST's id to the GET, retry, cancel or
    DELETE of what it made), checked for 5xx only: the other checks (schema conformance) are not
    what this test is about."""

    class Scenarios(schema.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case):
            return {"headers": {"Authorization": f"Token {token}"}}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            tally.stateful[role] += 1
            tally.record(role, case, response)

    Scenarios.run(
        settings=hypothesis_settings(
            max_examples=SCENARIOS,
            stateful_step_count=6,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )  # fmt: skip
    )


def uploads() -> list[tuple[str, str, dict]]:
    """(role, operation, form): a valid file for each upload, sent by the test client (schemathesis
    sends bytes in a multipart body as a field, not a file)."""
    chains = (django_settings.BASE_DIR / "fixtures" / "pebench-demo.jsonl").read_bytes()
    pem_lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in list(iter_pem(0.0001, 3))[:3])
    ratings = "item,rater,label\n1,a,CS\n1,b,CS\n2,a,CE\n2,b,CS\n3,a,CE\n3,b,CE\n"
    return [
        ("researcher", "POST /api/pem/data/imports/", {"file": SimpleUploadedFile("c.jsonl", chains), "name": "c"}),
        ("researcher", "POST /api/pem/training/imports/",
         {"file": SimpleUploadedFile("p.jsonl", pem_lines.encode()), "name": "p"}),
        ("researcher", "POST /api/pem/agreement/", {"file": SimpleUploadedFile("r.csv", ratings.encode())}),
        ("annotator", "POST /api/imports/pdf/",
         {"file": SimpleUploadedFile("e.pdf", fixtures_pdf.text_pages(1)), "subject": "math", "grade": 9}),
        ("researcher", "POST /api/imports/questions/", {"file": SimpleUploadedFile("q.jsonl", reference_lines())}),
    ]  # fmt: skip


def valid_requests(personas) -> list[tuple[str, str, Any]]:
    """(role, operation, the case's parts): one valid request for each operation whose valid input
    the generator does not make (a file in a format, labels for a task's steps, a verdict per
    dimension, a URL the allowlist admits), sent with the fuzz's own cases."""
    inspector = personas["inspector"]
    item = AuditItem.objects.filter(ratings__inspector=inspector).first()
    task = LabellingTask.objects.select_related("cot").first()
    steps = {str(step.position): {"label": "CS", "reason": ""} for step in task.cot.steps.all()}
    run = InferenceRun.objects.filter(created_by=personas["researcher"]).order_by("pk").first()
    judge_endpoint = ModelEndpoint.objects.get(name="fuzz-judge")
    correction = Correction.objects.get()
    free = Question.objects.filter(status=Question.Status.RELEASED).exclude(pk=correction.question_id).first()
    unplanned = Audit.objects.get(name="unplanned")
    scoring = ScoringRun.objects.get(name="s")
    disputed = ChainOfThought.objects.get(key="fuzz-disputed")
    return [
        # First the publishes: a draft is published only while what it holds is as it was built.
        ("researcher", "POST /api/benchmark/releases/v{version}/publish/", {"path_parameters": {"version": 1}}),
        ("researcher", "POST /api/pem/releases/v{version}/publish/", {"path_parameters": {"version": 1}}),
        ("researcher", "GET /api/inspect/audit-plan/", {"query": {"lot_size": 100, "aql": float(AQL_HEADINGS[0])}}),
        ("researcher", "POST /api/endpoints/", {"body": {"name": "made", "model_name": "m",
                                                         "base_url": "http://127.0.0.1:8001/v1"}}),
        ("admin", "POST /api/inspect/audits/", {"body": {
            "name": "made", "population": {"kind": "status", "status": "solution_corrected"}, "strata": ["subject"],
            "per_stratum": 1, "inspectors": [inspector.username], "inspectors_per_item": 1}}),
        ("inspector", "POST /api/inspect/items/{item_pk}/rating/", {"path_parameters": {"item_pk": item.pk}, "body": {
            "verdicts": {name: True for name, _label in DIMENSIONS[item.audit.kind]}}}),
        ("researcher", "POST /api/pem/data/from-run/", {"body": {"inference_run": run.pk}}),
        # Runs, splits and labels start only on something (issue 29): a request that names what holds it.
        ("researcher", "POST /api/pem/data/from-scoring/", {"body": {"scoring_run": scoring.pk}}),
        ("researcher", "POST /api/assist/", {"body": {"kind": "small_model_filter", "endpoint": run.endpoint_id}}),
        ("researcher", "POST /api/pem/splits/", {"body": {"splitter": run.endpoint_id, "runs": [run.pk]}}),
        ("researcher", "POST /api/runs/", {"body": {"endpoint": run.endpoint_id, "mode": "direct", "filters": {}}}),
        ("researcher", "POST /api/runs/{id}/scoring/", {"path_parameters": {"id": run.pk},
                                                        "body": {"judge": judge_endpoint.pk}}),
        ("annotator", "PUT /api/pem/tasks/{id}/draft/", {"path_parameters": {"id": task.pk},
                                                         "body": {"version": task.version, "draft": steps}}),
        ("annotator", "POST /api/pem/tasks/{id}/submit/", {"path_parameters": {"id": task.pk},
                                                           "body": {"version": task.version + 1, "draft": steps}}),
        ("researcher", "POST /api/benchmark/draws/{id}/release/",
         {"path_parameters": {"id": CandidateSet.objects.order_by("pk").first().pk}, "body": {}}),
        ("researcher", "POST /api/difficulty-filters/preview/",
         {"body": {"small": [AssistRun.objects.order_by("pk").first().pk]}}),
        ("researcher", "POST /api/difficulty-filters/confirm/", lambda answers: {"body": {
            "small": [AssistRun.objects.order_by("pk").first().pk],
            "fingerprint": answers["POST /api/difficulty-filters/preview/"].json().get("fingerprint", "")}}),
        ("inspector", "POST /api/inspect/audits/{id}/decide/", {"path_parameters": {"id": item.audit_id}}),
        ("researcher", "POST /api/corrections/", {"body": {"hash_id": free.hash_id, "problem": "题干有误"}}),
        ("annotator", "POST /api/corrections/{id}/fix/", {"path_parameters": {"id": correction.pk},
                                                          "body": {"changes": {"source": "更正后的出处"}}}),
        ("inspector", "POST /api/corrections/{id}/check/", {"path_parameters": {"id": correction.pk},
                                                            "body": {"decision": "accept"}}),
        ("researcher", "POST /api/leaderboard/pins/",
         {"body": {"scoring_run": ScoringRun.objects.order_by("pk").first().pk}}),
        ("researcher", "POST /api/pem/panels/",
         {"body": {"name": "made", "judges": [judge_endpoint.pk], "runs": [run.pk]}}),
        ("researcher", "POST /api/pem/pebench/given-steps/", {"body": {"judge": judge_endpoint.pk}}),
        ("researcher", "GET /api/pem/pebench/given-steps/", {"query": {"judge": judge_endpoint.pk}}),
        # Labels that exist (kept_run's import "pem"): a run over labels that do not is refused (issue 29).
        ("researcher", "POST /api/pem/training/filter-runs/", {"body": {"source": "imported", "rater": "pem"}}),
        ("researcher", "POST /api/pem/training/runs/",
         {"body": {"export": TrainingExport.objects.order_by("pk").first().pk, "base_model": "m"}}),
        # Issue 29: rework, re-audit of an item and of a lot, a PDF import started again.
        ("inspector", "POST /api/inspect/items/{id}/rework/", {"path_parameters": {"id": AuditItem.objects.filter(
            audit__name="failing").order_by("position").last().pk}, "body": {"stage": "step_correction", "note": "x"}}),
        ("inspector", "POST /api/inspect/items/{id}/reaudit/", {"path_parameters": {"id": AuditItem.objects.filter(
            audit__name="failing").order_by("position").first().pk}}),
        ("inspector", "POST /api/inspect/lots/{id}/reaudit/",
         {"path_parameters": {"id": LotDecision.objects.get().pk}}),
        ("annotator", "POST /api/imports/{id}/retry/", {"path_parameters": {"id": SourceDocument.objects.get().pk}}),
        ("researcher", "POST /api/pem/training/runs/{id}/endpoint/",
         {"path_parameters": {"id": TrainingRun.objects.order_by("pk").first().pk}, "body": {"name": "ep"}}),
        # Issue 29: the annotator's work: claim, read, save, accept; claim the next and reject it.
        ("annotator", "GET /api/work/", {}),
        ("annotator", "POST /api/work/claim/", {"body": {"task": "ocr_review"}}),
        ("annotator", "GET /api/work/{id}/", lambda answers: {"path_parameters": {"id": held(answers)["id"]}}),
        ("annotator", "POST /api/work/{id}/save/", lambda answers: {"path_parameters": {"id": held(answers)["id"]},
         "body": {"version": held(answers)["question"]["version"], "changes": {"source": "订正的出处"}}}),
        ("annotator", "POST /api/work/{id}/accept/", lambda answers: {"path_parameters": {"id": held(answers)["id"]},
         "body": {"version": answers["POST /api/work/{id}/save/"].json()["question"]["version"]}}),
        ("annotator", "POST /api/work/claim/", {"body": {"task": "ocr_review"}}),
        ("annotator", "POST /api/work/{id}/reject/", lambda answers: {"path_parameters": {"id": held(answers)["id"]},
         "body": {"reason": "题目不完整"}}),
        # Issue 25: the guidelines (a kind's text read by anyone, a new version by an admin).
        ("annotator", "GET /api/guidelines/{kind}/", {"path_parameters": {"kind": "audit"}}),
        ("admin", "POST /api/guidelines/{kind}/", {"path_parameters": {"kind": "audit"},
                                                   "body": {"text": "每个维度单独判断"}}),
        # Issue 29: the pages' remaining steps: deciding a lot of an audit without a plan and closing it,
        # adjudication, expert scores, an endpoint edited and switched off, retrying a campaign and a panel.
        ("inspector", "POST /api/inspect/audits/{id}/decide/", {"path_parameters": {"id": unplanned.pk},
         "body": {"stratum": "geography", "decision": "accept"}}),
        ("inspector", "POST /api/inspect/audits/{id}/close/", {"path_parameters": {"id": unplanned.pk}}),
        ("inspector", "GET /api/pem/adjudication/", {}),
        ("inspector", "GET /api/pem/adjudication/{id}/", {"path_parameters": {"id": disputed.pk}}),
        ("inspector", "POST /api/pem/adjudication/{id}/", {"path_parameters": {"id": disputed.pk}, "body": {
            "gold": {str(step.position): {"label": "CS"} for step in disputed.steps.all()}}}),
        ("inspector", "GET /api/pem/expert/runs/{id}/", {"path_parameters": {"id": run.pk}}),
        ("inspector", "POST /api/pem/expert/responses/{id}/score/",
         {"path_parameters": {"id": run.responses.first().pk}, "body": {"score": 0.5}}),
        ("researcher", "GET /api/endpoints/{id}/", {"path_parameters": {"id": judge_endpoint.pk}}),
        ("researcher", "PATCH /api/endpoints/{id}/", {"path_parameters": {"id": judge_endpoint.pk},
         "body": {"max_concurrency": 4}}),
        ("researcher", "POST /api/endpoints/{id}/deactivate/",
         lambda answers: {"path_parameters": {"id": answers["POST /api/endpoints/"].json()["id"]}}),
        ("researcher", "POST /api/campaigns/{id}/retry/", {"path_parameters": {"id": Campaign.objects.get().pk}}),
        ("researcher", "POST /api/pem/panels/{id}/restart/",
         {"path_parameters": {"id": PanelRun.objects.order_by("pk").first().pk}}),
    ]  # fmt: skip


def held(answers: dict) -> dict:
    """The assignment the annotator's last claim gave."""
    return answers["POST /api/work/claim/"].json()


def send(role: str, label: str, parts: dict, by_label: dict, token: str, tally: Tally):
    case = by_label[label].Case(**({"media_type": "application/json"} if "body" in parts else {}) | parts)
    response = case.call(headers={"Authorization": f"Token {token}"})
    tally.record(role, case, response)
    return response


@pytest.mark.timeout(900)
def test_no_input_gives_a_server_error_and_every_operation_answers_someone(
    personas, population, settings, wsgi_app, monkeypatch
):
    settings.ALLOWED_HOSTS = ["*"]  # the WSGI transport's Host
    # The throttle is what it limits, not what is fuzzed: at 600/min most cases were 429s.
    monkeypatch.setattr(FailOpenUserRateThrottle, "THROTTLE_RATES", {"user": "1000000/min"})
    tally = Tally()
    rng = random.Random(26)  # noqa: S311 - reproducible, not secret
    tokens = {role: Token.objects.create(user=personas[role]).key for role in ROLES}
    schemas = {
        role: schemathesis.openapi.from_wsgi(
            "/api/schema/?format=json", wsgi_app, headers={"Authorization": f"Token {token}"}
        )
        for role, token in tokens.items()
    }
    operations = [result.ok() for result in schemas["researcher"].get_all_operations()]
    assert len(operations) > 20
    labels = {f"{operation.method.upper()} {operation.path}": operation for operation in operations}
    # Jobs are queued, never run: the broker is not what is tested here.
    with mock.patch("k12vista.tasks.run_job.apply_async"):
        # First the valid requests, on the population as seeded (the fuzz changes it: retries,
        # submissions, cancels).
        answers: dict = {}
        for role, label, parts in valid_requests(personas):
            parts = parts(answers) if callable(parts) else parts  # made from an earlier answer
            answers[label] = send(role, label, parts, labels, tokens[role], tally)
        for role in ROLES:
            for operation in (result.ok() for result in schemas[role].get_all_operations()):
                for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                    fuzz_operation(operation, role, tokens[role], mode, tally, rng)
            fuzz_statefully(schemas[role], role, tokens[role], tally)
        # Last: Django's test client connects close_old_connections again once it is done.
        for role, label, form in uploads():
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {tokens[role]}")
            tally.count(role, label, client.post(label.split()[1], form, format="multipart").status_code, label)
    assert tally.server_errors == [], "\n".join(dict.fromkeys(tally.server_errors))
    assert tally.classes[2] and tally.classes[4], tally.classes
    assert all(tally.stateful[role] > SCENARIOS for role in ROLES), tally.stateful  # scenarios of several steps
    never = sorted(set(labels) - tally.succeeded)
    assert never == [], "no 2xx from:\n" + "\n".join(f"{label}: {dict(tally.by_operation[label])}" for label in never)
