"""Importing questions from a JSONL file, plain or zipped with its images.

The file is read one line at a time, so memory stays flat whatever its size;
every line is its own transaction, so good lines are kept when others fail.
Re-importing is idempotent: a question is looked up by ``hash_id`` and

- created when no question has that id,
- left alone ("unchanged") when the stored content hash equals the line's,
- reported as a conflict, with the fields that differ, when the content
  differs. Conflicts never overwrite: people decide on the question page.

Two record formats are read; the format is decided per line (docs/formats.md
has examples):

**Reference release** (PIPELINE.md, "The data"): a line with a ``question`` or
``format_answer`` key. ``hash_id``; ``question`` (text); ``type`` (选择题,
填空题, 问答题, or our code); ``subject`` as a release tag (``math-g9``);
``img`` (base64 JPEG, or a list of them); ``format_answer`` =
{``ground_truth``: sub-answers, ``format_solution``: a string or a list of
steps}. Optional: ``grade`` (used when it lies in the tag's stage, otherwise
the tag's last grade), ``knowledge_points``, ``difficulty``, ``source``, and
``options``, ``raw_solution``, ``solution_steps`` which, when present, win over
what is derived. Multiple-choice options embedded in the text ("A. …
B. …", also ``A、`` and ``A．``) are split out of it; a string solution with
``步骤1：`` or numbered lines is split into steps and kept whole as the raw
solution.

**Studio** (what ``export.py`` writes in its zip): any other line.
``hash_id``, ``subject`` (code), ``grade`` (1-12), ``type`` (code or Chinese),
``text``, ``options`` [{label, text}], ``answers``, ``raw_solution``,
``solution_steps``, ``knowledge_points``, ``difficulty`` (0-1 or null),
``source``, ``figures``: a list of base64 strings (a ``data:image/…`` prefix is
allowed) or ``{"path": "images/x.png"}`` naming a file in the same zip.

A zip holds one ``.jsonl`` file (``questions.jsonl`` when there are several)
and the images. Entries with absolute paths or ``..`` are refused, as are
archives whose declared size or compression ratio passes the settings'
limits; reads stop at each entry's declared size.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.files import File
from django.db import OperationalError
from django.utils.translation import gettext

from annotation.line_stream import READ_CHUNK, numbered_lines
from annotation.models import Figure, Question, SourceDocument
from annotation.public_formats import MAPPED_OF, from_gaokao, is_gaokao, is_wrapper, wrapper_lines
from annotation.record_fields import (  # noqa: F401 (the readers' home; kept importable from here)
    DATA_URI,
    FORMAT_OF_EXTENSION,
    OPTION_MARKER,
    STEP_MARKER,
    RecordError,
    check_claimed_format,
    figure,
    question_type,
    split_options,
    split_steps,
    string,
    string_list,
)
from annotation.reference_format import canonical_positions, take_placeholders
from annotation.services import (
    FigureData,
    QuestionData,
)
from k12vista import job_text
from k12vista.bulk import analyze
from k12vista.jobs import Progress, TransientJobError, job_handler, start_job
from k12vista.models import Job
from k12vista.reports import LineReport
from k12vista.vocabulary import (
    STAGE_LAST_GRADE,
    QuestionType,
    Subject,
    parse_release_tag,
    stage_of_grade,
)

# A record with a few figures is about a megabyte; a longer line is not a record,
# and reading it whole would defeat the flat memory.
MAX_LINE_BYTES = 64 * 1024 * 1024
PROGRESS_EVERY = 100
# Small entries may compress very well (a blank page, a run of spaces) and are
# harmless; the ratio limit is for entries big enough to hurt.
RATIO_CHECK_MIN_BYTES = 1024 * 1024
SNIFF_BYTES = 64 * 1024


class ImportFileError(ValueError):
    """The file as a whole cannot be imported; the message says why."""


# --- the report -----------------------------------------------------------------


@dataclass
class ImportReport(LineReport):
    key_name = "hash_id"

    formats: dict[str, int] = field(default_factory=dict)  # records read in each format, by the format's name
    guessed: dict[str, int] = field(default_factory=dict)  # records with a field guessed, by the field

    def read_as(self, fmt: str, guessed: list[str]) -> None:
        if fmt:
            self.formats[fmt] = self.formats.get(fmt, 0) + 1
        for name in guessed:
            self.guessed[name] = self.guessed.get(name, 0) + 1

    def as_dict(self) -> dict:
        return {
            **super().as_dict(), "formats": self.formats, "guessed": self.guessed,
            "mapped": {fmt: MAPPED_OF[fmt] for fmt in self.formats if fmt in MAPPED_OF},
        }  # fmt: skip

    def conflict(self, line: int, hash_id: str, fields: list[str]) -> None:
        reason = f"a question with this hash_id has different {', '.join(fields)}; it was not overwritten"
        self.conflict_at(line, hash_id, reason, fields=fields)


# --- reading the file -------------------------------------------------------------


def sniff_kind(head: bytes) -> str:
    """JSONL or zip from a file's first bytes; ImportFileError for anything else."""
    if not head:
        raise ImportFileError("The file is empty.")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return SourceDocument.Kind.ZIP
    if head.removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"{"):
        return SourceDocument.Kind.JSONL
    raise ImportFileError(
        "The file is neither JSONL (one JSON object a line) nor a zip archive holding a JSONL file and images."
    )


class BoundedReader:
    """Reads a zip entry and refuses to go past its declared size.

    The archive checks trust the declared sizes; this makes the reads keep to
    them, so a lying header cannot inflate past the limits.
    """

    def __init__(self, stream: IO[bytes], limit: int, name: str) -> None:
        self.stream, self.left, self.name = stream, limit, name

    def _count(self, data: bytes) -> bytes:
        self.left -= len(data)
        if self.left < 0:
            raise ImportFileError(f"{self.name} in the archive is larger than its header says; refusing to read it.")
        return data

    def read(self, size: int = -1) -> bytes:
        return self._count(self._damaged_is_refused(self.stream.read, size if size >= 0 else self.left + 1))

    def readline(self, size: int = -1) -> bytes:
        return self._count(self._damaged_is_refused(self.stream.readline, size))

    def _damaged_is_refused(self, read: Callable[[int], bytes], size: int) -> bytes:
        try:
            return read(size)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:  # a bad CRC, truncated data
            raise ImportFileError(f"{self.name} in the archive is damaged: {exc}") from None

    def close(self) -> None:
        self.stream.close()

    def __enter__(self) -> BoundedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> BoundedReader:
    try:
        stream = archive.open(info)
    except (RuntimeError, NotImplementedError, zipfile.BadZipFile) as exc:  # encrypted, unknown compression
        raise ImportFileError(f"{info.filename} in the archive cannot be read: {exc}") from None
    return BoundedReader(stream, info.file_size, info.filename)


def check_member_name(name: str) -> None:
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise ImportFileError(f"The archive holds {name!r}, an absolute path; refusing it.")
    if ".." in parts:
        raise ImportFileError(f"The archive holds {name!r}, which points outside the archive; refusing it.")


def check_archive(archive: zipfile.ZipFile, *, archive_size: int) -> list[zipfile.ZipInfo]:
    """Refuses unsafe archives and returns the JSONL entry to import."""
    infos = archive.infolist()
    for info in infos:
        check_member_name(info.filename)
    total = sum(info.file_size for info in infos)
    if total > settings.ZIP_MAX_UNCOMPRESSED_BYTES:
        raise ImportFileError(
            f"The archive unpacks to {total:,} bytes, over the limit of {settings.ZIP_MAX_UNCOMPRESSED_BYTES:,}."
        )
    ratio = settings.ZIP_MAX_RATIO
    for info in infos:
        if info.file_size >= RATIO_CHECK_MIN_BYTES and info.file_size > ratio * max(info.compress_size, 1):
            raise ImportFileError(
                f"{info.filename} in the archive is compressed {info.file_size // max(info.compress_size, 1)}:1, "
                f"over the limit of {ratio}:1 (a zip bomb?)."
            )
    if total >= RATIO_CHECK_MIN_BYTES and total > ratio * max(archive_size, 1):
        raise ImportFileError(f"The archive is compressed over {ratio}:1 as a whole (a zip bomb?).")
    return question_members(infos)


def question_members(infos: list[zipfile.ZipInfo]) -> list[zipfile.ZipInfo]:
    """The JSONL entry to import or, in an archive without one, the ``.json`` files of a published
    set (GAOKAO-Bench, GAOKAO-MM: one wrapper file per subject, beside their picture folders)."""
    # macOS adds "__MACOSX/._name.jsonl" resource forks beside every file it zips.
    files = [i for i in infos if not i.is_dir() and not i.filename.startswith("__MACOSX/")]
    candidates = [i for i in files if i.filename.lower().endswith(".jsonl")]
    if len(candidates) > 1:
        candidates = [i for i in candidates if i.filename.rsplit("/", 1)[-1] == "questions.jsonl"]
    if len(candidates) == 1:
        return candidates
    wrappers = [i for i in files if i.filename.lower().endswith(".json")]
    if not candidates and wrappers:
        return sorted(wrappers, key=lambda i: i.filename)
    raise ImportFileError(
        gettext(
            "The archive must hold one .jsonl file (or one named questions.jsonl), or the .json files of a "
            "published set."
        )
    )


def wrapper_lines_of(content: bytes, name: str) -> list[bytes] | None:
    """A published set's file (a wrapper, or a JSON list of records) as one line a record; None
    when the content is not one (a JSONL file, whose lines are read one by one)."""
    try:
        value = json.loads(content.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if is_wrapper(value):
        return wrapper_lines(value, name)
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return [json.dumps(item, ensure_ascii=False).encode() for item in value]
    return None


def first_line_is_record(stream: IO[bytes]) -> bool:
    """Whether a file's first non-blank line is a JSON value by itself (JSONL), not the start of one."""
    for _index in range(1000):
        line = stream.readline(MAX_LINE_BYTES + 1)
        if len(line) > MAX_LINE_BYTES:
            return True  # an overlong line: the line reader reports it
        line = line.removeprefix(b"\xef\xbb\xbf").strip()
        if line:
            try:
                value = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                return False
            return isinstance(value, dict) and not isinstance(value.get("example"), list)  # not a wrapper
    return True


@dataclass
class ImportSource:
    """An opened import file: its lines and, for a zip, the images next to them."""

    open_lines: Callable[[], Any]
    archive: zipfile.ZipFile | None = None
    members: dict[str, zipfile.ZipInfo] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # archive files that are no published set's: not read
    lock: threading.Lock = field(default_factory=threading.Lock)

    def lines(self) -> Iterator[tuple[int, bytes | None]]:
        """(line number, bytes) for every line; None for a line over MAX_LINE_BYTES."""
        with self.open_lines() as stream:
            yield from numbered_lines(stream, MAX_LINE_BYTES, chunk=READ_CHUNK)

    def count_lines(self) -> int:
        count, last = 0, b"\n"
        with self.open_lines() as stream:
            while chunk := stream.read(READ_CHUNK):
                count += chunk.count(b"\n")
                last = chunk[-1:]
        return count + (last != b"\n")

    def read_image(self, path: str, field_name: str) -> bytes:
        with self.lock:  # import threads share the archive's file handle
            return self._read_image(path, field_name)

    def _read_image(self, path: str, field_name: str) -> bytes:
        if self.archive is None:
            raise RecordError(field_name, gettext("a figure given by path needs a zip archive holding the image"))
        info = self.members.get(path.replace("\\", "/").removeprefix("./"))
        if info is None or info.is_dir():
            raise RecordError(field_name, gettext("%(path)s is not in the archive") % {"path": repr(path)})
        try:
            with open_member(self.archive, info) as stream:
                return stream.read()
        except ImportFileError as exc:  # one bad image spoils its line, not the file
            raise RecordError(field_name, str(exc)) from None


@contextmanager
def open_source(path: str | Path) -> Iterator[ImportSource]:
    with open(path, "rb") as handle:
        kind = sniff_kind(handle.read(SNIFF_BYTES))
        handle.seek(0)
        # A published set's file is one JSON document: small enough to read whole, one line a record.
        lines = None if first_line_is_record(handle) else wrapper_lines_of(_read_whole(handle), Path(path).name)
    if kind == SourceDocument.Kind.JSONL:
        if lines is not None:
            yield ImportSource(open_lines=lambda: io.BytesIO(b"\n".join(lines)))
        else:
            yield ImportSource(open_lines=lambda: open(path, "rb"))  # noqa: SIM115 (closed by lines())
        return
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ImportFileError(gettext("The zip archive cannot be read: %(error)s") % {"error": exc}) from None
    skipped: list[str] = []
    with archive:
        members = check_archive(archive, archive_size=Path(path).stat().st_size)
        if members[0].filename.lower().endswith(".jsonl"):
            open_lines: Callable[[], Any] = lambda: open_member(archive, members[0])  # noqa: E731
        else:
            read: list[bytes] = []
            for info in members:
                with open_member(archive, info) as stream:
                    found = wrapper_lines_of(stream.read(), info.filename)
                if found is None:  # a notes or metadata file beside the set's: skipped and reported
                    skipped.append(info.filename)
                else:
                    read += found
            if skipped and len(skipped) == len(members):
                raise ImportFileError(
                    gettext("%(name)s in the archive is not a published set's file (keywords and example).")
                    % {"name": ", ".join(skipped)}
                )
            open_lines = lambda: io.BytesIO(b"\n".join(read))  # noqa: E731
        yield ImportSource(
            open_lines=open_lines, archive=archive, members={info.filename: info for info in archive.infolist()},
            skipped=skipped,
        )  # fmt: skip


def _read_whole(handle: IO[bytes]) -> bytes:
    """The whole file, or nothing for one past MAX_LINE_BYTES: that is read as JSONL, line by line."""
    handle.seek(0)
    content = handle.read(MAX_LINE_BYTES + 1)
    return b"" if len(content) > MAX_LINE_BYTES else content


# --- records to QuestionData -------------------------------------------------------


def knowledge_points(value: Any) -> list[str]:
    # Stored names are stripped and unique, so the content hash must see them that way too.
    return list(dict.fromkeys(name.strip() for name in string_list(value, "knowledge_points") if name.strip()))


def difficulty(value: Any) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError("difficulty", gettext("expected a number, got %(value)s") % {"value": repr(value)})
    return float(value)  # 1 and 1.0 must hash alike


def options(value: Any) -> list[dict]:
    """[{label, text}], or a list of strings labelled A, B, C…"""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError("options", gettext("expected a list"))
    result = []
    for position, item in enumerate(value):
        if isinstance(item, str):
            item = {"label": chr(ord("A") + position), "text": item}
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("label"), str)
            or not isinstance(item.get("text"), str)
        ):
            raise RecordError("options", gettext("expected a list of {label, text} or of strings"))
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


def grade_in_stage(value: Any, tag: str) -> tuple[str, int, bool]:
    """The subject and grade of a release tag, and whether the grade is known: an explicit grade
    wins when it lies in the tag's stage, otherwise the grade is the stage's last, not known."""
    named = string(tag, "subject", required=True)  # its RecordError already names the field
    try:
        subject, stage = parse_release_tag(named)
    except ValueError as exc:
        raise RecordError("subject", str(exc)) from None
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
        raise RecordError("", gettext("missing %(fields)s") % {"fields": "、".join(f"“{name}”" for name in missing)})
    subject, grade, grade_known = grade_in_stage(record.get("grade"), record["subject"])  # required, checked above
    qtype = question_type(record.get("type"))
    answer = record.get("format_answer") or {}
    if not isinstance(answer, dict):
        raise RecordError("format_answer", "expected an object with ground_truth and format_solution")
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
        raise RecordError("subject", f"unknown subject {subject!r} (expected one of {', '.join(Subject.values)})")
    grade = record.get("grade")
    if isinstance(grade, bool) or not isinstance(grade, int) or not 1 <= grade <= 12:
        raise RecordError("grade", gettext("expected a grade 1-12, got %(value)s") % {"value": repr(grade)})
    text, positions = question_text(record.get("text"), "text")
    given_options, option_had_placeholder = options_without_placeholders(options(record.get("options")))
    stored_positions = record.get("figure_positions", [])
    if not isinstance(stored_positions, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= len(text) for p in stored_positions
    ):
        raise RecordError("figure_positions", gettext("expected a list of offsets into the text"))
    grade_known = record.get("grade_known", True)
    if not isinstance(grade_known, bool):
        raise RecordError("grade_known", gettext("expected true or false"))
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
        raise RecordError("", gettext("the line is not a JSON object"))
    if is_gaokao(record):
        return from_gaokao(record, source)
    if is_reference(record):
        data = from_reference(record, source)
        return data, REFERENCE, [] if data.grade_known else ["grade"]
    return from_studio(record, source), STUDIO, []


# --- saving -------------------------------------------------------------------------


def tally(report: ImportReport, outcome: tuple[str, int, str, Any]) -> None:
    kind, number, hash_id, detail = outcome
    if kind == "created":
        report.created += 1
    elif kind == "unchanged":
        report.unchanged += 1
    elif kind == "conflict":
        report.conflict(number, hash_id, detail)
    elif kind == "failed":
        report.fail(number, hash_id, detail)


def import_questions_file(
    *, path: str | Path, user: Any, progress: Callable[[int, int | None], None] | None = None,
    source_document: SourceDocument | None = None, workers: int = 1,
) -> ImportReport:  # fmt: skip
    """Imports every line of a JSONL or zip file; see the module docstring.

    Lines are prepared (figures, checks, KaTeX) outside any transaction, by
    ``workers`` processes for a large file, and written a batch per
    transaction (annotation.jsonl_bulk). Memory stays flat: a bounded window
    of lines is in flight.

    Raises ImportFileError when the file as a whole is unusable (not JSONL or
    zip, an unsafe archive); problems with single lines go in the report.
    """
    from annotation.jsonl_bulk import import_lines  # the bulk path builds on this module's records

    report = ImportReport()
    with open_source(path) as source:
        for name in source.skipped:  # line 0: the file, not a line of it
            report.fail(0, name, gettext("%(name)s in the archive is not a published set's file (keywords and "
                                         "example).") % {"name": name})  # fmt: skip
        total = source.count_lines()
        if progress:
            progress(0, total)
        done = 0

        def count(outcome: tuple[str, int, str, Any]) -> None:
            nonlocal done
            tally(report, outcome)
            done += 1
            if progress and done % PROGRESS_EVERY == 0:
                progress(done, total)

        created = import_lines(source, path=path, user=user, source_document=source_document, workers=workers,
                               total=total, tally=count, read_as=report.read_as)  # fmt: skip
        if progress:
            progress(total, total)
    if created:
        analyze(Question, Figure, Question.knowledge_points.through)
    return report


# --- uploads and the job --------------------------------------------------------------


class HashingFile(File):
    """Hashes and measures the bytes as storage copies them, so the file is read once."""

    def chunks(self, chunk_size: int | None = None) -> Iterator[bytes]:
        self.sha256, self.copied = hashlib.sha256(), 0
        for chunk in super().chunks(chunk_size):
            self.copied += len(chunk)
            if self.copied > settings.MAX_UPLOAD_BYTES:
                raise ImportFileError(f"The file is over the upload limit of {settings.MAX_UPLOAD_BYTES:,} bytes.")
            self.sha256.update(chunk)
            yield chunk


def register_upload(*, uploaded_file: Any = None, path: str | Path | None = None, user: Any) -> SourceDocument:
    """Stores an uploaded file (or a local one) as a SourceDocument, checking size and kind first."""
    if (uploaded_file is None) == (path is None):
        raise TypeError("pass exactly one of uploaded_file and path")
    with open(path, "rb") if path is not None else _rewound(uploaded_file) as handle:  # noqa: SIM115
        name = Path(path).name if path is not None else Path(uploaded_file.name).name
        size = Path(path).stat().st_size if path is not None else uploaded_file.size
        if size > settings.MAX_UPLOAD_BYTES:
            raise ImportFileError(
                f"The file is {size:,} bytes, over the upload limit of {settings.MAX_UPLOAD_BYTES:,}."
            )
        from annotation.uploads import check_import_file  # uploads builds on this module's archive guards

        kind = check_import_file(handle, size=size)
        content = HashingFile(handle, name=name)
        document = SourceDocument(kind=kind, original_name=name[:300], sha256="", size=0, uploaded_by=user)
        # Stored under a name of ours (SourceDocument.file's upload_to), never the uploader's.
        document.file.save(f"upload.{kind}", content, save=False)
        document.sha256, document.size = content.sha256.hexdigest(), content.copied
        document.save()
    return document


@contextmanager
def _rewound(uploaded_file: Any) -> Iterator[Any]:
    # An UploadedFile may have been read already (by a form's validation); storage must see it all.
    uploaded_file.seek(0)
    yield uploaded_file


def start_import(*, document: SourceDocument, user: Any) -> Job:
    job = start_job(
        kind="annotation.import_questions",
        user=user,
        params={"source_document_id": document.pk},
        title=job_text.title("import_file", file=document.original_name),
    )
    SourceDocument.objects.filter(pk=document.pk).update(job=job)
    document.job = job
    return job


@job_handler("annotation.import_questions", queue=Job.Queue.CPU)
def import_questions_job(job: Job, progress: Progress) -> dict:
    """Safe to run again after a crash: lines already imported come back as unchanged."""
    document = SourceDocument.objects.get(pk=job.params["source_document_id"])
    try:
        report = import_questions_file(
            path=document.file.path,
            user=job.started_by,
            progress=progress,
            source_document=document,
            workers=settings.IMPORT_WORKERS,
        )
    except ImportFileError as exc:
        SourceDocument.objects.filter(pk=document.pk).update(error=str(exc))
        raise
    except OperationalError as exc:  # a locked or restarting database: worth another try
        raise TransientJobError(str(exc)) from exc
    return report.as_dict()
