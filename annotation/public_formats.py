"""The public Chinese exam sets, read as they are published: GAOKAO-Bench and GAOKAO-MM.

Both publish a JSON file per subject and kind, a wrapper ``{"keywords": "2010-2022_Math_I_MCQs",
"example": [record, …]}``, whose records hold ``year``, ``category`` (the paper, "（新课标）"),
``question`` (stem and options in one text), ``answer`` (a list), ``analysis`` (the solution),
``index``, ``score`` and, in GAOKAO-MM, ``picture``: image paths written relative to the
wrapper's folder ("../Data/<keywords>/<keywords>_7_0.png"). The records name neither a subject
nor a type nor an id: those are taken from the wrapper's ``keywords`` and stated in the import
report as guessed (docs/formats.md, "GAOKAO-Bench and GAOKAO-MM").

A wrapper is turned into one JSON line per record, each carrying its wrapper's context under
``WRAPPER_KEY``, so the importer's line machinery (its worker processes, its per-line report)
reads them as any other line.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from typing import Any

from annotation.record_fields import (
    ImageSource,
    figure,
    question_type,
    split_options,
    split_steps,
    string,
    string_list,
)
from annotation.services import QuestionData
from k12vista.import_files import RecordError
from k12vista.line_reasons import reason
from k12vista.vocabulary import STAGE_LAST_GRADE, QuestionType, Stage, Subject

WRAPPER_KEY = "_wrapper"
BENCH, MM = "GAOKAO-Bench", "GAOKAO-MM"
# The subject as the published file names spell it (in keywords and file names), English or Chinese.
SUBJECT_NAMES = {
    Subject.MATH: ("math", "数学"), Subject.PHYSICS: ("physics", "物理"), Subject.CHEMISTRY: ("chemistry", "化学"),
    Subject.BIOLOGY: ("biology", "生物"), Subject.GEOGRAPHY: ("geography", "地理"),
}  # fmt: skip
# How the keywords name the kind of question; anything else is guessed from the record.
TYPE_WORDS = (("mcq", QuestionType.MULTIPLE_CHOICE), ("fill", QuestionType.FILL_IN_BLANK),
              ("blank", QuestionType.FILL_IN_BLANK))  # fmt: skip
# What each published field becomes: the published keys, then the studio's fields. The report stores these
# codes; the page words the fields in the reader's language (question_extras.mapped_row).
MAPPED = [
    ["question", ["text", "options"]], ["answer", ["answers"]], ["analysis", ["raw_solution", "solution_steps"]],
    ["year + category", ["source"]], ["picture", ["figures"]], ["keywords + index", ["hash_id"]],
]  # fmt: skip
# The release's own JSONL and the studio's are the studio's formats (docs/formats.md): only the public
# sets' mapping is worth a line in the report.
MAPPED_OF = {BENCH: MAPPED, MM: MAPPED}


def is_wrapper(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("example"), list)


def unwrapped(value: Any, member: str) -> list[bytes] | None:
    """A published set's wrapper file as one line a record (k12vista.import_files.open_source's
    ``unwrap``); None for any other JSON document."""
    return wrapper_lines(value, member) if is_wrapper(value) else None


def is_gaokao(record: dict) -> bool:
    """A GAOKAO record (wrapped or bare): ``answer``/``analysis`` where the release has ``format_answer``."""
    return WRAPPER_KEY in record or (
        "question" in record and "format_answer" not in record and ("answer" in record or "analysis" in record)
    )


def wrapper_lines(wrapper: dict, member: str = "") -> list[bytes]:
    """One JSON line per record, carrying the wrapper's keywords and where the wrapper lies."""
    context = {"keywords": wrapper.get("keywords"), "member": member}
    return [
        json.dumps({**item, WRAPPER_KEY: context} if isinstance(item, dict) else item, ensure_ascii=False).encode()
        for item in wrapper["example"]
    ]


def subject_of(*names: str) -> Subject | None:
    for name in names:
        lowered = name.lower()
        for subject, spellings in SUBJECT_NAMES.items():
            if any(re.search(rf"(?<![a-z]){re.escape(s)}(?![a-z])", lowered) for s in spellings):
                return subject
    return None


def guessed_type(keywords: str, options: list[dict], answers: list[str]) -> QuestionType:
    lowered = keywords.lower()
    for word, qtype in TYPE_WORDS:
        if word in lowered:
            return qtype
    if options and answers and all(re.fullmatch(r"[A-H]+", a.strip()) for a in answers):
        return QuestionType.MULTIPLE_CHOICE
    return QuestionType.FREE_RESPONSE


def picture_path(path: str, member: str, source: ImageSource) -> str:
    """The archive entry a published picture path names: relative to the wrapper's folder, or,
    when the archive was made from inside that folder, the entry that ends like the path."""
    wanted = path.replace("\\", "/")
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(member), wanted))
    if joined in source.members:
        return joined
    parts = [p for p in wanted.split("/") if p not in ("", ".", "..")]
    for start in range(len(parts)):
        tail = "/".join(parts[start:])
        found = [name for name in source.members if name == tail or name.endswith("/" + tail)]
        if len(found) == 1:
            return found[0]
    return wanted  # not there: read_image names it


def from_gaokao(record: dict, source: ImageSource) -> tuple[QuestionData, str, list[str]]:
    """The question, the format's name and what was guessed (``type``, ``subject_grade_tag``…)."""
    found = record.get(WRAPPER_KEY)
    context: dict = found if isinstance(found, dict) else {}
    keywords: str = context["keywords"] if isinstance(context.get("keywords"), str) else ""
    member: str = context["member"] if isinstance(context.get("member"), str) else ""
    fmt = MM if "picture" in record else BENCH
    guessed: list[str] = []
    named = string(record.get("subject"), "subject")
    subject = subject_of(named, keywords, member)
    if subject is None:
        raise RecordError("subject", reason("no_subject", format=fmt))
    if not named:
        guessed.append("subject_grade_tag")  # gaokao: the high-school stage, the grade not known
    text, options = split_options(string(record.get("question"), "question", required=True))
    answers = string_list(record.get("answer"), "answer")
    if "type" in record:
        qtype: str = question_type(record.get("type"))
    else:
        qtype = guessed_type(keywords or member, options, answers)
        guessed.append("type")
    if qtype != QuestionType.MULTIPLE_CHOICE:
        text, options = string(record.get("question"), "question"), []
    analysis = string(record.get("analysis"), "analysis")
    pictures = record.get("picture") or []
    if not isinstance(pictures, list):
        pictures = [pictures]
    found_figures = []
    for i, item in enumerate(pictures):
        name = f"picture[{i}]"
        if not isinstance(item, str):
            raise RecordError(name, reason("expected_string"))
        if source.archive is None:
            raise RecordError(name, reason("picture_needs_zip", path=item))
        found_figures.append(figure({"path": picture_path(item, member, source)}, name, source))
    year = record.get("year")
    category = string(record.get("category"), "category")
    return (
        QuestionData(
            hash_id=hash_id_of(record, keywords),
            subject=str(subject),
            grade=STAGE_LAST_GRADE[Stage.HIGH],
            grade_known=False,
            qtype=str(qtype),
            text=text,
            options=options,
            answers=answers,
            raw_solution=analysis,
            solution_steps=split_steps(analysis),
            source=f"{fmt} {year if isinstance(year, str | int) else ''}{category}".strip(),
            figures=found_figures,
        ),
        fmt,
        guessed,
    )


def hash_id_of(record: dict, keywords: str) -> str:
    """The record's own ``hash_id``, else ``<keywords>-<index>`` (stable, so re-imports match),
    else one made from the question text."""
    given = record.get("hash_id")
    if isinstance(given, str | int) and not isinstance(given, bool) and str(given).strip():
        return str(given).strip()
    index = record.get("index")
    if keywords and isinstance(index, int | str) and not isinstance(index, bool):
        return f"{keywords}-{index}"[:64]
    return "gaokao-" + hashlib.sha256(str(record.get("question")).encode()).hexdigest()[:16]
