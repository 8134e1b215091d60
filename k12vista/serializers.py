from rest_framework import serializers

from k12vista.models import Job


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    email = serializers.EmailField()
    roles = serializers.ListField(child=serializers.CharField())
    language = serializers.CharField()


class JobSerializer(serializers.ModelSerializer):
    started_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    percent = serializers.IntegerField(read_only=True, allow_null=True)
    waiting_for_broker = serializers.BooleanField(
        read_only=True, help_text="Queued while the broker is unreachable; it starts once the broker is back."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "title",
            "queue",
            "status",
            "done",
            "total",
            "percent",
            "waiting_for_broker",
            "error",
            "result",
            "params",
            "started_by",
            "created",
            "started_at",
            "finished_at",
            "cancel_requested",
            "attempts",
        ]
        read_only_fields = fields
