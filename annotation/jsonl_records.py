"""The question import's records: one JSONL line's record read as a question (``read_record``), in the
formats annotation.jsonl_import's docstring describes (the K12Vista release's, the studio's, and the
public sets' of annotation.public_formats). The single and the bulk path (annotation.jsonl_bulk) both
read them here."""

from __future__ import annotations

from typing import Any

from annotation.public_formats import from_gaokao, is_gaokao
from annotation.record_fields import (
    figure,
    question_type,
    split_options,
    split_steps,
    string,
    string_list,
)
from annotation.reference_format import canonical_positions, take_placeholders
from annotation.services import FigureData, QuestionData
from k12vista.import_files import ImportSource, RecordError
from k12vista.line_reasons import reason, reason_of
from k12vista.vocabulary import STAGE_LAST_GRADE, QuestionType, Subject, parse_release_tag, stage_of_grade


def knowledge_points(value: Any) -> list[str]:
    # Stored names are stripped and unique, so the content hash must see them that way too.
    return list(dict.fromkeys(name.strip() for name in string_list(value, "knowledge_points") if name.strip()))


def difficulty(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError("difficulty", reason("expected_number", value=repr(value)))
    return float(value)  # 1 and 1.0 must hash alike


def options(value: Any) -> list[dict]:
    """[{label, text}], or a list of strings labelled A, B, C…"""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError("options", reason("expected_list"))
    result = []
    for position, item in enumerate(value):
        if isinstance(item, str):
            item = {"label": chr(ord("A") + position), "text": item}
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("label"), str)
            or not isinstance(item.get("text"), str)
        ):
            raise RecordError("options", reason("expected_options"))
        result.append({"label": item["label"], "text": item["text"]})
    return result


# A label starts a line, follows a space, or follows the closing bracket of "（　　）" or a formula.
def figures(value: Any, field_name: str, source: ImportSource) -> list[FigureData]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [figure(item, f"{field_name}[{i}]", source) for i, item in enumerate(value)]
    return [figure(value, field_name, source)]


def hash_id(record: dict) -> str:
    value = record.get("hash_id")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return string(value, "hash_id", required=True).strip()


def grade_in_stage(value: Any, tag: Any) -> tuple[str, int, bool]:
    """The subject and grade of a release tag, and whether the grade is known: an explicit grade
    wins when it lies in the tag's stage, otherwise the grade is the stage's last, not known."""
    named = string(tag, "subject", required=True)  # its RecordError already names the field
    try:
        subject, stage = parse_release_tag(named)
    except ValueError as exc:
        raise RecordError("subject", reason_of(exc)) from None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 12 and stage_of_grade(value) == stage:
        return subject.value, value, True
    return subject.value, STAGE_LAST_GRADE[stage], False


def question_text(value: Any, field_name: str) -> tuple[str, list[int]]:
    """The text with every ``<image>`` placeholder taken out, and where each stood."""
    return take_placeholders(string(value, field_name))


def options_without_placeholders(found: list[dict]) -> tuple[list[dict], bool]:
    """Options with any ``<image>`` taken out, and whether one was (its figure then stands before them)."""
    cleaned, had = [], False
    for option in found:
        text, positions = take_placeholders(option["text"])
        had = had or bool(positions)
        cleaned.append({**option, "text": text})
    return cleaned, had


REFERENCE_REQUIRED = ("hash_id", "question", "type", "subject")


def from_reference(record: dict, source: ImportSource) -> QuestionData:
    missing = [name for name in REFERENCE_REQUIRED if record.get(name) in (None, "")]
    if missing:
        # Quoted as the file spells them, like RecordError's field names.
        raise RecordError("", reason("missing", fields="、".join(f"“{name}”" for name in missing)))
    subject, grade, grade_known = grade_in_stage(record.get("grade"), record.get("subject"))
    qtype = question_type(record.get("type"))
    answer = record.get("format_answer") or {}
    if not isinstance(answer, dict):
        raise RecordError("format_answer", reason("expected_answer_object"))
    text, positions = question_text(record.get("question"), "question")
    embedded: list[dict] = []
    if qtype == QuestionType.MULTIPLE_CHOICE:
        text, embedded = split_options(text)
        # A placeholder among the options (split off above) stands at the stem's end.
        positions = [min(p, len(text)) for p in positions]
    given_options, option_had_placeholder = options_without_placeholders(
        options(record["options"]) if "options" in record else embedded
    )
    if option_had_placeholder:
        positions.append(len(text))
    solution = answer.get("format_solution")
    if isinstance(solution, list):
        steps = string_list(solution, "format_answer.format_solution")
        raw = "\n".join(steps)
    else:
        raw = string(solution, "format_answer.format_solution")
        steps = split_steps(raw)
    return QuestionData(
        hash_id=hash_id(record),
        subject=subject,
        grade=grade,
        qtype=qtype,
        text=text,
        options=given_options,
        answers=string_list(answer.get("ground_truth"), "format_answer.ground_truth"),
        raw_solution=string(record["raw_solution"], "raw_solution") if "raw_solution" in record else raw,
        solution_steps=string_list(record["solution_steps"], "solution_steps") if "solution_steps" in record else steps,
        knowledge_points=knowledge_points(record.get("knowledge_points")),
        difficulty=difficulty(record.get("difficulty")),
        source=string(record.get("source"), "source"),
        figures=figures(record.get("img"), "img", source),
        figure_positions=canonical_positions(positions, text),
        grade_known=grade_known,
    )


def from_studio(record: dict, source: ImportSource) -> QuestionData:
    subject = string(record.get("subject"), "subject", required=True)
    if subject not in Subject.values:
        raise RecordError("subject", reason("unknown_subject", value=repr(subject), choices=", ".join(Subject.values)))
    grade = record.get("grade")
    if isinstance(grade, bool) or not isinstance(grade, int) or not 1 <= grade <= 12:
        raise RecordError("grade", reason("expected_grade", value=repr(grade)))
    text, positions = question_text(record.get("text"), "text")
    given_options, option_had_placeholder = options_without_placeholders(options(record.get("options")))
    stored_positions = record.get("figure_positions", [])
    if not isinstance(stored_positions, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= len(text) for p in stored_positions
    ):
        raise RecordError("figure_positions", reason("expected_offsets"))
    grade_known = record.get("grade_known", True)
    if not isinstance(grade_known, bool):
        raise RecordError("grade_known", reason("expected_bool"))
    return QuestionData(
        hash_id=hash_id(record),
        subject=subject,
        grade=grade,
        grade_known=grade_known,
        figure_positions=canonical_positions(
            [*stored_positions, *positions, *([len(text)] if option_had_placeholder else [])], text
        ),
        qtype=question_type(record.get("type")),
        text=text,
        options=given_options,
        answers=string_list(record.get("answers"), "answers"),
        raw_solution=string(record.get("raw_solution"), "raw_solution"),
        solution_steps=string_list(record.get("solution_steps"), "solution_steps"),
        knowledge_points=knowledge_points(record.get("knowledge_points")),
        difficulty=difficulty(record.get("difficulty")),
        source=string(record.get("source"), "source"),
        figures=figures(record.get("figures"), "figures", source),
    )


def is_reference(record: dict) -> bool:
    return "question" in record or "format_answer" in record


REFERENCE, STUDIO = "K12Vista release", "studio"


def record_to_data(record: Any, source: ImportSource) -> QuestionData:
    return read_record(record, source)[0]


def read_record(record: Any, source: ImportSource) -> tuple[QuestionData, str, list[str]]:
    """The question, the name of the format it was read in, and the fields guessed for it."""
    if not isinstance(record, dict):
        raise RecordError("", reason("not_object"))
    if is_gaokao(record):
        return from_gaokao(record, source)
    if is_reference(record):
        data = from_reference(record, source)
        return data, REFERENCE, [] if data.grade_known else ["grade"]
    return from_studio(record, source), STUDIO, []
