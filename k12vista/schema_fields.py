"""Stored JSON read back as it is, with its shape in the OpenAPI schema (issue 29).

A model's JSONField answered as a bare ``{}`` in the schema, which a client generated from it cannot use.
``typed_json`` keeps the answer exactly as stored (no key dropped, no number rewritten) and types it in the
schema: by the input serializer that wrote it where there is one (PopulationInput, FilterParams...), by a
small output serializer, or by an explicit schema. ``open_object`` is the explicit schema of a value that
is open by design (a job's parameters and result differ by its kind): tests/test_api_schema_types.py
allowlists each of those by name, with its reason."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
INTEGERS_BY_KEY: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "integer"}}


def typed_json(shape: Any, **kwargs: Any) -> serializers.JSONField:
    """A read-only field of the stored value as it is, shown in the schema as ``shape`` (a serializer class
    or instance, or a schema dict). A class of its own, so the annotation survives DRF's field copies."""
    field_class = extend_schema_field(shape)(type("TypedJSONField", (serializers.JSONField,), {}))
    kwargs.setdefault("read_only", True)
    return field_class(**kwargs)


def open_object(description: str, values: Any = True) -> dict[str, Any]:
    """The schema of an object open by design: any keys, each value ``values`` (any JSON by default)."""
    return {"type": "object", "additionalProperties": values, "description": description}


# --- shapes shared by the reports the studio builds (issue 29) ------------------------------------


class ProportionOutput(serializers.Serializer):
    """A share as the reports show it (k12vista.stats.proportion): counts, value and Wilson 95% interval."""

    successes = serializers.IntegerField()
    n = serializers.IntegerField()
    value = serializers.FloatField(allow_null=True, help_text="successes / n; null when n is 0")
    ci95 = serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2, allow_null=True,
                                 help_text="[low, high]; null when n is 0")  # fmt: skip


class EstimateOutput(serializers.Serializer):
    """An agreement estimate (pem.agreement.estimate): value, standard error and 95% interval, or why not."""

    value = serializers.FloatField(allow_null=True)
    se = serializers.FloatField(allow_null=True)
    ci95 = serializers.ListField(child=serializers.FloatField(), min_length=2, max_length=2, allow_null=True)
    undefined = serializers.CharField(allow_null=True, help_text="why there is no value; null when there is one")
    n = serializers.IntegerField()
    observed = serializers.FloatField(allow_null=True)
    expected = serializers.FloatField(required=False, help_text="chance agreement, where the statistic has one")


def keyed(child: serializers.Field, keys: str, **kwargs: Any) -> serializers.DictField:
    """An object keyed by ``keys`` (free by design: labels, groups, dimensions), each value ``child``."""
    return serializers.DictField(child=child, help_text=f"keyed by {keys}", **kwargs)
