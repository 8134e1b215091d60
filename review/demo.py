from django.contrib.auth import get_user_model

from k12vista.demo import demo_loader
from review import services
from review.models import Audit

DEMO_AUDIT = "Demo audit: imported questions, 2 per subject"


@demo_loader(order=40)
def demo_audit() -> str:
    """One audit of the demo questions for the demo inspector, so the queue has work.
    Runs after the questions (order 20)."""
    if Audit.objects.filter(name=DEMO_AUDIT).exists():
        return "demo audit: already there"
    inspector = get_user_model().objects.filter(username="inspector").first()
    if inspector is None:
        return "demo audit: no demo inspector, skipped"
    try:
        audit = services.create_audit(
            name=DEMO_AUDIT, population={"kind": "status", "status": "imported"}, strata=["subject"], per_stratum=2,
            seed=2026, inspectors=[inspector], inspectors_per_item=1, by=inspector,
        )  # fmt: skip
    except services.AuditError as exc:
        return f"demo audit: skipped ({exc})"
    return f"demo audit: {audit.items.count()} items drawn"
