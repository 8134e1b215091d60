"""Structural checks on questions. Rule flags are recomputed from the question
every time it changes (never accumulated); model flags come from inference runs
and are left alone here."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext

from annotation.latex import count_blanks, latex_problems_in
from annotation.models import Figure, Flag, Question
from k12vista.text import storable
from k12vista.vocabulary import QuestionType

Code = Flag.Code

# Flags written by the import (a gap in the paper next to the question, a part it could not import): the
# question's content cannot tell them again, so a rule refresh leaves them for a person to resolve.
KEPT_ON_REFRESH = (Code.IMPORT_GAP, Code.IMPORT_ERROR)

# Words that point the reader at a figure: 如图(所示), 如下图, 右图, 图1, 图(a), 图甲, 甲图, 见图, 示意图.
# 图像/图象 (a function's graph, often to be drawn) and 作图 point at none.
FIGURE_REFERENCE = re.compile(
    r"如图|[上下左右]图|[甲乙丙丁]图|见图|所示图|示意图|(?<![作画绘])图\s*[（(]?\s*[0-9０-９一二三四五六七八九十甲乙丙丁a-dA-D]"
)
# The placeholder an import leaves in the text where the paper set a formula as an image.
FORMULA_PLACEHOLDER = re.compile(r"\[\[formula:(\d+)\]\]")
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
MATH_SPAN = re.compile(r"(?<!\\)\$(?!\$)(.+?)(?<!\\)\$", re.DOTALL)
TEXT_IN_MATH = re.compile(r"\\(?:text|mbox|mathrm|textrm|textbf|operatorname|ce|pu)\s*\{[^{}]*\}")
SCRIPTED_HAN = re.compile(r"[\^_]\s*\{[^{}]*[\u3400-\u4dbf\u4e00-\u9fff]")
DOUBLED_MATH_LETTER = re.compile(r"([\U0001d400-\U0001d7ff])\1")


def refers_to_figure(text: str) -> bool:
    return bool(FIGURE_REFERENCE.search(text))


def garbling_in(text: str) -> list[str]:
    """What in a text shows that it was read wrongly (the PDF's text layer or OCR), in words."""
    found = []
    if "\ufffd" in text:
        found.append(gettext("U+FFFD replacement characters (an unreadable font)"))
    if DOUBLED_MATH_LETTER.search(text):
        found.append(gettext("doubled mathematical italic letters (Word's 𝑥𝑥 for x)"))
    plain = text.replace("\\$", "").replace("$$", "")
    if plain.count("$") % 2:
        found.append(gettext("an unbalanced $"))
    math = " ".join(TEXT_IN_MATH.sub("", m.group(1)) for m in MATH_SPAN.finditer(plain))
    if SCRIPTED_HAN.search(text):
        found.append(gettext("Chinese inside a superscript or subscript"))
    elif HAN.search(math):
        found.append(gettext("Chinese inside math"))
    return found


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
    texts = latex_texts(question)
    problems = latex_problems_in(texts)[0] if latex is None else latex
    for where, found_here in problems.items():
        found += [(Code.LATEX_ERROR, gettext("%(where)s: %(error)s") % {"where": place_name(where), "error": p.message},
                   {"where": where, "tex": p.tex}) for p in found_here]  # fmt: skip
    for where, text in texts.items():
        if garbled := garbling_in(text):
            message = gettext("%(where)s: %(found)s.") % {"where": place_name(where), "found": "; ".join(garbled)}
            found.append((Code.GARBLED_TEXT, message, {"where": where, "found": garbled}))
    figures = list(question.figures.all()) if figures is None else figures
    formulas = [f for f in figures if f.kind == Figure.Kind.FORMULA]
    figures = [f for f in figures if f.kind != Figure.Kind.FORMULA]
    placeholders = sorted({int(n) for t in texts.values() for n in FORMULA_PLACEHOLDER.findall(t)})
    if placeholders:
        message = gettext("%(n)d formulas are images in the text; type them as LaTeX.") % {"n": len(placeholders)}
        found.append((Code.FORMULA_IMAGE, message, {"placeholders": placeholders, "formula_images": len(formulas)}))
    reference = FIGURE_REFERENCE.search(question.text + "\n" + "\n".join(o.get("text", "") for o in question.options))
    if reference and not figures:
        message = gettext("The text refers to a figure (%(reference)s) but none is attached.") % {
            "reference": reference.group()
        }
        found.append((Code.FIGURE_MISSING, message, {"reference": reference.group()}))
    for figure in figures:
        # The pixels the source held: a figure enlarged to the standard size keeps the detail it had.
        width, height = figure.source_width or figure.width, figure.source_height or figure.height
        if min(width, height) < settings.FIGURE_MIN_SIDE_PX:
            found.append(
                (
                    Code.LOW_RESOLUTION,
                    gettext("Figure %(n)d is %(width)d×%(height)d px in the source, below %(min)d px.")
                    % {"n": figure.position + 1, "width": width, "height": height, "min": settings.FIGURE_MIN_SIDE_PX},
                    {"figure": figure.position, "source": [width, height]},
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
    open_rule_flags = Flag.objects.filter(question=question, origin=Flag.Origin.RULE, resolved_at__isnull=True)
    open_rule_flags.exclude(code__in=KEPT_ON_REFRESH).delete()
    return Flag.objects.bulk_create(Flag(question=question, **rule_flag_row(*finding)) for finding in findings)


def rule_flag_row(code: str, message: str, detail: dict) -> dict[str, Any]:
    """A rule finding's flag columns but its question: here and in the bulk import (annotation.jsonl_bulk)."""
    return {"code": str(code), "origin": Flag.Origin.RULE.value, "message": storable(message), "detail": detail}


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
