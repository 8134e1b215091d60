from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.models import Flag, KnowledgePoint, Question
from k12vista.schema_fields import STRINGS, open_object, typed_json


class FigureOutput(serializers.Serializer):
    url = serializers.CharField()
    width = serializers.IntegerField()
    height = serializers.IntegerField()
    kind = serializers.CharField()
    position = serializers.IntegerField(allow_null=True)


class FlagSerializer(serializers.ModelSerializer):
    detail = typed_json(
        open_object("Open by design: the facts behind the flag, which differ by its code (annotation.models.Flag).")
    )

    class Meta:
        model = Flag
        fields = ["code", "origin", "message", "detail", "run_ref", "created", "resolved_at"]


class OptionOutput(serializers.Serializer):
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, taken off the class by DRF
    text = serializers.CharField()


class QuestionSerializer(serializers.ModelSerializer):
    # As stored, typed in the schema (issue 29).
    options = typed_json(OptionOutput(many=True), help_text="four for multiple choice")
    answers = typed_json(STRINGS, help_text="one per blank or sub-question; one letter for multiple choice")
    solution_steps = typed_json(STRINGS, help_text="the reference solution, one string per step")
    knowledge_points: serializers.SlugRelatedField[KnowledgePoint] = serializers.SlugRelatedField(
        slug_field="name", many=True, read_only=True
    )
    figures = serializers.SerializerMethodField()
    flags = FlagSerializer(many=True, read_only=True)

    class Meta:
        model = Question
        fields = [
            "id", "hash_id", "subject", "grade", "stage", "qtype", "text", "options", "answers", "raw_solution",
            "solution_steps", "knowledge_points", "difficulty", "source", "status", "reject_reason", "version",
            "figures", "flags", "created", "updated",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(FigureOutput(many=True))
    def get_figures(self, question) -> list[dict]:
        # "formula": an image standing for a formula at the text's [[formula:N]] (N its position).
        return [{"url": f.image.url, "width": f.width, "height": f.height, "kind": f.kind, "position": f.position}
                for f in question.figures.all()]  # fmt: skip
