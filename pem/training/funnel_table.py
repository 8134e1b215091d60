"""The funnel as table rows for the funnel page (labels and reasons in the reader's language)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from k12vista.vocabulary import LABEL_CODES
from pem.models import FilteredChain
from pem.training.filters import STAGES

REASONS = {
    "unparsed": _("no steps (output not parsed)"),
    "unlabelled_steps": _("steps without a label (no majority, or a judge failed)"),
    "step_count": _("too few or too many steps"),
    "text_mismatch": _("step text not in the response"),
    "error_without_reason": _("an error label without a reason"),
    "answer_contradicts_labels": _("all steps correct but the final answer is not the reference"),
    "fewer_models": _("fewer models than required for the question"),
    "sampled_out": _("sampled out to reach the target"),
    "not_in_target": _("category not in the target"),
}


def funnel_rows(funnel: dict) -> dict:
    if not funnel:
        return {"stages": [], "labels": LABEL_CODES, "subjects": [], "school_stages": []}
    subjects = sorted(funnel["input"]["by_subject"])
    school_stages = sorted(funnel["input"]["by_stage"])
    stages = []
    for name in ("input", *STAGES, "kept"):
        group = funnel[name]
        title = FilteredChain.Stage(name).label if name in STAGES else (_("Input") if name == "input" else _("Kept"))
        stages.append({
            "name": name, "title": title, "chains": group["chains"], "steps": group["steps"],
            "remaining": group.get("remaining_chains"),
            "reasons": [(REASONS.get(code, code), n) for code, n in sorted(group["reasons"].items())],
            "labels": [group["by_label"][code] for code in LABEL_CODES],
            "by_subject": [group["by_subject"].get(k, {}).get("chains", 0) for k in subjects],
            "by_stage": [group["by_stage"].get(k, {}).get("chains", 0) for k in school_stages],
        })  # fmt: skip
    return {"stages": stages, "labels": LABEL_CODES, "subjects": subjects, "school_stages": school_stages}
