"""Prompt templates as stored, versioned rows: the defaults from
default_prompts.py are loaded once, and every edit is a new version."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from annotation.models import Question
from annotation.reference_format import without_placeholders
from inference import default_prompts
from inference.models import PromptTemplate
from k12vista.vocabulary import QUESTION_TYPE_ZH, STAGE_ZH, SUBJECT_ZH, QuestionType, Stage, Subject

QUESTION_TYPES = [t.value for t in QuestionType]


def hash_row(*, kind: str, qtype: str, system: str, user_template: str) -> str:
    return default_prompts.hash_prompt_text(kind=kind, question_type=qtype or None, system=system,
                                            user_template=user_template)  # fmt: skip


def ensure_default_prompts() -> int:
    """Creates version 1 of every default prompt that has no version yet."""
    created = 0
    for default in default_prompts.DEFAULT_PROMPTS:
        qtype = default.question_type or ""
        if PromptTemplate.objects.filter(prompt_set="", kind=default.kind, qtype=qtype).exists():
            continue
        try:
            with transaction.atomic():
                PromptTemplate.objects.create(
                    kind=default.kind, qtype=qtype, name=default.name, system=default.system,
                    user_template=default.user_template, content_hash=default_prompts.content_hash(default),
                    version=1,
                )  # fmt: skip
                created += 1
        except IntegrityError:  # another worker loaded it at the same moment
            continue
    return created


def current(kind: str, qtype: str = "") -> PromptTemplate:
    """The newest version of the studio's own prompts for this kind and question type (or the
    type-free one); a registered reference set is never current (inference.reference.register)."""
    studio = PromptTemplate.objects.filter(prompt_set="")
    found = studio.filter(kind=kind, qtype__in=[qtype, ""]).order_by("-qtype", "-version").first()
    if found is None:
        raise LookupError(f"no prompt of kind {kind!r} for {qtype or 'any type'!r}")
    return found


class PromptError(ValueError):
    pass


@transaction.atomic
def save_version(*, kind: str, qtype: str, name: str, system: str, user_template: str, user: Any) -> PromptTemplate:
    """A researcher's edit: a new version, unless the text did not change."""
    unknown = default_prompts.placeholders(_Text(system, user_template)) - default_prompts.PLACEHOLDERS
    if unknown:
        raise PromptError(f"unknown placeholders: {', '.join('${' + n + '}' for n in sorted(unknown))}")
    digest = hash_row(kind=kind, qtype=qtype, system=system, user_template=user_template)
    versions = PromptTemplate.objects.filter(prompt_set="", kind=kind, qtype=qtype)
    latest = versions.order_by("-version").first()
    if latest is not None and latest.content_hash == digest:
        return latest
    version = (versions.aggregate(v=Max("version"))["v"] or 0) + 1
    return PromptTemplate.objects.create(kind=kind, qtype=qtype, name=name, system=system, user_template=user_template,
                                         content_hash=digest, version=version, created_by=user)  # fmt: skip


def version_with_text(*, kind: str, name: str, system: str, user_template: str, user: Any) -> PromptTemplate:
    """The type-free version of ``kind`` with exactly this text, saved as a new version if none has it
    (a trainer's prompt: every judge trained on the same text shares one row)."""
    digest = hash_row(kind=kind, qtype="", system=system, user_template=user_template)
    same = PromptTemplate.objects.filter(prompt_set="", kind=kind, qtype="", content_hash=digest)
    found = same.order_by("-version").first()
    return found or save_version(kind=kind, qtype="", name=name, system=system, user_template=user_template, user=user)


class _Text:
    def __init__(self, system: str, user_template: str) -> None:
        self.name, self.system, self.user_template = "draft", system, user_template


def grade_text(question: Question) -> str:
    """The grade, or the stage (初中) where the source gave only that: never a stage's last grade as if real."""
    return str(question.grade) if question.grade_known else STAGE_ZH[Stage(question.stage)]


def question_values(question: Question, *, caption: str = "") -> dict[str, str]:
    # A reference "<image>" left in text stored before the importers took it out never reaches a model.
    text = without_placeholders(question.text)
    options = [f"{o['label']}. {without_placeholders(o['text'])}" for o in question.options]
    return {
        "question": text,
        "options": "\n".join(options),
        # As a chain of thought holds them (pem.services: question_text_of, fill_from_bank), for
        # the prompt a trained PEM learnt on: no empty line for a question without options.
        "question_with_options": "\n".join([text, *options]),
        "subject": SUBJECT_ZH[Subject(question.subject)],
        "grade": grade_text(question),
        "reference_answer": default_prompts.BLANK_SEPARATOR.join(question.answers),
        "reference_answer_lines": "\n".join(question.answers),
        "reference_solution": "\n".join(question.solution_steps) or question.raw_solution,
        "raw_solution": question.raw_solution,
        "caption": default_prompts.figure_description(caption),
        "question_type": QUESTION_TYPE_ZH[QuestionType(question.qtype)],
    }


def render(
    template: PromptTemplate, *, question: Question | None = None, caption: str = "", **values: str
) -> tuple[str, str]:
    """(system, user) text; raises MissingPlaceholderError naming what has no value.
    ``caption`` describes the figures for text-only models."""
    given = (question_values(question, caption=caption) if question is not None else {}) | values
    return default_prompts.render(template, **given)
