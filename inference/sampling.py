"""An endpoint's default parameters, typed (issue 29): the sampling parameters the studio passes on to a
model (services.ALLOWED_PARAMS) and the offline engine's options (``engine``). The one validator,
inference.models.validate_default_params, checks a value with this serializer for the form and the API
alike; the OpenAPI schema shows it for EndpointInput and EndpointOutput."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from k12vista.serializers import InputSerializer

# The keys a model server is sent; any other key of a run's parameters is never sent.
SAMPLING_KEYS = frozenset({"temperature", "top_p", "max_tokens", "presence_penalty", "frequency_penalty", "stop", "n"})


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]})
class StopField(serializers.Field):
    """OpenAI's ``stop``: one string or a list of strings."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list):
            return serializers.ListField(
                child=serializers.CharField(trim_whitespace=False), max_length=16
            ).run_validation(data)
        return serializers.CharField(trim_whitespace=False).run_validation(data)

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": True,
        "description": "Open by design: the keyword arguments of vllm.LLM as given (tensor_parallel_size, "
        "pipeline_parallel_size, max_model_len...), for the offline engine only.",
    }
)
class EngineOptionsField(serializers.DictField):
    """The offline engine's options, passed to vllm.LLM as they are."""


class DefaultParams(InputSerializer):
    temperature = serializers.FloatField(min_value=0, max_value=2, required=False)
    top_p = serializers.FloatField(min_value=0, max_value=1, required=False)
    max_tokens = serializers.IntegerField(min_value=1, max_value=200_000, required=False)
    presence_penalty = serializers.FloatField(min_value=-2, max_value=2, required=False)
    frequency_penalty = serializers.FloatField(min_value=-2, max_value=2, required=False)
    stop = StopField(required=False)
    n = serializers.IntegerField(min_value=1, max_value=128, required=False)
    engine = EngineOptionsField(required=False)


KNOWN_KEYS = frozenset(DefaultParams().fields)


def error_lines(errors: Any, where: str = "") -> list[tuple[str, str]]:
    """(where, message) for each of a serializer's errors, nested ones named by their path (stop.1)."""
    if isinstance(errors, dict):
        return [line for key, value in errors.items() for line in error_lines(value, f"{where}.{key}".lstrip("."))]
    if isinstance(errors, list):
        return [line for value in errors for line in error_lines(value, where)]
    return [(where, str(errors))]


@extend_schema_field(DefaultParams)
class DefaultParamsField(serializers.JSONField):
    """An endpoint's default_params in the API: the value as given (no number is rewritten), checked by
    inference.models.validate_default_params, and typed as DefaultParams in the schema."""
