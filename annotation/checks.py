"""Structural checks on questions. Rule flags are recomputed from the question
every time it changes (never accumulated); model flags come from inference runs
and are left alone here."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext

from annotation.latex import count_blanks, latex_problems_in
from annotation.models import Flag, Question
from k12vista.text import storable
from k12vista.vocabulary import QuestionType

Code = Flag.Code


def place_name(where: str) -> str:
    """Where in the question a formula sits, in the team's language ("option A", "answer 2")."""
    kind, _sep, which = where.partition(" ")
    names = {"text": gettext("question text"), "solution": gettext("solution")}
    if kind == "option":
        return gettext("option %(label)s") % {"label": which}
    if kind == "answer":
        return gettext("answer %(n)s") % {"n": which}
    return names.get(kind, where)


def latex_texts(question: Question) -> dict[str, str]:
    """The question's texts whose LaTeX is checked, by where they are."""
    texts = {"text": question.text, "solution": "\n".join(question.solution_steps) or question.raw_solution}
    texts |= {f"option {o.get('label', i)}": o.get("text", "") for i, o in enumerate(question.options)}
    texts |= {f"answer {i + 1}": a for i, a in enumerate(question.answers)}
    return texts


def rule_findings(
    question: Question, figures: list | None = None, latex: dict[str, list] | None = None
) -> list[tuple[str, str, dict]]:
    """(code, message, detail) for every rule the question breaks.

    ``figures`` lets a caller check a question before it is saved; ``latex``
    gives the KaTeX problems of its ``latex_texts`` already found (a bulk
    import checks a batch of questions in one round trip)."""
    found: list[tuple[str, str, dict]] = []
    if not question.text.strip():
        found.append((Code.EMPTY_TEXT, gettext("The question has no text."), {}))
    if not question.answers or any(not str(a).strip() for a in question.answers):
        found.append((Code.MISSING_ANSWER, gettext("An answer is missing."), {"answers": len(question.answers)}))
    if question.qtype == QuestionType.MULTIPLE_CHOICE and len(question.options) != 4:
        found.append(
            (
                Code.OPTION_COUNT,
                gettext("Multiple choice has %(n)d options, not 4.") % {"n": len(question.options)},
                {"options": len(question.options)},
            )
        )
    if question.qtype == QuestionType.FILL_IN_BLANK:
        blanks = count_blanks(question.text)
        if blanks != len(question.answers):
            found.append(
                (
                    Code.BLANK_MISMATCH,
                    gettext("%(blanks)d blanks but %(answers)d answers.")
                    % {"blanks": blanks, "answers": len(question.answers)},
                    {"blanks": blanks, "answers": len(question.answers)},
                )
            )
    problems = latex_problems_in(latex_texts(question))[0] if latex is None else latex
    for where, found_here in problems.items():
        found += [(Code.LATEX_ERROR, gettext("%(where)s: %(error)s") % {"where": place_name(where), "error": p.message},
                   {"where": where, "tex": p.tex}) for p in found_here]  # fmt: skip
    figures = list(question.figures.all()) if figures is None else figures
    if not figures:
        found.append((Code.FIGURE_MISSING, gettext("The question has no figure."), {}))
    for figure in figures:
        if min(figure.width, figure.height) < settings.FIGURE_MIN_SIDE_PX:
            found.append(
                (
                    Code.LOW_RESOLUTION,
                    gettext("Figure %(n)d is %(width)d×%(height)d px, below %(min)d px.")
                    % {
                        "n": figure.position + 1,
                        "width": figure.width,
                        "height": figure.height,
                        "min": settings.FIGURE_MIN_SIDE_PX,
                    },  # fmt: skip
                    {"figure": figure.position},
                )
            )
        if figure.sharpness is not None and figure.sharpness < settings.FIGURE_BLUR_THRESHOLD:
            found.append(
                (
                    Code.BLURRED_FIGURE,
                    gettext("Figure %(n)d looks blurred (sharpness %(sharpness).0f, threshold %(threshold).0f).")
                    % {
                        "n": figure.position + 1,
                        "sharpness": figure.sharpness,
                        "threshold": settings.FIGURE_BLUR_THRESHOLD,
                    },  # fmt: skip
                    {"figure": figure.position},
                )
            )
    return found


@transaction.atomic
def refresh_rule_flags(question: Question, findings: list[tuple[str, str, dict]] | None = None) -> list[Flag]:
    """Replaces the question's open rule flags with what the rules find now
    (or with ``findings`` already computed for it)."""
    findings = rule_findings(question) if findings is None else findings
    Flag.objects.filter(question=question, origin=Flag.Origin.RULE, resolved_at__isnull=True).delete()
    return Flag.objects.bulk_create(
        Flag(question=question, code=code, origin=Flag.Origin.RULE, message=storable(message), detail=detail)
        for code, message, detail in findings
    )


def add_model_flag(*, question: Question, message: str, run_ref: str, detail: dict | None = None) -> Flag:
    """A flag written by a model check run (the inference app calls this)."""
    return Flag.objects.create(
        question=question,
        code=Code.MODEL_CHECK,
        origin=Flag.Origin.MODEL,
        message=storable(message),  # a model's words: may hold anything
        detail=detail or {},
        run_ref=run_ref,
    )
