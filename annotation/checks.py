"""Structural checks on questions. Rule flags are recomputed from the question
every time it changes (never accumulated); model flags come from inference runs
and are left alone here."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from annotation.latex import count_blanks, latex_problems_in
from annotation.models import Flag, Question
from k12vista.text import storable
from k12vista.vocabulary import QuestionType

Code = Flag.Code


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
        found.append((Code.EMPTY_TEXT, "The question has no text.", {}))
    if not question.answers or any(not str(a).strip() for a in question.answers):
        found.append((Code.MISSING_ANSWER, "An answer is missing.", {"answers": len(question.answers)}))
    if question.qtype == QuestionType.MULTIPLE_CHOICE and len(question.options) != 4:
        found.append(
            (
                Code.OPTION_COUNT,
                f"Multiple choice has {len(question.options)} options, not 4.",
                {"options": len(question.options)},
            )
        )
    if question.qtype == QuestionType.FILL_IN_BLANK:
        blanks = count_blanks(question.text)
        if blanks != len(question.answers):
            found.append(
                (
                    Code.BLANK_MISMATCH,
                    f"{blanks} blanks but {len(question.answers)} answers.",
                    {"blanks": blanks, "answers": len(question.answers)},
                )
            )
    problems = latex_problems_in(latex_texts(question))[0] if latex is None else latex
    for where, found_here in problems.items():
        found += [(Code.LATEX_ERROR, f"{where}: {p.message}", {"where": where, "tex": p.tex}) for p in found_here]
    figures = list(question.figures.all()) if figures is None else figures
    if not figures:
        found.append((Code.FIGURE_MISSING, "The question has no figure.", {}))
    for figure in figures:
        if min(figure.width, figure.height) < settings.FIGURE_MIN_SIDE_PX:
            found.append(
                (
                    Code.LOW_RESOLUTION,
                    f"Figure {figure.position + 1} is {figure.width}×{figure.height} px, "
                    f"below {settings.FIGURE_MIN_SIDE_PX} px.",
                    {"figure": figure.position},
                )
            )
        if figure.sharpness is not None and figure.sharpness < settings.FIGURE_BLUR_THRESHOLD:
            found.append(
                (
                    Code.BLURRED_FIGURE,
                    f"Figure {figure.position + 1} looks blurred (sharpness {figure.sharpness:.0f}, "
                    f"threshold {settings.FIGURE_BLUR_THRESHOLD:.0f}).",
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
