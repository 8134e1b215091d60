from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotation.models import Flag, KnowledgePoint, Question


class FigureOutput(serializers.Serializer):
    url = serializers.CharField()
    width = serializers.IntegerField()
    height = serializers.IntegerField()
    kind = serializers.CharField()
    position = serializers.IntegerField(allow_null=True)


class FlagSerializer(serializers.ModelSerializer):
    class Meta:
        model = Flag
        fields = ["code", "origin", "message", "detail", "run_ref", "created", "resolved_at"]


class QuestionSerializer(serializers.ModelSerializer):
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
