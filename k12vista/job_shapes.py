"""The shapes of jobs' params and results (issue 29) that several apps share: the per-line import report
(k12vista.reports.LineReport), a written file, a release build, the worker check's. Each kind declares its
own next to its handler (``job_handler(kind, params=..., result=...)``), built from these where they fit."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from k12vista.schema_fields import open_object


def part_of() -> serializers.IntegerField:
    """start_job(part_of=...) adds it: the job this one is a part of (a campaign's run, a run's part)."""
    return serializers.IntegerField(required=False, help_text="the job this one is a part of")


class ReasonParams(serializers.Serializer):
    """A line reason's parameters (k12vista.line_reasons): their names differ by the reason's code; a
    parameter may itself be a reason ({code, params})."""


class ReasonParamsSchema(OpenApiSerializerExtension):
    target_class = ReasonParams

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return open_object("Open by design: the parameters of reason_code, which differ by the code.")


class ErrorParams(serializers.Serializer):
    """A job's error_params: the parameters of its error_code (k12vista.job_text), which differ by the code."""


class ErrorParamsSchema(OpenApiSerializerExtension):
    target_class = ErrorParams

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return open_object("Open by design: the parameters of error_code (url, cause, count...).")


class ReasonRow(serializers.Serializer):
    """A report row's reason (LineReport.reason_row), worded in the reader's language by the API."""

    reason = serializers.CharField(help_text="in the caller's language")
    reason_code = serializers.CharField()
    reason_params = ReasonParams()


class KeyedLine(ReasonRow):
    """A line of a chains file (PEBench, PEM-800K), named by its key."""

    line = serializers.IntegerField()
    key = serializers.CharField()


class LineReportResult(serializers.Serializer):
    """k12vista.reports.LineReport.as_dict: every line counted, up to REPORT_LIMIT listed per kind."""

    created = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    conflicts = serializers.IntegerField()
    failed = serializers.IntegerField()
    conflict_lines = KeyedLine(many=True)
    conflict_lines_truncated = serializers.BooleanField()
    failed_lines = KeyedLine(many=True)
    failed_lines_truncated = serializers.BooleanField()


class WrittenFile(serializers.Serializer):
    """A file a job wrote, under MEDIA_ROOT."""

    path = serializers.CharField(help_text="relative to the media root")
    sha256 = serializers.CharField()
    count = serializers.IntegerField(help_text="records written")
    bytes = serializers.IntegerField()


class ReleaseParams(serializers.Serializer):
    """k12vista.releases.start: the release (a draft being built) the job builds."""

    release = serializers.IntegerField()


class ReleaseBuilt(serializers.Serializer):
    """k12vista.releases.build: the release built, or (a late re-delivery) that it was published already."""

    release = serializers.IntegerField()
    version = serializers.IntegerField(required=False)
    published = serializers.BooleanField(required=False, help_text="true: it was published, nothing was rebuilt")


class WorkerCheckParams(serializers.Serializer):
    hold_seconds = serializers.IntegerField(required=False, help_text="keeps the worker busy that long (0-3600)")


class WorkerCheckResult(serializers.Serializer):
    hostname = serializers.CharField()
    queue = serializers.CharField()
    status_seen_by_worker = serializers.CharField()
