"""Reading an import file, for every importer (questions, PEBench, PEM-800K): the file as a whole
(JSONL, a zip holding a JSONL file and its images, or a file that is one JSON document of records),
the archive's guards (absolute paths, ``..``, declared sizes and compression ratios, reads kept to each
entry's declared size) and its lines a bounded length at a time. ``ImportFileError`` refuses a file,
``RecordError`` one of its lines; what a record means is each importer's own."""

from __future__ import annotations

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
from django.utils.translation import gettext_noop

from k12vista.line_reasons import Reason, ReasonError, as_reason, reason, reason_templates
from k12vista.line_stream import READ_CHUNK, numbered_lines

# A record with a few figures is about a megabyte; a longer line is not a record,
# and reading it whole would defeat the flat memory.
MAX_LINE_BYTES = 64 * 1024 * 1024

# Small entries may compress very well (a blank page, a run of spaces) and are
# harmless; the ratio limit is for entries big enough to hurt.
RATIO_CHECK_MIN_BYTES = 1024 * 1024
SNIFF_BYTES = 64 * 1024
# The kinds of import file (annotation's SourceDocument.Kind stores these values).
JSONL, ZIP = "jsonl", "zip"
# Makes a file's JSON document (a published set's wrapper) into one line a record, given the
# document and the file's name; None when it is no such document.
Unwrap = Callable[[Any, str], list[bytes] | None]


class ImportFileError(ReasonError):
    """The file as a whole cannot be imported; the message says why. The reason is a code
    (``self.reason``): a worker's import stores it, and each reader sees it in their language."""


# Why a file is refused, worded where it is shown (k12vista.line_reasons).
reason_templates({
    "file_empty": gettext_noop("The file is empty."),
    "file_kind": gettext_noop(
        "The file is neither JSONL (one JSON object a line) nor a zip archive holding a JSONL file and images."
    ),
    "over_upload_limit": gettext_noop("The file is %(size)s bytes, over the upload limit of %(limit)s."),
    "over_upload_limit_copying": gettext_noop("The file is over the upload limit of %(limit)s bytes."),
    "member_too_large": gettext_noop("%(name)s in the archive is larger than its header says; refusing to read it."),
    "member_damaged": gettext_noop("%(name)s in the archive is damaged: %(error)s"),
    "member_unreadable": gettext_noop("%(name)s in the archive cannot be read: %(error)s"),
    "member_absolute": gettext_noop("The archive holds %(name)s, an absolute path; refusing it."),
    "member_outside": gettext_noop("The archive holds %(name)s, which points outside the archive; refusing it."),
    "archive_too_large": gettext_noop("The archive unpacks to %(size)s bytes, over the limit of %(limit)s."),
    "member_ratio": gettext_noop(
        "%(name)s in the archive is compressed %(ratio)s:1, over the limit of %(limit)s:1 (a zip bomb?)."
    ),
    "archive_ratio": gettext_noop("The archive is compressed over %(limit)s:1 as a whole (a zip bomb?)."),
    "archive_members": gettext_noop(
        "The archive must hold one .jsonl file (or one named questions.jsonl), or the .json files of a "
        "published set."
    ),
    "zip_unreadable": gettext_noop("The zip archive cannot be read: %(error)s"),
})  # fmt: skip


class RecordError(ReasonError):
    """One line cannot be imported; the message starts with the field at fault. The reason is kept
    as a code (``self.reason``, worded where it is shown: k12vista.line_reasons)."""

    def __init__(self, field_name: str, message: str | Reason) -> None:
        # The field is the file's own key: the Chinese text quotes it (“type”：应为文本).
        said = as_reason(message)
        super().__init__(reason("field", field=field_name, message=said) if field_name else said)


def sniff_kind(head: bytes) -> str:
    """JSONL or zip from a file's first bytes; ImportFileError for anything else."""
    if not head:
        raise ImportFileError(reason("file_empty"))
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return ZIP
    if head.removeprefix(b"\xef\xbb\xbf").lstrip().startswith(b"{"):
        return JSONL
    raise ImportFileError(reason("file_kind"))


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
            raise ImportFileError(reason("member_too_large", name=self.name))
        return data

    def read(self, size: int = -1) -> bytes:
        return self._count(self._damaged_is_refused(self.stream.read, size if size >= 0 else self.left + 1))

    def readline(self, size: int = -1) -> bytes:
        return self._count(self._damaged_is_refused(self.stream.readline, size))

    def _damaged_is_refused(self, read: Callable[[int], bytes], size: int) -> bytes:
        try:
            return read(size)
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:  # a bad CRC, truncated data
            raise ImportFileError(reason("member_damaged", name=self.name, error=str(exc))) from None

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
        raise ImportFileError(reason("member_unreadable", name=info.filename, error=str(exc))) from None
    return BoundedReader(stream, info.file_size, info.filename)


def check_member_name(name: str) -> None:
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise ImportFileError(reason("member_absolute", name=repr(name)))
    if ".." in parts:
        raise ImportFileError(reason("member_outside", name=repr(name)))


def check_archive(archive: zipfile.ZipFile, *, archive_size: int) -> list[zipfile.ZipInfo]:
    """Refuses unsafe archives and returns the entries to import (question_members)."""
    infos = archive.infolist()
    for info in infos:
        check_member_name(info.filename)
    total = sum(info.file_size for info in infos)
    if total > settings.ZIP_MAX_UNCOMPRESSED_BYTES:
        raise ImportFileError(
            reason("archive_too_large", size=f"{total:,}", limit=f"{settings.ZIP_MAX_UNCOMPRESSED_BYTES:,}")
        )
    ratio = settings.ZIP_MAX_RATIO
    for info in infos:
        if info.file_size >= RATIO_CHECK_MIN_BYTES and info.file_size > ratio * max(info.compress_size, 1):
            raise ImportFileError(reason("member_ratio", name=info.filename, limit=ratio,
                                         ratio=info.file_size // max(info.compress_size, 1)))  # fmt: skip
    if total >= RATIO_CHECK_MIN_BYTES and total > ratio * max(archive_size, 1):
        raise ImportFileError(reason("archive_ratio", limit=ratio))
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
    raise ImportFileError(reason("archive_members"))


def document_lines(content: bytes, name: str, unwrap: Unwrap | None = None) -> list[bytes] | None:
    """A file that is one JSON document as one line a record: what ``unwrap`` makes of it (a
    published set's wrapper), or a JSON list of records; None when the content is not one (a JSONL
    file, whose lines are read one by one)."""
    try:
        value = json.loads(content.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if unwrap is not None and (lines := unwrap(value, name)) is not None:
        return lines
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
            raise RecordError(field_name, reason("figure_needs_zip"))
        info = self.members.get(path.replace("\\", "/").removeprefix("./"))
        if info is None or info.is_dir():
            raise RecordError(field_name, reason("not_in_archive", path=repr(path)))
        try:
            with open_member(self.archive, info) as stream:
                return stream.read()
        except ImportFileError as exc:  # one bad image spoils its line, not the file
            raise RecordError(field_name, exc.reason) from None


@contextmanager
def open_source(path: str | Path, *, unwrap: Unwrap | None = None) -> Iterator[ImportSource]:
    """Opens a JSONL file, a zip holding one, or a file of records that is one JSON document
    (``document_lines``); ImportFileError for anything else or an unsafe archive."""
    with open(path, "rb") as handle:
        kind = sniff_kind(handle.read(SNIFF_BYTES))
        handle.seek(0)
        # A published set's file is one JSON document: small enough to read whole, one line a record.
        lines = None if first_line_is_record(handle) else document_lines(_read_whole(handle), Path(path).name, unwrap)
    if kind == JSONL:
        if lines is not None:
            yield ImportSource(open_lines=lambda: io.BytesIO(b"\n".join(lines)))
        else:
            yield ImportSource(open_lines=lambda: open(path, "rb"))  # noqa: SIM115 (closed by lines())
        return
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ImportFileError(reason("zip_unreadable", error=str(exc))) from None
    skipped: list[str] = []
    with archive:
        members = check_archive(archive, archive_size=Path(path).stat().st_size)
        if members[0].filename.lower().endswith(".jsonl"):
            open_lines: Callable[[], Any] = lambda: open_member(archive, members[0])  # noqa: E731
        else:
            read: list[bytes] = []
            for info in members:
                with open_member(archive, info) as stream:
                    found = document_lines(stream.read(), info.filename, unwrap)
                if found is None:  # a notes or metadata file beside the set's: skipped and reported
                    skipped.append(info.filename)
                else:
                    read += found
            if skipped and len(skipped) == len(members):
                raise ImportFileError(reason("not_published_file", name=", ".join(skipped)))
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
