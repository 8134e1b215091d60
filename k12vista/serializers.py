import copy
import re
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from django.utils.translation import gettext
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework import serializers

from k12vista import jobs
from k12vista.job_shapes import ErrorParams
from k12vista.line_reasons import worded_rows
from k12vista.models import Job
from k12vista.schema_fields import typed_json


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


class WordedResultField(serializers.JSONField):
    """A job's result with each import report row's ``reason`` worded in the caller's language
    (k12vista.line_reasons); ``reason_code`` and ``reason_params`` stay beside it."""

    def to_representation(self, value: Any) -> Any:
        return super().to_representation(worded_rows(value))


class JobSerializer(serializers.ModelSerializer):
    started_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="null for a job a command or the studio started",
    )
    percent = serializers.IntegerField(read_only=True, allow_null=True)
    kind_label = serializers.CharField(read_only=True, help_text="The kind in words, in the caller's language.")
    title = serializers.CharField(source="display_title", read_only=True)
    error = serializers.CharField(
        source="error_message", read_only=True, help_text="Why it failed, in the caller's language ('' if it did not)."
    )
    error_code = serializers.CharField(
        read_only=True, help_text="A failure stated as a code (e.g. inference.endpoint_unreachable), or ''."
    )
    error_params = typed_json(ErrorParams)
    # What a job is given and what it answers differ by its kind: typed per kind in the schema (JobSchema).
    params = serializers.JSONField(read_only=True)
    result = WordedResultField(read_only=True)
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


# The result of a job that has not succeeded (queued, running, failed, cancelled): an empty object.
NOT_YET = {"type": "object", "properties": {}, "additionalProperties": False}


def variant_name(kind: str) -> str:
    """The schema component of a kind's job: annotation.draw_candidates -> JobAnnotationDrawCandidates."""
    return "Job" + "".join(word.capitalize() for word in re.split(r"[._]", kind))


class JobSchema(OpenApiSerializerExtension):
    """A job in the schema (issue 29): one of its kinds' variants, told apart by ``kind`` (an enum of one
    value each), each with the params and result its handler declared (k12vista.jobs.job_handler). Built
    from the registry, so a kind registered is a kind typed."""

    target_class = JobSerializer

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        base = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        variants: dict[str, dict[str, str]] = {}
        for kind in jobs.registered_kinds():
            shapes = jobs.registration(kind)
            schema = copy.deepcopy(base)
            schema["properties"]["kind"] = {"type": "string", "enum": [kind]}
            schema["properties"]["params"] = auto_schema.resolve_serializer(shapes.params, direction).ref
            schema["properties"]["result"] = {
                "anyOf": [auto_schema.resolve_serializer(shapes.result, direction).ref, NOT_YET],
                "description": "What the job made, once it has succeeded (empty until then); an import "
                "report's rows give their reason in the caller's language (reason), as a code (reason_code) "
                "and its parameters (reason_params).",
            }  # fmt: skip
            component = ResolvedComponent(name=variant_name(kind), type=ResolvedComponent.SCHEMA, object=kind,
                                          schema=schema)  # fmt: skip
            auto_schema.registry.register_on_missing(component)
            variants[kind] = component.ref
        return {
            "oneOf": list(variants.values()),
            "discriminator": {"propertyName": "kind", "mapping": {k: ref["$ref"] for k, ref in variants.items()}},
        }
