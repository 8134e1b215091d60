"""Stored files: who may read one, the names we store them under, and how they are sent.

Every file under MEDIA_ROOT belongs to an object (a figure, a page, an uploaded
source, a job), and the object's access rule decides who reads the file.
``readable_file`` is the one function that decides; the media view calls it and
nothing else serves a stored file. The apps register one rule per kind of file,
keyed by the start of the stored name, in their ``files.py`` (discovered at
start-up like ``jobs.py``), because the project package cannot import them:

    @file_rule("figures/")
    def figure(user, name) -> StoredFile | None:
        ...  # find the Figure stored under ``name``; None unless the user may see its question

A name no rule claims, or one whose object the user may not see, is a 404.
Names are always ours (``stored_name``): ids and an extension from an
allowlist, never what the uploader called the file.
"""

from __future__ import annotations

import hashlib
import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

# Our extension -> the Content-Type we send. Nothing else is ever stored or sent.
CONTENT_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "pdf": "application/pdf",
    "jsonl": "application/x-ndjson",
    "zip": "application/zip",
}
# Images the studio produced itself (re-encoded by Pillow) are the only files shown inline.
INLINE_EXTENSIONS = {"png", "jpg"}
# A browser that opens a stored file anyway runs nothing in it and loads nothing for it.
MEDIA_CSP = "sandbox; default-src 'none'"


@dataclass(frozen=True)
class StoredFile:
    """A file a user may read: its name under MEDIA_ROOT and how to send it."""

    name: str
    download_name: str = ""

    @property
    def extension(self) -> str:
        return posixpath.splitext(self.name)[1].lstrip(".").lower()

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES.get(self.extension, "application/octet-stream")

    @property
    def inline(self) -> bool:
        return self.extension in INLINE_EXTENSIONS


FileRule = Callable[[Any, str], StoredFile | None]
_rules: list[tuple[str, FileRule]] = []


def file_rule(prefix: str) -> Callable[[FileRule], FileRule]:
    """Registers a rule for stored names starting with ``prefix``; several rules may share one."""

    def register(rule: FileRule) -> FileRule:
        _rules.append((prefix, rule))
        return rule

    return register


def clean_name(name: str) -> str | None:
    """The stored name a URL path points at, or None for anything outside MEDIA_ROOT."""
    if "\\" in name or "\x00" in name:
        return None
    normal = posixpath.normpath(name)
    if normal.startswith(("/", "..")) or normal in (".", ""):
        return None
    return normal


def readable_file(user: Any, name: str) -> StoredFile | None:
    """The one decision on reading a stored file: the first rule for the name's kind that finds its
    object and lets this user see it. None (a 404) for everyone else and for names nobody owns."""
    if not (user.is_authenticated and user.is_active):
        return None
    name = clean_name(name) or ""
    for prefix, rule in _rules:
        if name.startswith(prefix) and (found := rule(user, name)) is not None:
            return found
    return None


def stored_name(folder: str, stem: str, extension: str) -> str:
    """``folder/YYYY/MM/stem-<random>.ext`` with ``ext`` from the allowlist; the uploader's name never appears.

    The random part keeps two files with the same stem apart (and unguessable).
    """
    extension = extension.lower().lstrip(".")
    if extension == "jpeg":
        extension = "jpg"
    if extension not in CONTENT_TYPES:
        raise ValueError(f"{extension!r} is not an extension the studio stores")
    today = timezone.now()
    return f"{folder}/{today:%Y/%m}/{stem}-{uuid.uuid4().hex[:12]}.{extension}"


def sha256_of(path: Path) -> str:
    """A file's SHA-256, read a megabyte at a time (exports and release files record it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(chunk)
    return digest.hexdigest()


def extension_of(filename: str) -> str:
    return Path(filename).suffix.lstrip(".").lower()


def send_file(request: HttpRequest, stored: StoredFile) -> HttpResponse:
    """Sends a file the caller was allowed to read: through the proxy in production
    (SENDFILE_BACKEND), with our type, attachment for anything but our own images, and a sandbox."""
    from django_sendfile import sendfile

    response = sendfile(
        request,
        Path(settings.MEDIA_ROOT) / stored.name,
        attachment=not stored.inline,
        attachment_filename=stored.download_name or posixpath.basename(stored.name),
        mimetype=stored.content_type,
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = MEDIA_CSP
    response["Cache-Control"] = "private, max-age=3600"
    return response
