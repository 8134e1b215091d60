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
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from k12vista import line_reasons
from k12vista.vocabulary import Subject

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
    "inference.score_offline": _("Scoring run (vLLM offline engine)"),
    "inference.campaign": _("Campaign"),
    "inference.export_reference_results": _("Export results in the reference layout"),
    "k12vista.worker_check": _("Worker check (cpu queue)"),
    "k12vista.worker_check_io": _("Worker check (io queue)"),
    "k12vista.worker_check_gpu": _("Worker check (a gpu queue)"),
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


# --- titles worded at display time ------------------------------------------------
# A job's title is stored as a code and parameters (``Job.title_code``, ``Job.title_params``) and worded in
# the reader's language when shown: a job started from the Chinese pages reads in English to an English
# reader. ``Job.title`` keeps an English copy for logs, the admin and rows made before the codes.
TITLES = {
    "build_release": gettext_noop("Build release v%(version)s"),
    "build_pebench": gettext_noop("Build PEBench (%(size)s items, seed %(seed)s)"),
    "campaign": gettext_noop("Campaign %(name)s"),
    "campaign_retry": gettext_noop("Campaign %(name)s (retry)"),
    "agreement": gettext_noop("Agreement report (%(scope)s)"),
    "cluster_knowledge": gettext_noop("Cluster knowledge points: %(subjects)s"),
    "cots_from_run": gettext_noop("Chains of thought from %(run)s"),
    "create_audit": gettext_noop("Create audit %(name)s (%(size)s items)"),
    "create_audit_unnamed": gettext_noop("Create audit (%(size)s items)"),
    "draw": gettext_noop("Draw %(name)s"),
    "export_pebench": gettext_noop("Export PEBench"),
    "export_questions": gettext_noop("Export questions (%(fmt)s)"),
    "filter_pem800k": gettext_noop("Filter the labels of %(rater)s"),
    "given_steps": gettext_noop("PEBench, given steps: %(judge)s"),
    "import_file": gettext_noop("Import %(file)s"),
    "import_pebench": gettext_noop("Import PEBench %(name)s"),
    "import_pem800k": gettext_noop("Import PEM-800K %(name)s"),
    "labels_from_scoring_run": gettext_noop("Step labels from %(run)s"),
    "pebench_release": gettext_noop("PEBench release v%(version)s"),
    "reference_results": gettext_noop("Results of %(name)s in the reference layout"),
    "reject_difficulty": gettext_noop("Reject %(n)d questions (difficulty filters)"),
    "again": gettext_noop("%(name)s (again)"),
    "rescore": gettext_noop("%(name)s (rescore)"),
    "retry": gettext_noop("%(name)s (retry)"),
    "run_part": gettext_noop("%(name)s (part %(n)d of %(of)d)"),
    "train_pem": gettext_noop("Train the PEM on export %(id)s"),
    "training_export": gettext_noop("Training export of filter run %(id)s"),
    "worker_check": gettext_noop("Worker check (%(queue)s)"),
}


# The agreement report's scopes (pem.models.StoredAgreement.Scope), in words.
AGREEMENT_SCOPES = {"all": _("all chains of thought"), "pebench": "PEBench"}


def _subjects(value: Any) -> str:
    """ "math, physics" (the stored parameter) as the subjects' names in the active language."""
    names = [str(Subject(code).label) if code in Subject.values else code for code in str(value).split(", ")]
    return ("、" if (translation.get_language() or "").startswith("zh") else ", ").join(names)


# Parameters that are codes, worded when the title is shown: a title stored before this reads the same.
PARAM_WORDINGS: dict[str, dict[str, Callable[[Any], str]]] = {
    "agreement": {"scope": lambda scope: str(AGREEMENT_SCOPES.get(scope, scope))},
    "cluster_knowledge": {"subjects": _subjects},
}


def title(code: str, **params: Any) -> dict[str, Any]:
    """A job title to store: pass it as ``start_job(title=...)``; parameters are kept JSON-plain."""
    if code not in TITLES:
        raise ValueError(f"no job title is registered as {code!r}")
    return {"code": code, "params": {name: value if isinstance(value, int) else str(value)
                                      for name, value in params.items()}}  # fmt: skip


def title_text(code: str, params: dict[str, Any] | None) -> str:
    """The title in the active language, or "" when the code is unknown or its parameters do not fit."""
    template = TITLES.get(code)
    if template is None:
        return ""
    params = dict(params or {})
    for name, wording in PARAM_WORDINGS.get(code, {}).items():
        if name in params:
            params[name] = wording(params[name])
    try:
        return gettext(template) % params
    except (KeyError, TypeError, ValueError):
        return ""


def english_title(stored: dict[str, Any]) -> str:
    with translation.override("en"):
        return title_text(stored["code"], stored["params"])


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
    parameters do not fit (the stored English text is shown then). A code no failure
    wording is registered for is a refusal's reason (k12vista.line_reasons: a ReasonError
    raised in the handler, such as an import file's or a PEBench build's), worded as one."""
    wording = _wordings.get(code)
    if wording is None:
        return line_reasons.reason_text({"code": code, "params": params or {}})
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
