"""API for PEM-800K: import, filter runs and their funnel, training exports, training runs.

Starting work answers 202 with the job (followed at ``/api/jobs/<id>/``) and
the record it fills; the same services as the screens (pem/training/views.py).
"""

from __future__ import annotations

from django.core.files.storage import default_storage
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import parsers, serializers, status
from rest_framework.decorators import api_view, parser_classes, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from inference.models import Protocol
from k12vista.import_files import ImportFileError
from k12vista.roles import HasRole, Role
from k12vista.schema_fields import INTEGERS_BY_KEY, typed_json
from k12vista.serializers import InputSerializer, JobSerializer
from pem import jobs as pem_jobs
from pem.models import FilterRun, StepLabel, TrainingExport, TrainingRun
from pem.training import exports, filters, formats, jobs, train, trainer

MANAGERS = HasRole(Role.RESEARCHER, Role.ADMIN)


class PEM800KImportInput(InputSerializer):
    file = serializers.FileField()
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


# The filters' parameters typed field by field (issue 29), so that a client generated from the schema knows them
# and a misspelt one is a 400; the ranges stay in filters.clean_params, the one place that checks them.
class FormatParams(InputSerializer):
    min_steps = serializers.IntegerField(required=False)
    max_steps = serializers.IntegerField(required=False)
    max_text_mismatch = serializers.IntegerField(required=False)


class ConsistencyParams(InputSerializer):
    require_reason = serializers.BooleanField(required=False)
    check_final_answer = serializers.BooleanField(required=False)


class CoverageParams(InputSerializer):
    min_models = serializers.IntegerField(required=False)


BalanceTarget = type(
    "BalanceTarget",
    (InputSerializer,),
    {name: serializers.FloatField(required=False, help_text=f"share of {name}") for name in filters.CATEGORIES},
)


class BalanceParams(InputSerializer):
    target = BalanceTarget(required=False)
    seed = serializers.IntegerField(required=False)


class FilterParams(InputSerializer):
    format = FormatParams(required=False)
    consistency = ConsistencyParams(required=False)
    coverage = CoverageParams(required=False)
    balance = BalanceParams(required=False)


class FilterInput(InputSerializer):
    # DRF's metaclass takes declared fields off the class, so this API field does not clash with Field.source.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=[s for s in StepLabel.Source.values if s != StepLabel.Source.PERSON]
    )
    rater = serializers.CharField(max_length=200)
    params = FilterParams(required=False, default=dict)


class FunnelCount(serializers.Serializer):
    chains = serializers.IntegerField()
    steps = serializers.IntegerField()


class FunnelStage(serializers.Serializer):
    """What one filter removed (or the input, or what is kept): filters.funnel."""

    chains = serializers.IntegerField()
    steps = serializers.IntegerField()
    reasons = typed_json(INTEGERS_BY_KEY, help_text="chains removed, by reason")
    by_subject = serializers.DictField(child=FunnelCount(), help_text="keyed by subject ('-': none)")
    by_stage = serializers.DictField(child=FunnelCount(), help_text="keyed by school stage ('-': none)")
    by_label = typed_json(INTEGERS_BY_KEY, help_text="steps, by label code")
    remaining_chains = serializers.IntegerField(required=False, help_text="after this filter (the four filters)")
    remaining_steps = serializers.IntegerField(required=False, help_text="after this filter (the four filters)")


Funnel = type(
    "Funnel",
    (serializers.Serializer,),
    {
        # Empty until the run has finished.
        **{name: FunnelStage(required=False) for name in ("input", *filters.STAGES, "kept")},
        "quotas": typed_json(
            INTEGERS_BY_KEY, read_only=False, required=False, help_text="the balance filter's quota, by category"
        ),
    },
)


class FilterRunOutput(serializers.ModelSerializer):
    job = JobSerializer(read_only=True)
    # The stored JSON as it is, typed in the schema (issue 29): the parameters by the input that wrote them.
    params = typed_json(FilterParams)
    funnel = typed_json(Funnel)

    class Meta:
        model = FilterRun
        fields = ["id", "label_source", "label_rater", "params", "kept", "funnel", "created", "finished", "job"]


class TrainingExportInput(InputSerializer):
    filter_run = serializers.PrimaryKeyRelatedField(queryset=FilterRun.objects.filter(finished__isnull=False))
    formats = serializers.ListField(child=serializers.ChoiceField(choices=formats.FORMATS),
                                    default=list(formats.FORMATS), allow_empty=False)  # fmt: skip
    min_pixels = serializers.IntegerField(min_value=1, default=exports.DEFAULT_MIN_PIXELS)
    max_pixels = serializers.IntegerField(min_value=1, default=exports.DEFAULT_MAX_PIXELS)
    # A declared field, taken off the class by DRF's metaclass: it does not replace Field.style at run time.
    style = serializers.ChoiceField(  # type: ignore[assignment]
        choices=TrainingExport.Style.choices, default=TrainingExport.Style.STUDIO
    )


class ExportOutput(serializers.ModelSerializer):
    job = JobSerializer(read_only=True)
    formats = serializers.ListField(child=serializers.CharField(), read_only=True, help_text="the line formats written")
    status = serializers.CharField(read_only=True)  # running, done, failed
    files = serializers.SerializerMethodField()

    class Meta:
        model = TrainingExport
        fields = ["id", "filter_run", "formats", "style", "prompt_set", "min_pixels", "max_pixels", "status",
                  "records", "images", "manifest_sha256", "error", "created", "job", "files"]  # fmt: skip

    def get_files(self, export: TrainingExport) -> dict[str, str]:
        return exports.export_files(export)


def _hyperparameter(default: object) -> serializers.Field:
    if isinstance(default, bool):
        return serializers.BooleanField(required=False)
    if isinstance(default, int):
        return serializers.IntegerField(required=False)
    return serializers.FloatField(required=False)


# One field per hyper-parameter the trainer knows (trainer.DEFAULTS), typed by its default.
Hyperparameters = type(
    "Hyperparameters",
    (InputSerializer,),
    {name: _hyperparameter(default) for name, default in trainer.DEFAULTS.items()},
)


class TrainInput(InputSerializer):
    export = serializers.PrimaryKeyRelatedField(queryset=TrainingExport.objects.filter(status="done"))
    base_model = serializers.CharField(max_length=500)
    hyperparameters = Hyperparameters(required=False, default=dict)


class TrainingMetrics(serializers.Serializer):
    global_step = serializers.IntegerField(required=False)
    train_loss = serializers.FloatField(required=False)
    runtime_s = serializers.FloatField(required=False)


class ServedFormOutput(serializers.Serializer):
    """train.served_outline: how the finished checkpoint is served and registered in its served form."""

    vllm_serve = serializers.CharField(help_text="The vllm serve line for a GPU machine")
    base_url = serializers.CharField(help_text="Where the server's base URL goes (a placeholder to replace)")
    served_name = serializers.CharField(help_text="The served model name the vllm serve line gives")
    protocol = serializers.ChoiceField(choices=Protocol.choices, help_text="The protocol the PEM scores in")
    prompt_kind = serializers.CharField(help_text="The kind of the trained judge prompt the endpoint keeps")
    prompt_set = serializers.CharField(help_text="The reference prompt set it learnt on (K12-PEM style), or empty")
    keeps_trained_prompt = serializers.BooleanField(
        help_text="Registered with base_url and served_name (POST .../endpoint/), the openai endpoint keeps the "
        "judge prompt the checkpoint learnt on and scores with it"
    )


class TrainingRunOutput(serializers.ModelSerializer):
    job = JobSerializer(read_only=True)
    hyperparameters = typed_json(Hyperparameters)  # as stored, typed in the schema (issue 29)
    metrics = typed_json(TrainingMetrics, help_text="empty until the run is done")
    status = serializers.CharField(read_only=True)  # running, done, failed
    vllm_serve = serializers.SerializerMethodField()
    served_form = serializers.SerializerMethodField()

    class Meta:
        model = TrainingRun
        fields = ["id", "export", "export_sha256", "base_model", "hyperparameters", "commit", "status", "checkpoint",
                  "metrics", "error", "endpoint", "created", "finished", "job", "vllm_serve",
                  "served_form"]  # fmt: skip

    def get_vllm_serve(self, run: TrainingRun) -> str:
        return train.vllm_serve_command(run) if run.status == TrainingRun.Status.DONE else ""

    @extend_schema_field(ServedFormOutput(allow_null=True))
    def get_served_form(self, run: TrainingRun) -> dict | None:
        return train.served_outline(run)


class CheckpointEndpointInput(InputSerializer):
    name = serializers.CharField(max_length=100)
    # The served form (both or neither): the openai endpoint of the server serving the checkpoint.
    base_url = serializers.CharField(max_length=300, required=False, allow_blank=True, default="",
                                     help_text="The base URL (.../v1) of the server serving the checkpoint "
                                     "(vllm serve), in MODEL_URL_ALLOWLIST; with served_name")  # fmt: skip
    served_name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="",
                                        help_text="The model name it is served under; with base_url")  # fmt: skip

    def validate(self, attrs: dict) -> dict:
        half = train.half_served_form(base_url=attrs["base_url"], served_name=attrs["served_name"])
        if half is not None:
            raise ValidationError({half[0]: [half[1]]})
        return attrs


@extend_schema(request={"multipart/form-data": PEM800KImportInput}, responses={202: JobSerializer})
@api_view(["POST"])
@permission_classes([MANAGERS])
@parser_classes([parsers.MultiPartParser])
def import_file(request: Request) -> Response:
    given = PEM800KImportInput(data=request.data)
    given.is_valid(raise_exception=True)
    upload = given.validated_data["file"]
    try:
        stored = pem_jobs.store_upload(upload)
    except ImportFileError as exc:
        raise ValidationError({"file": [str(exc)]}) from exc
    job = jobs.start_import(path=default_storage.path(stored), name=given.validated_data["name"] or upload.name,
                            user=request.user)  # fmt: skip
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=FilterInput, responses={202: FilterRunOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def filter_runs(request: Request) -> Response:
    given = FilterInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        run = jobs.start_filters(**given.validated_data, user=request.user)
    except filters.FilterError as exc:
        field = "rater" if isinstance(exc, filters.UnknownLabels) else "params"
        raise ValidationError({field: [str(exc)]}) from exc
    return Response(FilterRunOutput(run).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(responses=FilterRunOutput)
@api_view(["GET"])
@permission_classes([MANAGERS])
def filter_run(request: Request, pk: int) -> Response:
    return Response(FilterRunOutput(get_object_or_404(FilterRun, pk=pk)).data)


@extend_schema(request=TrainingExportInput, responses={202: ExportOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def training_exports(request: Request) -> Response:
    given = TrainingExportInput(data=request.data)
    given.is_valid(raise_exception=True)
    data = given.validated_data
    try:
        export = jobs.start_export(filter_run=data["filter_run"], user=request.user, formats_wanted=data["formats"],
                                   min_pixels=data["min_pixels"], max_pixels=data["max_pixels"],
                                   style=data["style"])  # fmt: skip
    except exports.ExportError as exc:
        raise ValidationError({"filter_run": [str(exc)]}) from exc
    return Response(ExportOutput(export).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(responses=ExportOutput)
@api_view(["GET"])
@permission_classes([MANAGERS])
def training_export(request: Request, pk: int) -> Response:
    return Response(ExportOutput(get_object_or_404(TrainingExport, pk=pk)).data)


@extend_schema(request=TrainInput, responses={202: TrainingRunOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def training_runs(request: Request) -> Response:
    given = TrainInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        run = jobs.start_training(**given.validated_data, user=request.user)
    except train.TrainingError as exc:
        raise ValidationError({"export": [str(exc)]}) from exc
    return Response(TrainingRunOutput(run).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(responses=TrainingRunOutput)
@api_view(["GET"])
@permission_classes([MANAGERS])
def training_run(request: Request, pk: int) -> Response:
    return Response(TrainingRunOutput(get_object_or_404(TrainingRun, pk=pk)).data)


@extend_schema(request=CheckpointEndpointInput, responses={201: TrainingRunOutput})
@api_view(["POST"])
@permission_classes([MANAGERS])
def training_run_endpoint(request: Request, pk: int) -> Response:
    run = get_object_or_404(TrainingRun, pk=pk)
    given = CheckpointEndpointInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        train.register_endpoint(run, **given.validated_data, user=request.user)
    except train.TrainingError as exc:
        raise ValidationError({"base_url" if isinstance(exc, train.ServerRefused) else "name": [str(exc)]}) from exc
    return Response(TrainingRunOutput(run).data, status=status.HTTP_201_CREATED)
