"""What the annotation app's jobs are started with and answer (issue 29), declared with their handlers
(``job_handler(kind, params=..., result=...)``) and typed in the API's schema per kind."""

from __future__ import annotations

from rest_framework import serializers

from k12vista.job_shapes import LineReportResult, ReasonParams, ReasonRow, ReleaseBuilt
from k12vista.schema_fields import STRINGS, typed_json

# --- annotation.draw_candidates ------------------------------------------------------------


class DrawParams(serializers.Serializer):
    candidate_set = serializers.IntegerField(help_text="the candidate set the draw fills")


class DrawResult(serializers.Serializer):
    candidate_set = serializers.IntegerField()
    questions = serializers.IntegerField(help_text="questions drawn")
    short_cells = serializers.IntegerField(help_text="cells drawn short of their target")


# --- annotation.cluster_knowledge ----------------------------------------------------------


class ClusterParamsOutput(serializers.Serializer):
    """knowledge.ClusterParams as a clustering job holds them: every field, defaults filled in."""

    points_per_unit = serializers.FloatField()
    ngram_min = serializers.IntegerField()
    ngram_max = serializers.IntegerField()
    svd_dims = serializers.IntegerField()
    questions_per_point = serializers.IntegerField()
    question_weight = serializers.FloatField()
    seed = serializers.IntegerField()


class ClusterJobParams(serializers.Serializer):
    subjects = serializers.ListField(child=serializers.CharField(), help_text="those with knowledge points")
    params = ClusterParamsOutput()


class ClusteredSubject(serializers.Serializer):
    """knowledge.cluster_subject: one subject's leaf points regrouped."""

    subject = serializers.CharField()
    points = serializers.IntegerField(help_text="unpinned leaf points clustered")
    units = serializers.IntegerField(help_text="core units made")
    method = serializers.CharField(help_text="the clustering used; none when there were no points")
    pinned = serializers.IntegerField(help_text="points kept in a unit a person confirmed")


class ClusterResult(serializers.Serializer):
    subjects = ClusteredSubject(many=True)
    params = ClusterParamsOutput()


# --- annotation.export_questions -----------------------------------------------------------


class QuestionFilters(serializers.Serializer):
    """forms.QuestionFilterForm's cleaned data, the empty ones left out."""

    subject = serializers.CharField(required=False)
    grade = serializers.IntegerField(required=False)
    stage = serializers.CharField(required=False)
    qtype = serializers.CharField(required=False)
    status = serializers.CharField(required=False)
    flag = serializers.CharField(required=False)
    knowledge_point = serializers.CharField(required=False)
    q = serializers.CharField(required=False)


class ExportQuestionsParams(serializers.Serializer):
    filters = QuestionFilters()
    fmt = serializers.CharField(help_text="reference (JSONL) or studio (zip)")


# --- annotation.import_questions -----------------------------------------------------------


class QuestionLine(ReasonRow):
    line = serializers.IntegerField()
    hash_id = serializers.CharField()


class QuestionConflictLine(QuestionLine):
    # A declared field leaves the class (DRF's metaclass takes it), so it does not hide Serializer.fields.
    fields = serializers.ListField(  # type: ignore[assignment]
        child=serializers.CharField(), help_text="the fields that differ"
    )


# public_formats.MAPPED: [the public set's field, [the studio's fields]] pairs.
MAPPED_PAIRS = {
    "type": "array",
    "items": {"type": "array", "minItems": 2, "maxItems": 2,
              "items": {"oneOf": [{"type": "string"}, STRINGS]}},
}  # fmt: skip


class ImportSourceParams(serializers.Serializer):
    source_document_id = serializers.IntegerField()


class ImportQuestionsResult(LineReportResult):
    """jsonl_import.ImportReport.as_dict."""

    conflict_lines = QuestionConflictLine(many=True)  # type: ignore[assignment]
    failed_lines = QuestionLine(many=True)  # type: ignore[assignment]
    formats = serializers.DictField(child=serializers.IntegerField(), help_text="records read per format")
    guessed = serializers.DictField(child=serializers.IntegerField(), help_text="records with the field guessed")
    mapped = serializers.DictField(
        child=typed_json(MAPPED_PAIRS),
        help_text="per public format read, how its fields were mapped",
    )  # fmt: skip


# --- annotation.import_pdf -----------------------------------------------------------------


class ImportPdfParams(ImportSourceParams):
    subject = serializers.CharField()
    grade = serializers.IntegerField()
    reader = serializers.CharField(help_text="who reads the pages: rules, model or unsure (the model where unsure)")


class Note(serializers.Serializer):
    """An annotation.pdf.notes note: a code and its parameters, worded when shown."""

    code = serializers.CharField()
    params = ReasonParams()


class PdfSection(serializers.Serializer):
    heading = serializers.CharField()
    stated = serializers.IntegerField(allow_null=True, help_text="the count its heading states")
    found = serializers.IntegerField()


class PdfLeftover(serializers.Serializer):
    page = serializers.IntegerField()
    column = serializers.IntegerField()
    chars = serializers.IntegerField()


# A section's heading and the count it states (null when it states none).
STATED = {
    "type": "array", "minItems": 2, "maxItems": 2,
    "items": {"oneOf": [{"type": "string"}, {"type": "integer", "nullable": True}]},
}  # fmt: skip


class ConsistencyReport(serializers.Serializer):
    """pdf.consistency.consistency_report; empty when no page was read."""

    numbers = serializers.ListField(child=serializers.CharField(), required=False)
    gaps = serializers.ListField(child=serializers.CharField(), required=False)
    duplicates = serializers.ListField(child=serializers.CharField(), required=False)
    sections = PdfSection(many=True, required=False)
    leftover = PdfLeftover(many=True, required=False)
    notes = Note(many=True, required=False)
    warnings = serializers.ListField(child=serializers.CharField(), required=False)
    suspects = serializers.ListField(child=serializers.CharField(), required=False)
    reasons = serializers.DictField(child=Note(many=True), required=False, help_text="question label -> notes")
    stated = serializers.DictField(child=typed_json(STATED), required=False, help_text="section -> [heading, count]")
    confidence = serializers.DictField(child=serializers.FloatField(), required=False,
                                       help_text="question label -> how sure its cut is (0-1)")  # fmt: skip
    vision_pages = serializers.ListField(child=serializers.IntegerField(), required=False,
                                         help_text="pages the vision model read")  # fmt: skip


class PdfFailedQuestion(serializers.Serializer):
    question = serializers.CharField()
    reason = serializers.CharField()


class PdfPartialQuestion(serializers.Serializer):
    question = serializers.CharField()
    problems = serializers.ListField(child=serializers.CharField(), help_text="in English")
    notes = Note(many=True)


class ImportPdfResult(serializers.Serializer):
    """pdf.importer.ImportSummary.as_dict."""

    pages = serializers.IntegerField()
    questions = serializers.IntegerField(help_text="created by this run")
    existing = serializers.IntegerField()
    figures = serializers.IntegerField()
    ocr_pages = serializers.IntegerField()
    notes = Note(many=True)
    warnings = serializers.ListField(child=serializers.CharField(), help_text="the notes in English")
    report = ConsistencyReport()
    failed = PdfFailedQuestion(many=True)
    partial = PdfPartialQuestion(many=True)  # type: ignore[assignment]  # DRF takes it off the class, as fields
    seconds = serializers.DictField(child=serializers.FloatField(), help_text="wall time per stage")


# --- annotation.build_release --------------------------------------------------------------


class ReleaseBuiltQuestions(ReleaseBuilt):
    questions = serializers.IntegerField(required=False)
