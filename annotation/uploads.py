"""What an uploaded file really is, read from its content.

The first bytes say what a file claims to be; these checks open it as that
kind, so a page of HTML that starts with ``%PDF-`` or ``{`` is refused at the
upload instead of being stored. Every upload form and API endpoint for
imports calls ``check_import_file`` (JSONL, zip) or ``annotation.pdf.importer``'s
``check_pdf`` through the services that register the upload. The file is stored under a name we choose
(``k12vista.files.stored_name``) whatever it is called.
"""

from __future__ import annotations

import codecs
import json
import re
import zipfile
from typing import IO

from django.utils.translation import gettext as _

from annotation.models import SourceDocument
from k12vista.import_files import (
    MAX_LINE_BYTES,
    SNIFF_BYTES,
    ImportFileError,
    check_archive,
    sniff_kind,
)

# Blank lines read before giving up on finding the first record.
MAX_LEADING_BLANK_LINES = 1000


def check_import_file(handle: IO[bytes], *, size: int) -> str:
    """The kind (JSONL or zip) of an import file, after reading it as that kind; ImportFileError otherwise.

    JSONL: UTF-8 text whose first non-blank line is a JSON object. Zip: an
    archive zipfile can read, passing the archive guards (names, sizes, ratio).
    The handle is rewound.
    """
    try:
        kind = sniff_kind(handle.read(SNIFF_BYTES))
        handle.seek(0)
        if kind == SourceDocument.Kind.ZIP:
            _check_zip(handle, size=size)
        else:
            _check_first_line(handle)
    finally:
        handle.seek(0)
    return kind


def _check_zip(handle: IO[bytes], *, size: int) -> None:
    if not zipfile.is_zipfile(handle):
        raise ImportFileError(_("The file starts like a zip archive but is not one."))
    handle.seek(0)
    try:
        with zipfile.ZipFile(handle) as archive:
            check_archive(archive, archive_size=size)
    except zipfile.BadZipFile as exc:
        raise ImportFileError(_("The zip archive cannot be read: %(error)s") % {"error": exc}) from None


def _check_first_line(handle: IO[bytes]) -> None:
    for _index in range(MAX_LEADING_BLANK_LINES):
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            break
        line = line.removeprefix(b"\xef\xbb\xbf").strip()
        if not line:
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise ImportFileError(_("The file is not UTF-8 text, so it is not JSONL.")) from None
        except (ValueError, RecursionError):
            if _is_published_set(handle):
                return
            raise ImportFileError(_("The first line of the file is not JSON, so the file is not JSONL.")) from None
        if not isinstance(record, dict):
            raise ImportFileError(_("The first line of the file is not a JSON object, so the file is not JSONL."))
        return
    raise ImportFileError(_("The file holds no JSON line."))


def _is_published_set(handle: IO[bytes]) -> bool:
    """A GAOKAO-Bench / GAOKAO-MM file (one JSON document, a wrapper), sniffed from its first bytes: a JSON
    object whose ``example`` list starts within them, small enough for the job to read whole. The web
    request never parses the whole file (up to the upload limit); the job does, and reports what it cannot read.
    """
    handle.seek(0, 2)
    if handle.tell() > MAX_LINE_BYTES:
        return False
    handle.seek(0)
    head = handle.read(SNIFF_BYTES).removeprefix(b"\xef\xbb\xbf")
    try:  # the head may end inside a character
        text = codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return PUBLISHED_HEAD.match(text) is not None


# A wrapper's opening: an object whose keys before ``example`` are short strings (``keywords``).
PUBLISHED_HEAD = re.compile(r'\s*\{(?:\s*"[^"]*"\s*:\s*"(?:[^"\\]|\\.)*"\s*,)*\s*"example"\s*:\s*\[')
