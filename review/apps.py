from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ReviewConfig(AppConfig):
    name = "review"

    def ready(self) -> None:
        # apps.py is loaded before the models; ready() runs once they are.
        from k12vista.work import WorkKind, model_rows, register
        from review.models import Rating

        register(WorkKind("audit_rating", _("Audit ratings"), model_rows(Rating), "inspector", "submitted"))
