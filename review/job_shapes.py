"""What the review app's job (creating an audit over a large population) is started with and answers
(issue 29), declared with its handler and typed in the API's schema."""

from __future__ import annotations

from rest_framework import serializers

from annotation.models import Question
from k12vista.serializers import InputSerializer
from review.models import Audit


class PopulationInput(InputSerializer):
    """What an audit samples: ``kind`` and the one field that kind reads (services.clean_population)."""

    kind = serializers.ChoiceField(choices=Audit.Population.choices)
    status = serializers.ChoiceField(choices=Question.Status.choices, required=False,
                                     help_text="kind status: the questions in this status")  # fmt: skip
    hash_ids = serializers.ListField(child=serializers.CharField(max_length=64), required=False,
                                     help_text="kind batch: these questions")  # fmt: skip
    source_document = serializers.IntegerField(required=False, allow_null=True, help_text="kind import: its id")
    build = serializers.IntegerField(required=False, allow_null=True, help_text="kind pebench: a build id, or all")
    candidate_set = serializers.IntegerField(required=False, allow_null=True, help_text="kind candidate_set: a draw")


class CreateAuditParams(serializers.Serializer):
    """services.start_audit's arguments, the seed fixed and the inspectors by id."""

    name = serializers.CharField(allow_blank=True)
    population = PopulationInput()
    strata = serializers.ListField(child=serializers.CharField())
    per_stratum = serializers.IntegerField(allow_null=True)
    aql = serializers.FloatField(allow_null=True)
    seed = serializers.IntegerField()
    inspectors = serializers.ListField(child=serializers.IntegerField(), help_text="user ids")
    inspectors_per_item = serializers.IntegerField()


class CreateAuditResult(serializers.Serializer):
    audit = serializers.IntegerField()
    items = serializers.IntegerField(help_text="items sampled")
