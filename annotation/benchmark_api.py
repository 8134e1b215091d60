"""The benchmark API: allocation preview, draws, releases (build, publish,
items, comparison) and clustering; the same service calls as the screens, for
researchers and administrators. Files are downloaded from the release page's
URLs (``annotation:release_file``), which check the same roles."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import generics, pagination, serializers, status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from annotation import draw, knowledge, releases
from annotation.benchmark_views import get_release_for_user
from annotation.job_shapes import ClusterJobParams
from annotation.models import CandidateSet, Release, ReleaseFile, ReleaseItem
from annotation.serializers import QuestionSerializer
from k12vista.roles import HasRole, Role
from k12vista.schema_fields import ProportionOutput, keyed, open_object, typed_json
from k12vista.serializers import InputSerializer

RESEARCHERS = HasRole(Role.RESEARCHER, Role.ADMIN)


class TargetsInput(InputSerializer):
    per_cell = serializers.IntegerField(min_value=0, default=draw.DEFAULT_PER_CELL)
    cover_knowledge = serializers.BooleanField(default=True)
    subjects = serializers.ListField(child=serializers.CharField(max_length=20), default=list)
    cells = serializers.DictField(child=serializers.IntegerField(min_value=0), default=dict)


class DrawInput(InputSerializer):
    targets = TargetsInput(default=dict)
    seed = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)
    name = serializers.CharField(max_length=200, required=False, default="")


# --- the reports the studio builds, typed for the schema (issue 29) -----------------------------


class AllocationCell(serializers.Serializer):
    """One subject-grade-type cell of the allocation (draw.cell_row)."""

    cell = serializers.CharField(help_text="subject/grade/qtype")
    subject = serializers.CharField()
    grade = serializers.IntegerField()
    qtype = serializers.CharField()
    available = serializers.IntegerField()
    target = serializers.IntegerField()
    allocated = serializers.IntegerField()
    shortfall = serializers.IntegerField()
    note = serializers.CharField(allow_blank=True, help_text="why the cell falls short; empty when it does not")


class AllocationOutput(serializers.Serializer):
    """The allocation per cell and its shortfalls (draw.preview)."""

    cells = AllocationCell(many=True)
    available = serializers.IntegerField()
    allocated = serializers.IntegerField()
    shortfall = serializers.IntegerField()
    short_cells = serializers.IntegerField()
    units_reachable = serializers.IntegerField(help_text="knowledge units the eligible questions hold (0: not covered)")


class DrawCell(AllocationCell):
    drawn = serializers.IntegerField(help_text="allocated plus for_coverage")
    for_coverage = serializers.IntegerField(help_text="questions added to cover a knowledge unit")


class DrawCoverage(serializers.Serializer):
    units = serializers.IntegerField()
    covered_by_targets = serializers.IntegerField()
    added_for_coverage = serializers.IntegerField()
    covered = serializers.IntegerField(required=False, help_text="only where the draw covers knowledge units")


class DrawReport(serializers.Serializer):
    """The draw's report (draw.draw): every key is there once the draw has run, none before."""

    cells = DrawCell(many=True, required=False)
    total = serializers.IntegerField(required=False)
    coverage = DrawCoverage(required=False)
    short_cells = serializers.IntegerField(required=False)


class ReleaseCell(serializers.Serializer):
    subject = serializers.CharField()
    grade = serializers.IntegerField(allow_null=True, help_text="null where the source gave only the stage")
    qtype = serializers.CharField()
    count = serializers.IntegerField()
    stage = serializers.CharField(required=False, help_text="only where grade is null")


class KnowledgeCoverage(serializers.Serializer):
    covered = serializers.IntegerField()
    in_bank = serializers.IntegerField()
    core_units_covered = serializers.IntegerField()
    core_units = serializers.IntegerField()


class Table2Output(serializers.Serializer):
    """The paper's Table 2 over the release (annotation.statistics.table_2), its tokenizer named."""

    questions = serializers.IntegerField()
    subjects = serializers.IntegerField()
    knowledge_points = serializers.IntegerField()
    types = serializers.IntegerField()
    problem_tokens = serializers.FloatField(allow_null=True, help_text="means: null over no question")
    solution_tokens = serializers.FloatField(allow_null=True)
    solution_steps = serializers.FloatField(allow_null=True)
    answers = serializers.FloatField(allow_null=True)
    answer_tokens = serializers.FloatField(allow_null=True)
    tokenizer = serializers.CharField()


class RefinementUsed(serializers.Serializer):
    models = serializers.ListField(child=serializers.CharField())
    runs = serializers.ListField(child=serializers.CharField())


class ReleaseAuditStratum(serializers.Serializer):
    stratum = serializers.CharField()
    sampled = serializers.IntegerField()
    rates = keyed(ProportionOutput(), "dimension, and all (every dimension passed)")
    decision = serializers.CharField(allow_null=True)


class ReleaseAudit(serializers.Serializer):
    """An audit that moved the release's questions (review.reports.release_audit_summary)."""

    id = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True)
    aql = serializers.FloatField(allow_null=True)
    seed = serializers.IntegerField()
    population_count = serializers.IntegerField()
    sampled = serializers.IntegerField()
    decision = serializers.CharField(allow_null=True, help_text="accept, reject or pending; null without a plan")
    rates = keyed(ProportionOutput(), "dimension, and all (every dimension passed)")
    strata = ReleaseAuditStratum(many=True)


class ReleaseDrawnFrom(serializers.Serializer):
    id = serializers.IntegerField()
    seed = serializers.IntegerField()
    targets = TargetsInput()


class ReleaseCorrectionRow(serializers.Serializer):
    correction = serializers.IntegerField()
    hash_id = serializers.CharField()
    field = serializers.CharField()
    before = serializers.JSONField()
    after = serializers.JSONField()
    why = serializers.CharField()
    opened_by = serializers.CharField()
    fixed_by = serializers.CharField()
    checked_by = serializers.CharField()


class ReleaseSummary(serializers.Serializer):
    """The release's summary (releases.summarize, and the corrections the build carries): every key is there
    once the build has summarized it, none before."""

    questions = serializers.IntegerField(required=False)
    cells = ReleaseCell(many=True, required=False)
    knowledge_points = KnowledgeCoverage(required=False)
    statistics = Table2Output(required=False)
    refinement = RefinementUsed(required=False)
    audits = ReleaseAudit(many=True, required=False)
    candidate_set = ReleaseDrawnFrom(allow_null=True, required=False)
    corrections = ReleaseCorrectionRow(many=True, required=False)


class ReleaseFieldChange(serializers.Serializer):
    field = serializers.CharField()
    old = serializers.JSONField(help_text="the field's value in the old release, of that field's type")
    new = serializers.JSONField(help_text="the field's value in the new release, of that field's type")
    diff = serializers.ListField(child=serializers.CharField(), help_text="unified diff lines")


class ReleaseChangedQuestion(serializers.Serializer):
    hash_id = serializers.CharField()
    # DRF's metaclass takes declared fields off the class: this answer key does not clash with Serializer.fields.
    fields = ReleaseFieldChange(many=True)  # type: ignore[assignment]


class ReleaseCompareOutput(serializers.Serializer):
    """What changed from one release to another (releases.compare_releases)."""

    old = serializers.IntegerField()
    new = serializers.IntegerField()
    added = serializers.ListField(child=serializers.CharField(), help_text="hash ids")
    removed = serializers.ListField(child=serializers.CharField(), help_text="hash ids")
    changed = ReleaseChangedQuestion(many=True)


class CandidateSetOutput(serializers.ModelSerializer):
    targets = typed_json(TargetsInput)  # as stored, typed in the schema (issue 29)
    report = typed_json(DrawReport)

    class Meta:
        model = CandidateSet
        fields = ["id", "name", "targets", "seed", "bank_fingerprint", "report", "job", "created"]
        read_only_fields = fields


class ReleaseFileOutput(serializers.ModelSerializer):
    class Meta:
        model = ReleaseFile
        fields = ["form", "sha256", "size", "count"]
        read_only_fields = fields


class ReleaseOutput(serializers.ModelSerializer):
    files = ReleaseFileOutput(many=True, read_only=True)
    release_status = serializers.CharField(source="status", read_only=True)
    summary = typed_json(ReleaseSummary)

    class Meta:
        model = Release
        fields = ["version", "name", "release_status", "candidate_set", "licence", "studio_commit", "summary",
                  "error", "job", "created", "published", "files"]  # fmt: skip
        read_only_fields = fields


class ReleaseInput(InputSerializer):
    name = serializers.CharField(max_length=200, required=False, default="")
    licence = serializers.CharField(max_length=100, required=False, default=releases.DEFAULT_LICENCE)


class ReleaseItemOutput(serializers.ModelSerializer):
    provenance = typed_json(
        open_object("Open by design: where the released question came from (import, corrections, refinement, "
                    "audits), as recorded at release; its keys differ by the question's history.")
    )  # fmt: skip

    class Meta:
        model = ReleaseItem
        fields = ["hash_id", "version", "content_hash", "provenance"]
        read_only_fields = fields


class ClusterParamsInput(InputSerializer):
    """knowledge.ClusterParams field by field (its ranges checked by ClusterParams.from_dict)."""

    points_per_unit = serializers.FloatField(required=False)
    ngram_min = serializers.IntegerField(required=False)
    ngram_max = serializers.IntegerField(required=False)
    svd_dims = serializers.IntegerField(required=False)
    questions_per_point = serializers.IntegerField(required=False)
    question_weight = serializers.FloatField(required=False)
    seed = serializers.IntegerField(required=False)


CLUSTERING_STARTED = inline_serializer("ClusteringStarted", {
    "job": serializers.IntegerField(help_text="follow it at /api/jobs/<id>/"),
    "params": ClusterJobParams(),
})  # fmt: skip


class ClusterInput(InputSerializer):
    subjects = serializers.ListField(child=serializers.CharField(max_length=20), default=list)
    params = ClusterParamsInput(required=False, default=dict)


def targets_of(data: dict) -> draw.Targets:
    try:
        return draw.Targets.from_dict(data)
    except draw.DrawError as exc:
        raise ValidationError({"detail": str(exc)}) from exc


@extend_schema(parameters=[TargetsInput], responses={200: AllocationOutput})
@api_view(["GET"])
@permission_classes([RESEARCHERS])
def allocation(request: Request) -> Response:
    """The allocation per cell with its shortfalls, for the targets in the query."""
    given = TargetsInput(data={k: v for k, v in request.query_params.items() if k in ("per_cell", "cover_knowledge")})
    given.is_valid(raise_exception=True)
    return Response(draw.preview(targets_of({**given.validated_data,
                                             "subjects": request.query_params.getlist("subjects")})))  # fmt: skip


class ByHashIdQuestions(pagination.CursorPagination):
    ordering = "hash_id"
    page_size = 200


class Newest(pagination.CursorPagination):
    ordering = "-id"
    page_size = 50


class CandidateSetList(generics.ListAPIView):
    serializer_class = CandidateSetOutput
    permission_classes = [RESEARCHERS]
    pagination_class = Newest
    queryset = CandidateSet.objects.all()

    @extend_schema(request=DrawInput, responses={202: CandidateSetOutput})
    def post(self, request: Request) -> Response:
        given = DrawInput(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            candidate = draw.start_draw(targets=targets_of(data["targets"]), by=request.user, name=data["name"],
                                        seed=data["seed"])  # fmt: skip
        except draw.DrawError as exc:  # a draw that would take no question
            raise ValidationError({"targets": [str(exc)]}) from exc
        return Response(CandidateSetOutput(candidate).data, status=status.HTTP_202_ACCEPTED)


class CandidateSetDetail(generics.RetrieveAPIView):
    serializer_class = CandidateSetOutput
    permission_classes = [RESEARCHERS]
    queryset = CandidateSet.objects.all()


class CandidateSetQuestions(generics.ListAPIView):
    """The questions a draw holds, by hash id (issue 29: what the draw's page lists)."""

    serializer_class = QuestionSerializer
    permission_classes = [RESEARCHERS]
    pagination_class = ByHashIdQuestions

    def get_queryset(self):
        candidate = generics.get_object_or_404(CandidateSet, pk=self.kwargs["pk"])
        return candidate.questions.prefetch_related("knowledge_points", "figures", "flags")


class ReleaseList(generics.ListAPIView):
    serializer_class = ReleaseOutput
    permission_classes = [RESEARCHERS]
    queryset = Release.objects.prefetch_related("files")


class ReleaseDetail(generics.RetrieveAPIView):
    serializer_class = ReleaseOutput
    permission_classes = [RESEARCHERS]

    def get_object(self):
        return get_release_for_user(self.request.user, self.kwargs["version"])


class ByHashId(pagination.CursorPagination):
    ordering = "hash_id"
    page_size = 500


class ReleaseItems(generics.ListAPIView):
    """The questions a release holds (what runs and leaderboards on a release cover)."""

    serializer_class = ReleaseItemOutput
    permission_classes = [RESEARCHERS]
    pagination_class = ByHashId

    def get_queryset(self):
        return get_release_for_user(self.request.user, self.kwargs["version"]).items.all()


@extend_schema(request=ReleaseInput, responses={202: ReleaseOutput})
@api_view(["POST"])
@permission_classes([RESEARCHERS])
def release_create(request: Request, pk: int) -> Response:
    candidate = generics.get_object_or_404(CandidateSet, pk=pk)
    given = ReleaseInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        release = releases.start_release(candidate_set=candidate, by=request.user, **given.validated_data)
    except releases.ReleaseError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    return Response(ReleaseOutput(release).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(request=None, responses={200: ReleaseOutput})
@api_view(["POST"])
@permission_classes([RESEARCHERS])
def release_publish(request: Request, version: int) -> Response:
    release = get_release_for_user(request.user, version)
    try:
        release = releases.publish_release(release=release, by=request.user)
    except releases.ReleaseError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    return Response(ReleaseOutput(release).data)


@extend_schema(responses={200: ReleaseCompareOutput})
@api_view(["GET"])
@permission_classes([RESEARCHERS])
def release_compare(request: Request) -> Response:
    """Added, removed and changed questions from ``old`` to ``new`` (versions), with diffs."""
    try:
        old, new = (int(request.query_params.get(name, "")) for name in ("old", "new"))
    except ValueError:
        raise ValidationError({"detail": "give old and new as release versions"}) from None
    return Response(releases.compare_releases(get_release_for_user(request.user, old),
                                              get_release_for_user(request.user, new)))  # fmt: skip


@extend_schema(request=ClusterInput, responses={202: CLUSTERING_STARTED})
@api_view(["POST"])
@permission_classes([RESEARCHERS])
def cluster(request: Request) -> Response:
    given = ClusterInput(data=request.data)
    given.is_valid(raise_exception=True)
    try:
        params = knowledge.ClusterParams.from_dict(given.validated_data["params"])
        job = knowledge.start_clustering(by=request.user, subjects=given.validated_data["subjects"], params=params)
    except knowledge.KnowledgeError as exc:
        raise ValidationError({"detail": str(exc)}) from exc
    return Response({"job": job.pk, "params": job.params}, status=status.HTTP_202_ACCEPTED)
