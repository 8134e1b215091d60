"""PEBench adjudication and expert scoring through the API (issue 29): an inspector's queue of items the
annotators disagreed on, an item with every visible label, the decision on its gold labels; and an expert's
0-1 score of a model's answer. The same services and role rules as the pages (pem/views.py: adjudication_queue,
adjudicate, expert_score)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from inference.models import InferenceRun
from inference.models import Response as ModelResponse
from k12vista.roles import HasRole, Role
from k12vista.serializers import InputSerializer
from pem import labelling
from pem.api import ERROR, PROBLEMS, DraftEntry, ItemOutput, LabelOutput, refusal
from pem.forms import ItemChoiceForm
from pem.models import Adjudication, ChainOfThought, ExpertScore
from pem.views import DEFAULT_SAMPLE, EXPERTS, MAX_SAMPLE

INSPECTORS = HasRole(Role.INSPECTOR)


class QueuedItemOutput(serializers.Serializer):
    id = serializers.IntegerField()
    key = serializers.CharField()
    subject = serializers.CharField()
    stage = serializers.CharField()
    qtype = serializers.CharField()
    steps = serializers.IntegerField(source="n_steps")
    may_decide = serializers.SerializerMethodField(help_text="false for an item the caller labelled themselves")
    url = serializers.SerializerMethodField()

    def get_may_decide(self, cot: ChainOfThought) -> bool:
        return cot.pk not in self.context["labelled"]

    def get_url(self, cot: ChainOfThought) -> str:
        return f"/api/pem/adjudication/{cot.pk}/"


class AdjudicationOutput(serializers.ModelSerializer):
    item = serializers.IntegerField(source="cot_id", read_only=True)
    status = serializers.CharField(source="cot.status", read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, allow_null=True)

    class Meta:
        model = Adjudication
        fields = ["item", "status", "decided", "decided_by", "note", "guideline_version", "active_seconds"]
        read_only_fields = fields


class AdjudicationItemOutput(serializers.Serializer):
    item = ItemOutput(source="*")
    status = serializers.CharField()
    labels = serializers.SerializerMethodField(help_text="every label the caller may see: annotators', judges', gold")
    adjudication = serializers.SerializerMethodField()

    @extend_schema_field(LabelOutput(many=True))
    def get_labels(self, cot: ChainOfThought) -> Any:
        labels = labelling.visible_labels(cot, self.context["user"]).order_by("step__position", "source", "rater")
        return LabelOutput(labels.select_related("step"), many=True).data

    @extend_schema_field(AdjudicationOutput(allow_null=True))
    def get_adjudication(self, cot: ChainOfThought) -> dict | None:
        adjudication = Adjudication.objects.filter(cot=cot).first()
        return AdjudicationOutput(adjudication).data if adjudication is not None else None


class AdjudicateInput(InputSerializer):
    gold = serializers.DictField(child=DraftEntry(), help_text='{"<step position>": {"label": code, "reason": text}}; '
                                 "every step, an error label with its reason")  # fmt: skip
    note = serializers.CharField(max_length=4000, required=False, default="", allow_blank=True)
    active_seconds = serializers.FloatField(required=False, allow_null=True, default=None,
                                            help_text="active seconds spent deciding (clamped to 0..4 h)")  # fmt: skip


@extend_schema(
    parameters=[
        OpenApiParameter(name, str, description=f"only items of this {name}") for name in labelling.ITEM_FILTERS
    ],
    responses={200: QueuedItemOutput(many=True), 400: ERROR},
)
@api_view(["GET"])
@permission_classes([INSPECTORS])
def adjudication_queue(request: Request) -> Response:
    """The items waiting for an inspector's decision, narrowed as the queue page narrows them."""
    form = ItemChoiceForm(request.query_params)
    if not form.is_valid():
        return Response(form.errors, status=400)
    queue = labelling.adjudication_queue(form.choices()).annotate(n_steps=Count("steps"))
    labelled = set(queue.filter(labelling_tasks__annotator_id=request.user.pk).values_list("pk", flat=True))
    return Response(QueuedItemOutput(queue[:500], many=True, context={"labelled": labelled}).data)


@extend_schema(methods=["GET"], responses={200: AdjudicationItemOutput})
@extend_schema(methods=["POST"], request=AdjudicateInput, responses={200: AdjudicationOutput, 400: PROBLEMS})
@api_view(["GET", "POST"])
@permission_classes([INSPECTORS])
def adjudicate(request: Request, pk: int) -> Response:
    """GET: the item and every label the caller may see. POST: sets the gold label of every step (as the
    adjudication page does); an incomplete decision is a 400 naming the steps, and nothing is written."""
    cot = get_object_or_404(ChainOfThought, pk=pk)
    if request.method == "GET":
        return Response(AdjudicationItemOutput(cot, context={"user": request.user}).data)
    given = AdjudicateInput(data=request.data)
    given.is_valid(raise_exception=True)
    data = given.validated_data
    try:
        adjudication = labelling.adjudicate(cot=cot, gold_by_position=data["gold"], by=request.user, note=data["note"],
                                            active_seconds=data["active_seconds"])  # fmt: skip
    except labelling.LabellingError as exc:
        return refusal(exc)
    return Response(AdjudicationOutput(adjudication).data)


# --- checking the checkers: expert scores ----------------------------------------------------


class ExpertScoreInput(InputSerializer):
    score = serializers.FloatField(min_value=0, max_value=1, help_text="from 0 (wrong) to 1 (right)")
    note = serializers.CharField(max_length=4000, required=False, default="", allow_blank=True)


class ExpertScoreOutput(serializers.ModelSerializer):
    response = serializers.IntegerField(source="response_id", read_only=True)
    expert = serializers.CharField(source="expert.username", read_only=True)

    class Meta:
        model = ExpertScore
        fields = ["response", "expert", "score", "note", "created"]
        read_only_fields = fields


class SampledOutput(serializers.Serializer):
    response = serializers.IntegerField(source="response.pk")
    question = serializers.CharField(source="response.question.hash_id")
    answer = serializers.CharField(source="response.raw_output")
    score = ExpertScoreOutput(allow_null=True, help_text="the caller's score, or null while unscored")
    score_url = serializers.SerializerMethodField()

    def get_score_url(self, row: dict) -> str:
        return f"/api/pem/expert/responses/{row['response'].pk}/score/"


class SampleInput(InputSerializer):
    n = serializers.IntegerField(min_value=1, max_value=MAX_SAMPLE, required=False, default=DEFAULT_SAMPLE)


@extend_schema(parameters=[SampleInput], responses={200: SampledOutput(many=True)})
@api_view(["GET"])
@permission_classes([HasRole(*EXPERTS)])
def expert_sample(request: Request, pk: int) -> Response:
    """The run's fixed sample of answered responses (every expert scores the same ones; a larger ``n`` holds the
    smaller sample), each with the caller's score so far."""
    run = get_object_or_404(InferenceRun.objects.visible_to(request.user), pk=pk)
    given = SampleInput(data=request.query_params.dict())
    given.is_valid(raise_exception=True)
    sample = labelling.sample_responses(run, given.validated_data["n"])
    found = ModelResponse.objects.filter(pk__in=sample.response_ids).select_related("question")
    by_id = {r.pk: r for r in found}
    scores = labelling.experts_scores(request.user, sample.response_ids)
    rows = [{"response": by_id[i], "score": scores.get(i)} for i in sample.response_ids if i in by_id]
    return Response(SampledOutput(rows, many=True).data)


@extend_schema(request=ExpertScoreInput, responses={200: ExpertScoreOutput, 400: ERROR})
@api_view(["POST"])
@permission_classes([HasRole(*EXPERTS)])
def expert_score(request: Request, pk: int) -> Response:
    """Saves (or replaces) the caller's score of an answered response of a run they may see."""
    answers = ModelResponse.objects.filter(run__in=InferenceRun.objects.visible_to(request.user))
    response = get_object_or_404(answers, pk=pk, status=ModelResponse.Status.OK)
    given = ExpertScoreInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        score = labelling.record_expert_score(response=response, expert=request.user, **given.validated_data)
    except labelling.LabellingError as exc:
        return refusal(exc)
    return Response(ExpertScoreOutput(score).data)
