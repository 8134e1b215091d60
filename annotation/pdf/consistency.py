"""The consistency report of a segmented paper: what a person checks first on an import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from annotation.pdf.notes import Note, english, note

if TYPE_CHECKING:
    from annotation.pdf.segment import ParsedQuestion

# Question numbers that may be missing (lost to a figure or OCR) before a number is ignored by the segmenter;
# a longer gap is another part of the paper (理综 numbering), not said as gaps.
MAX_SKIPPED = 2

LEFTOVER_CHARS = 200  # a heading's instructions are shorter; more read into no question is a lost question


def consistency_report(questions: list[ParsedQuestion], stated: dict[int, tuple[str, int | None]],
                       leftover: dict[tuple[int, int], tuple[int, ParsedQuestion]], *,
                       notes: list[tuple[Note, list[ParsedQuestion]]] | None = None,
                       said_missing: list[tuple[int, int]] | None = None) -> dict:  # fmt: skip
    """What a person checks first on an import: every number found once, sections as long as they say.

    ``notes`` lists each gap, duplicate, count that differs from its heading,
    column whose text went to no question, and what the reading itself was unsure
    of, as codes with parameters (annotation.pdf.notes) worded when shown;
    ``warnings`` the same in English. ``suspects`` holds the labels of the
    questions next to each of them, which get a flag, and ``reasons`` the notes
    that concern each of those questions (the flag's detail).
    """
    report: dict = {"numbers": [q.label for q in questions], "gaps": [], "duplicates": [], "sections": [],
                    "leftover": [], "notes": [], "warnings": [], "suspects": [], "reasons": {}}  # fmt: skip

    def warn(said: Note, *near: ParsedQuestion) -> None:
        if said not in report["notes"]:
            report["notes"].append(said)
            report["warnings"].append(english(said))
        for question in near:
            report["reasons"].setdefault(question.label, [])
            if said not in report["reasons"][question.label]:
                report["reasons"][question.label].append(said)

    said_missing = said_missing or []
    # A jump the segmenter said ("skipped") and the gaps found here are the same missing numbers: said
    # once. Gaps that cover the whole jump say it (naming the questions on both sides); a longer jump,
    # of which gaps cover only the first MAX_SKIPPED numbers, is said by the skipped note alone.
    gap_numbers = _gap_numbers(questions)
    skipped_numbers: set[int] = set()
    for said, near in notes or []:
        if said.get("code") == "skipped":
            jump = _numbers(said["params"].get("missing", ""))
            if jump and jump <= gap_numbers:
                continue
            skipped_numbers |= jump
            resumed = [q for q in questions if not q.name and q.number == said["params"].get("next")]
            warn(said, *near, *resumed[:1])
            continue
        warn(said, *near)
    for first, last in said_missing:
        warn(note("stated_missing", first=first, last=last))

    by_scope: dict[str, list[ParsedQuestion]] = {}
    for question in questions:
        if not question.name:
            by_scope.setdefault(question.scope, []).append(question)
    for scope, members in by_scope.items():
        seen: dict[int, ParsedQuestion] = {}
        for before, after in zip(members, members[1:], strict=False):
            for missing in range(before.number + 1, min(after.number, before.number + 1 + MAX_SKIPPED)):
                label = f"{scope}.{missing}" if scope else str(missing)
                report["gaps"].append(label)
                if any(a <= missing <= b for a, b in said_missing) or (not scope and missing in skipped_numbers):
                    continue  # the paper said it lacks it, or the jump was said: said once, above
                warn(note("gap", label=label, before=before.label, after=after.label), before, after)
        for question in members:
            if question.number in seen:
                report["duplicates"].append(question.label)
                warn(note("duplicate", label=question.label), seen[question.number], question)
            seen[question.number] = question
    for section, (heading, count) in sorted(stated.items()):
        found = [q for q in questions if q.section == section]
        report["sections"].append({"heading": heading, "stated": count, "found": len(found)})
        if count is not None and found and count != len(found):
            warn(note("section_count", heading=heading, stated=count, found=len(found)), found[0], found[-1])
    position = {id(q): i for i, q in enumerate(questions)}
    for (page, column), (chars, before) in sorted(leftover.items(), key=lambda item: item[0]):
        if chars >= LEFTOVER_CHARS:
            report["leftover"].append({"page": page, "column": column + 1 if column >= 0 else 0, "chars": chars})
            at = position.get(id(before))
            near = [] if at is None else questions[at : at + 2]
            warn(note("leftover", page=page, column=max(column, 0) + 1, chars=chars), *near)
    report["suspects"] = sorted(report["reasons"])
    # The headings' counts by section, so that a later reading of some pages (annotation.pdf.vision)
    # works the report out again with them.
    report["stated"] = {str(section): [heading, count] for section, (heading, count) in sorted(stated.items())}
    # How sure each cut is: the segmenter's own evidence, and at most 0.5 next to anything said above.
    report["confidence"] = {
        q.label: round(min(q.confidence, 0.5 if q.label in report["reasons"] else 1.0), 2) for q in questions
    }
    return report


def _gap_numbers(questions: list[ParsedQuestion]) -> set[int]:
    """The numbers the gap check below finds missing in the paper's unscoped numbering."""
    members = [q for q in questions if not q.name and not q.scope]
    found: set[int] = set()
    for before, after in zip(members, members[1:], strict=False):
        found.update(range(before.number + 1, min(after.number, before.number + 1 + MAX_SKIPPED)))
    return found


def _numbers(span: object) -> set[int]:
    """ "3" or "2-5" (a skipped note's ``missing``) as numbers; nothing for anything else."""
    first, _, last = str(span).partition("-")
    try:
        low, high = int(first), int(last or first)
    except ValueError:
        return set()
    return set(range(low, high + 1)) if 0 < low <= high <= low + 100 else set()
