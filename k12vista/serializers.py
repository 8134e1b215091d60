from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from django.utils.translation import gettext
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from k12vista.line_reasons import worded_rows
from k12vista.models import Job
from k12vista.schema_fields import open_object, typed_json


class RefuseUnknownFields:
    """Every write serializer's base (issue 29): a field the API does not know, or one it only reports, is
    a 400 naming it, instead of being dropped silently (a panel's ``params``, a misspelt option). Nested
    inputs check their own keys the same way, so ``params.temprature`` is named too."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            fields = self.fields  # type: ignore[attr-defined]
            errors: dict[str, list[str]] = {}
            for name in data:
                field = fields.get(name)
                if field is None:
                    errors[str(name)] = [gettext("Unknown field: the API does not take %(name)s.") % {"name": name}]
                elif field.read_only:
                    errors[str(name)] = [gettext("Read-only field: %(name)s cannot be set.") % {"name": name}]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)  # type: ignore[misc]


class InputSerializer(RefuseUnknownFields, serializers.Serializer):
    """The base of request bodies."""


class ModelInputSerializer(RefuseUnknownFields, serializers.ModelSerializer):
    """The base of request bodies written into a model."""


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.EmailField()
    roles = serializers.ListField(child=serializers.CharField())
    language = serializers.CharField()


@extend_schema_field(open_object("Open by design: the job's result, which differs by its kind."))
class WordedResultField(serializers.JSONField):
    """A job's result with each import report row's ``reason`` worded in the caller's language
    (k12vista.line_reasons); ``reason_code`` and ``reason_params`` stay beside it."""

    def to_representation(self, value: Any) -> Any:
        return super().to_representation(worded_rows(value))


class JobSerializer(serializers.ModelSerializer):
    started_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)
    percent = serializers.IntegerField(read_only=True, allow_null=True)
    kind_label = serializers.CharField(read_only=True, help_text="The kind in words, in the caller's language.")
    title = serializers.CharField(source="display_title", read_only=True)
    error = serializers.CharField(
        source="error_message", read_only=True, help_text="Why it failed, in the caller's language ('' if it did not)."
    )
    error_code = serializers.CharField(
        read_only=True, help_text="A failure stated as a code (e.g. inference.endpoint_unreachable), or ''."
    )
    error_params = typed_json(open_object("Open by design: the parameters of error_code (url, cause, count...)."))
    # Open by design (issue 29): what a job is given and what it answers differ by its kind.
    params = typed_json(open_object("Open by design: the job's parameters, which differ by its kind."))
    result = WordedResultField(
        read_only=True,
        help_text="What the job made; an import report's rows give their reason in the caller's language "
        "(reason), as a code (reason_code) and its parameters (reason_params).",
    )  # fmt: skip
    # Not the model's three choices: a part of an offline run goes to its GPU class's queue, gpu-<class>.
    queue = serializers.CharField(
        read_only=True, help_text="The workers' queue: cpu, io, gpu, or gpu-<class> for a GPU class (e.g. gpu-4x80g)."
    )
    waiting_for_broker = serializers.BooleanField(
        read_only=True, help_text="Queued while the broker is unreachable; it starts once the broker is back."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "kind_label",
            "title",
            "queue",
            "status",
            "done",
            "total",
            "percent",
            "waiting_for_broker",
            "error",
            "error_code",
            "error_params",
            "result",
            "params",
            "started_by",
            "created",
            "started_at",
            "finished_at",
            "cancel_requested",
            "attempts",
        ]
        read_only_fields = fields
