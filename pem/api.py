"""The labelling API: an annotator's tasks, a task's item and draft, saving and submitting,
and an item's labels.

Every endpoint calls the same operations as the screens (pem.labelling). The
blind rule holds here as on the pages: a task's item carries no labels at all,
and the labels endpoint returns only what ``visible_labels`` allows.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.request import Request
from rest_framework.response import Response

from k12vista.roles import HasRole, Role, has_role
from k12vista.schema_fields import typed_json
from k12vista.serializers import InputSerializer
from k12vista.vocabulary import QuestionType, Stage, Subject
from pem import labelling
from pem.models import ChainOfThought, LabellingTask, Step, StepLabel

ANNOTATORS = HasRole(Role.ANNOTATOR)
ITEM_READERS = HasRole(Role.ANNOTATOR, *labelling.READERS_OF_ALL_LABELS)


# --- serializers -----------------------------------------------------------------------


class StepOutput(serializers.ModelSerializer):
    class Meta:
        model = Step
        fields = ["position", "text"]
        read_only_fields = fields


class ItemOutput(serializers.ModelSerializer):
    """What an annotator labels: the question, its reference, the model's steps. No labels."""

    steps = StepOutput(many=True, read_only=True)
    figures = serializers.SerializerMethodField()

    class Meta:
        model = ChainOfThought
        fields = [
            "id", "key", "subject", "grade", "stage", "qtype", "question_text", "figures", "reference_answer",
            "reference_solution", "steps",
        ]  # fmt: skip
        read_only_fields = fields

    def get_figures(self, cot) -> list[str]:
        if cot.question is None:
            return []
        return [figure.image.url for figure in cot.question.figures.all()]


class TaskOutput(serializers.ModelSerializer):
    item = serializers.IntegerField(source="cot_id", read_only=True)
    key = serializers.CharField(source="cot.key", read_only=True)
    # As stored, typed in the schema (issue 29): step position -> DraftEntry (defined below, for the input).
    draft = typed_json({"type": "object", "additionalProperties": {"$ref": "#/components/schemas/DraftEntry"}})

    class Meta:
        model = LabellingTask
        fields = ["id", "item", "key", "version", "draft", "created", "submitted", "rework_note", "active_seconds",
                  "guideline_version"]  # fmt: skip
        read_only_fields = fields


class TaskDetailOutput(TaskOutput):
    item = ItemOutput(source="cot", read_only=True)  # type: ignore[assignment]  # the whole item, not its id


class TaskNextInput(InputSerializer):
    """The queue choices, as the label queue's page takes them; each may be left out."""

    subject = serializers.ChoiceField(choices=Subject.choices, required=False)
    stage = serializers.ChoiceField(choices=Stage.choices, required=False)
    qtype = serializers.ChoiceField(choices=QuestionType.choices, required=False)


class TaskNextOutput(TaskDetailOutput):
    """The task, and whether it lies outside the choices given (``context["choices"]``)."""

    outside_choices = serializers.SerializerMethodField(
        help_text="a task held from before, outside these choices: it comes first all the same"
    )

    class Meta(TaskDetailOutput.Meta):
        fields = [*TaskDetailOutput.Meta.fields, "outside_choices"]
        read_only_fields = fields

    def get_outside_choices(self, task: LabellingTask) -> bool:
        within = labelling.item_filter(self.context.get("choices"))
        return not ChainOfThought.objects.filter(within, pk=task.cot_id).exists()


class DraftEntry(InputSerializer):
    # A declared field, taken off the class by DRF's metaclass: it does not replace Field.label at run time.
    label = serializers.CharField(allow_blank=True, required=False, default="")  # type: ignore[assignment]
    reason = serializers.CharField(allow_blank=True, required=False, default="", trim_whitespace=False)


class DraftInput(InputSerializer):
    version = serializers.IntegerField(min_value=0)
    draft = serializers.DictField(child=DraftEntry(), help_text='{"<step position>": {"label": code, "reason": text}}')
    writer = serializers.CharField(
        max_length=64, required=False, default="", allow_blank=True,
        help_text="an id of the saving tab, kept across its reloads: its own stale version is no conflict",
    )  # fmt: skip
    active_seconds = serializers.FloatField(
        required=False, allow_null=True, default=None,
        help_text="active seconds spent on the item since the last accepted save (clamped to 0..4 h)",
    )  # fmt: skip


class SubmitInput(InputSerializer):
    version = serializers.IntegerField(min_value=0, required=False)
    draft = serializers.DictField(child=DraftEntry(), required=False)
    active_seconds = serializers.FloatField(required=False, allow_null=True, default=None)


class LabelOutput(serializers.ModelSerializer):
    position = serializers.IntegerField(source="step.position", read_only=True)

    class Meta:
        model = StepLabel
        fields = ["position", "source", "rater", "label", "explanation", "taxonomy_version", "guideline_version",
                  "active_seconds", "created"]  # fmt: skip
        read_only_fields = fields


ERROR = inline_serializer("LabellingError", {"detail": serializers.CharField()})
PROBLEMS = inline_serializer(
    "IncompleteLabels",
    {"detail": serializers.CharField(), "problems": serializers.DictField(child=serializers.CharField())},
)
CONFLICT = inline_serializer(
    "DraftConflict",
    {
        "detail": serializers.CharField(),
        "version": serializers.IntegerField(),
        "draft": serializers.DictField(child=DraftEntry()),
    },
)


def refusal(exc: labelling.LabellingError) -> Response:
    if isinstance(exc, labelling.DraftConflict):
        # The draft saved elsewhere is the caller's own: the page shows it and offers to keep either version.
        body = {"detail": str(exc), "version": exc.task.version, "draft": exc.task.draft}
        return Response(body, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, labelling.IncompleteLabels):
        problems = {str(position): message for position, message in exc.problems.items()}
        return Response({"detail": str(exc), "problems": problems}, status=status.HTTP_400_BAD_REQUEST)
    return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)


def get_item_for_user(user, pk: int) -> ChainOfThought:
    """Any item for inspectors, researchers and admins; for an annotator only the items they hold a task on."""
    items = ChainOfThought.objects.all()
    if not any(has_role(user, role) for role in labelling.READERS_OF_ALL_LABELS):
        items = items.filter(labelling_tasks__annotator=user)
    return get_object_or_404(items, pk=pk)


# --- views -------------------------------------------------------------------------------


@extend_schema(responses=TaskOutput(many=True))
@api_view(["GET"])
@permission_classes([ANNOTATORS])
def task_list(request: Request) -> Response:
    """The caller's labelling tasks: open ones first, then the submitted ones, newest first."""
    tasks = LabellingTask.objects.for_annotator(request.user).select_related("cot")
    ordered = list(tasks.open().order_by("created", "id")) + list(tasks.submitted().order_by("-submitted")[:200])
    return Response(TaskOutput(ordered, many=True).data)


@extend_schema(request=TaskNextInput, responses={200: TaskNextOutput, 204: None})
@api_view(["POST"])
@permission_classes([ANNOTATORS])
def task_next(request: Request) -> Response:
    """The task the caller holds (whatever the choices: taken work is finished first), or a newly claimed one
    within the choices (``subject``, ``stage``, ``qtype``, as the label queue's page); 204 when nothing is
    waiting."""
    given = TaskNextInput(data=request.data)
    given.is_valid(raise_exception=True)
    choices = dict(given.validated_data)
    task = labelling.next_task(request.user, choices)
    if task is None:
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(TaskNextOutput(task, context={"choices": choices}).data)


@extend_schema(responses=TaskDetailOutput)
@api_view(["GET"])
@permission_classes([ANNOTATORS])
def task_detail(request: Request, pk: int) -> Response:
    task = labelling.get_task_for_user(request.user, pk)
    return Response(TaskDetailOutput(task).data)


@extend_schema(request=DraftInput, responses={200: TaskOutput, 400: ERROR, 409: CONFLICT})
@api_view(["PUT"])
@permission_classes([ANNOTATORS])
def task_draft(request: Request, pk: int) -> Response:
    """Autosave: the labels so far, refused with 409 if saved elsewhere since ``version``."""
    task = labelling.get_task_for_user(request.user, pk)
    given = DraftInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        task = labelling.save_draft(
            task=task,
            draft=given.validated_data["draft"],
            expected_version=given.validated_data["version"],
            writer=given.validated_data["writer"],
            active_seconds=given.validated_data["active_seconds"],
        )
    except labelling.LabellingError as exc:
        return refusal(exc)
    return Response(TaskOutput(task).data)


@extend_schema(request=SubmitInput, responses={200: TaskOutput, 400: PROBLEMS, 409: CONFLICT})
@api_view(["POST"])
@permission_classes([ANNOTATORS])
def task_submit(request: Request, pk: int) -> Response:
    """Submits the saved draft, or the draft given here (then ``version`` is required)."""
    task = labelling.get_task_for_user(request.user, pk)
    given = SubmitInput(data=request.data)
    given.is_valid(raise_exception=True)
    data = given.validated_data
    try:
        if "draft" in data:
            if "version" not in data:
                return Response({"detail": "a draft needs the version it was based on"}, status=400)
            task = labelling.save_draft(task=task, draft=data["draft"], expected_version=data["version"])
        task = labelling.submit(task, active_seconds=data["active_seconds"])
    except labelling.LabellingError as exc:
        return refusal(exc)
    return Response(TaskOutput(task).data)


@extend_schema(responses=LabelOutput(many=True))
@api_view(["GET"])
@permission_classes([ITEM_READERS])
def item_labels(request: Request, pk: int) -> Response:
    """The item's step labels the caller may see: an annotator sees only their own until they submit."""
    cot = get_item_for_user(request.user, pk)
    labels = labelling.visible_labels(cot, request.user).order_by("step__position", "source", "rater")
    return Response(LabelOutput(labels, many=True).data)
