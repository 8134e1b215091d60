"""What the inference app's jobs (runs, scoring, campaigns, assist runs, the filters' confirmation, the
reference results export) are started with and answer (issue 29), declared with their handlers
(``job_handler(kind, params=..., result=...)``) and typed in the API's schema per kind."""

from __future__ import annotations

from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from k12vista.job_shapes import part_of

# --- inference.run, inference.run_local, inference.run_offline -------------------------------


class RunParams(serializers.Serializer):
    """A run's job; a part of a large run (run_parts) also has the answer rows it answers."""

    run_id = serializers.IntegerField()
    part_of = part_of()
    first_id = serializers.IntegerField(required=False, help_text="a part's first answer row")
    last_id = serializers.IntegerField(required=False, help_text="a part's last answer row")


class RunCounts(serializers.Serializer):
    """InferenceRun.counts (or a part's): answers per status."""

    total = serializers.IntegerField()
    ok = serializers.IntegerField()
    failed = serializers.IntegerField()
    pending = serializers.IntegerField()


# --- inference.score, inference.score_local, inference.score_offline -------------------------


class ScoreParams(serializers.Serializer):
    """A scoring run's job; a part of a large one (run_parts) also has the judgment rows it judges."""

    scoring_run_id = serializers.IntegerField()
    part_of = part_of()
    first_id = serializers.IntegerField(required=False, help_text="a part's first judgment row")
    last_id = serializers.IntegerField(required=False, help_text="a part's last judgment row")


class CoverageOutput(serializers.Serializer):
    """scoring.coverage: judgments per status, how many have a score, of how many responses."""

    pending = serializers.IntegerField()
    ok = serializers.IntegerField()
    parse_failed = serializers.IntegerField()
    call_failed = serializers.IntegerField()
    no_response = serializers.IntegerField()
    scored = serializers.IntegerField()
    total = serializers.IntegerField()
    coverage = serializers.FloatField(allow_null=True)


class PartJudgments(serializers.Serializer):
    """A part's own counts (scoring.finish_judging)."""

    judgments = serializers.DictField(child=serializers.IntegerField(), help_text="status -> judgments")


SCORE_RESULT = PolymorphicProxySerializer(
    component_name="ScoreResult", serializers=[CoverageOutput, PartJudgments], resource_type_field_name=None
)


# --- inference.campaign ----------------------------------------------------------------------


class CampaignParams(serializers.Serializer):
    campaign_id = serializers.IntegerField()


class CampaignResult(serializers.Serializer):
    """campaigns.finished_result."""

    runs = serializers.IntegerField()
    answered = serializers.IntegerField()
    failed = serializers.IntegerField()
    engine_runs = serializers.IntegerField(help_text="runs answered by their own jobs, parts of the campaign's")
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()


# --- inference.assist ------------------------------------------------------------------------


class AssistParams(serializers.Serializer):
    run_id = serializers.IntegerField()


class AssistCountsOutput(serializers.Serializer):
    """assist.counts: what happened to the run's questions."""

    total = serializers.IntegerField()
    ok = serializers.IntegerField(help_text="the model's output was used")
    skipped = serializers.IntegerField(help_text="needed no call (no raw solution, no figure, no reference answer)")
    skipped_why = serializers.DictField(child=serializers.IntegerField(), help_text="reason -> questions")
    parse_failed = serializers.IntegerField()
    call_failed = serializers.IntegerField()
    pending = serializers.IntegerField()


# --- inference.confirm_filters ---------------------------------------------------------------


class ConfirmFiltersParams(serializers.Serializer):
    small = serializers.ListField(child=serializers.IntegerField(), help_text="the small models' assist runs")
    text_only = serializers.IntegerField(allow_null=True, help_text="the text-only assist run, if any")
    fingerprint = serializers.CharField(help_text="of the preview confirmed")


class ConfirmFiltersResult(serializers.Serializer):
    rejected = serializers.IntegerField(help_text="questions rejected now")


# --- inference.export_reference_results ------------------------------------------------------


class ReferenceResultsParams(serializers.Serializer):
    scoring_run_id = serializers.IntegerField()


class ReferenceResultsResult(serializers.Serializer):
    """reference.results.write_results, and the zip's path under the media root."""

    model = serializers.CharField()
    mode = serializers.CharField()
    infer = serializers.IntegerField()
    eval = serializers.IntegerField()
    outside_tags = serializers.IntegerField()
    path = serializers.CharField()
