"""How jobs read to people: a human label for every kind of job, and failures
stored as a code with parameters, worded when they are shown, so each reader
sees them in their own language (the job row keeps an English copy in
``error`` for logs and the admin).

This module imports no models: ``k12vista.models.Job`` reads from it, and the
apps register the wording of their failures here (inference.client does for an
unreachable model server), as they register job handlers in k12vista.jobs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import translation
from django.utils.translation import gettext_lazy as _

# Every kind registered with k12vista.jobs.job_handler (tests/test_job_kinds.py checks none is missing).
KIND_LABELS = {
    "annotation.build_release": _("Build a release"),
    "annotation.cluster_knowledge": _("Group knowledge points into core units"),
    "annotation.draw_candidates": _("Draw benchmark candidates"),
    "annotation.export_questions": _("Export questions"),
    "annotation.import_pdf": _("Import a PDF"),
    "annotation.import_questions": _("Import questions"),
    "inference.assist": _("Model help for the question bank"),
    "inference.confirm_filters": _("Apply the difficulty filters"),
    "inference.run": _("Inference run"),
    "inference.run_local": _("Inference run (transformers on CPU)"),
    "inference.run_offline": _("Inference run (vLLM offline engine)"),
    "inference.score": _("Scoring run"),
    "inference.score_local": _("Scoring run on a local model"),
    "inference.campaign": _("Campaign"),
    "inference.export_reference_results": _("Export results in the reference layout"),
    "k12vista.worker_check": _("Worker check (cpu queue)"),
    "k12vista.worker_check_io": _("Worker check (io queue)"),
    "pem.agreement": _("Compute the agreement report"),
    "pem.build_pebench": _("Build PEBench"),
    "pem.build_pebench_release": _("Build a PEBench release"),
    "pem.cots_from_run": _("Chains of thought from an inference run"),
    "pem.export_pebench": _("Export PEBench"),
    "pem.export_training": _("Export training data"),
    "pem.filter_pem800k": _("Filter PEM-800K"),
    "pem.import_pebench": _("Import PEBench"),
    "pem.import_pem800k": _("Import PEM-800K"),
    "pem.labels_from_scoring_run": _("Step labels from a scoring run"),
    "pem.panel": _("Judge panel"),
    "pem.pebench_given_steps": _("PEBench with the given steps (the paper's mode)"),
    "pem.split": _("Split chains of thought into steps"),
    "pem.train_pem": _("Train a PEM"),
    "review.create_audit": _("Create an audit"),
}


def kind_label(kind: str) -> str:
    """The kind in words, in the active language; a kind nobody labelled shows as written."""
    label = KIND_LABELS.get(kind)
    return str(label) if label is not None else kind


# --- failures worded at display time ------------------------------------------------

Wording = Callable[[dict[str, Any]], str]
_wordings: dict[str, Wording] = {}


def failure_wording(code: str) -> Callable[[Wording], Wording]:
    """Registers how the failure ``code`` reads, given its parameters."""

    def register(wording: Wording) -> Wording:
        _wordings[code] = wording
        return wording

    return register


def failure_message(code: str, params: dict[str, Any] | None) -> str:
    """The failure in the active language, or "" when the code is unknown or its
    parameters do not fit (the stored English text is shown then)."""
    wording = _wordings.get(code)
    if wording is None:
        return ""
    try:
        return wording(params or {})
    except (KeyError, TypeError, ValueError):
        return ""


class JobFailure(Exception):
    """A failure a handler states in words people read: the job fails with
    ``code`` and ``params`` stored, and each reader sees it in their language."""

    def __init__(self, code: str, params: dict[str, Any]) -> None:
        self.code = code
        self.params = params
        with translation.override("en"):
            super().__init__(failure_message(code, params) or code)
