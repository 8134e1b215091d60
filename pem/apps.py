from typing import Any

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PemConfig(AppConfig):
    name = "pem"

    def ready(self) -> None:
        # apps.py is loaded before the models; ready() runs once they are.
        from k12vista.work import Overall, WorkKind, model_rows, register
        from pem.models import Adjudication, ChainOfThought, LabellingTask

        def pebench_progress() -> list[tuple[Any, int]]:
            from pem.services import status_counts  # read when the team page asks, not at start-up

            counts = status_counts(ChainOfThought.objects.filter(pebench_item__isnull=False))
            return [(ChainOfThought.Status(status).label, n) for status, n in counts.items()]

        register(Overall("pebench", _("PEBench items by stage"), pebench_progress))

        register(
            WorkKind("pebench_labels", _("PEBench step labels"), model_rows(LabellingTask), "annotator", "submitted")
        )
        # Adjudications are not held by anyone before they are decided: only the decided ones count.
        register(WorkKind("adjudication", _("Adjudication"), model_rows(Adjudication), "decided_by", "decided",
                          held=False))  # fmt: skip
