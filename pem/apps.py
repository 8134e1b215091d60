from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PemConfig(AppConfig):
    name = "pem"

    def ready(self) -> None:
        from k12vista.work import WorkKind, model_rows, register
        from pem.models import Adjudication, LabellingTask

        register(
            WorkKind("pebench_labels", _("PEBench step labels"), model_rows(LabellingTask), "annotator", "submitted")
        )
        # Adjudications are not held by anyone before they are decided: only the decided ones count.
        register(WorkKind("adjudication", _("Adjudication"), model_rows(Adjudication), "decided_by", "decided",
                          held=False))  # fmt: skip
