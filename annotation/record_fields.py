"""The readers of a record's fields that the studio's import (annotation.jsonl_records) and the public
sets' formats (annotation.public_formats) share; both import them from here, neither from the other."""

from __future__ import annotations

import base64
import binascii
import io
import re
import zipfile
from typing import Any, Protocol

from PIL import Image

from annotation.models import Figure
from annotation.services import FigureData
from k12vista.import_files import RecordError
from k12vista.line_reasons import reason, reason_of
from k12vista.vocabulary import question_type_from_name


class ImageSource(Protocol):
    """Where a figure given by path is read from (k12vista.import_files.ImportSource)."""

    archive: zipfile.ZipFile | None
    members: dict[str, zipfile.ZipInfo]

    def read_image(self, path: str, field_name: str) -> bytes: ...


def string(value: Any, field_name: str, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise RecordError(field_name, reason("expected_text" if required else "expected_string"))
    return value


def string_list(value: Any, field_name: str) -> list[str]:
    """A list of strings; a lone string or number is one item, numbers become text."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str | int | float) and not isinstance(item, bool) for item in items):
        raise RecordError(field_name, reason("expected_strings"))
    return [item if isinstance(item, str) else str(item) for item in items]


def question_type(value: Any) -> str:
    try:
        return question_type_from_name(string(value, "type", required=True)).value
    except RecordError:  # names its field already
        raise
    except ValueError as exc:
        raise RecordError("type", reason_of(exc)) from None


OPTION_MARKER = re.compile(r"(?:^|(?<=[\s）)$]))([A-H])\s*[.．、]")


def split_options(text: str) -> tuple[str, list[dict]]:
    """Splits "stem A. x B. y C. z D. w" into the stem and its options.

    The block is the last run of markers A, B, C… in order, so a stray "A."
    in the stem does not start it.
    """
    markers = list(OPTION_MARKER.finditer(text))
    for start in reversed([i for i, m in enumerate(markers) if m.group(1) == "A"]):
        chain = [markers[start]]
        for marker in markers[start + 1 :]:
            if ord(marker.group(1)) == ord(chain[-1].group(1)) + 1:
                chain.append(marker)
        ends = [m.start() for m in chain[1:]] + [len(text)]
        found = [{"label": m.group(1), "text": text[m.end() : end].strip()} for m, end in zip(chain, ends, strict=True)]
        # Empty "options" are a list of points ("A、B、C、D 四点"), not options.
        if len(found) >= 2 and all(option["text"] for option in found):
            return text[: chain[0].start()].rstrip(), found
    return text, []


STEP_MARKER = re.compile(r"^\s*(?:步骤\s*\d+\s*[：:.．、]?|第\s*\d+\s*步\s*[：:.．、]?|\d+\s*[.．、)）](?!\d))\s*")


def split_steps(solution: str) -> list[str]:
    """Steps from "步骤1：…" or "1. …" lines; lines without a marker continue the step before.

    A solution without markers gives no steps: restructuring it is the
    solution-correction stage's job, not a guess here.
    """
    lines = [line for line in solution.splitlines() if line.strip()]
    if not any(STEP_MARKER.match(line) for line in lines):
        return []
    steps: list[str] = []
    for line in lines:
        marker = STEP_MARKER.match(line)
        if marker or not steps:  # a line before the first marker is a preamble step of its own
            steps.append(line[marker.end() if marker else 0 :].strip())
        else:
            steps[-1] = f"{steps[-1]}\n{line.strip()}"
    return steps


FORMAT_OF_EXTENSION = {
    "jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "gif": "GIF", "webp": "WEBP", "bmp": "BMP", "tif": "TIFF",
    "tiff": "TIFF",
}  # fmt: skip
DATA_URI = re.compile(r"^data:image/([a-z0-9.+-]+);base64,", re.IGNORECASE)


def check_claimed_format(content: bytes, claimed: str, field_name: str) -> None:
    """A figure whose name or data URI says one format must be that format."""
    try:
        actual = Image.open(io.BytesIO(content)).format
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        return  # not an image at all: create_question reports that with its own message
    if actual != claimed:
        raise RecordError(field_name, reason("claimed_format", claimed=claimed, actual=actual or "unknown"))


def figure(value: Any, field_name: str, source: ImageSource) -> FigureData:
    if isinstance(value, dict) and isinstance(value.get("path"), str):
        path = value["path"]
        extension = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
        if extension and extension not in FORMAT_OF_EXTENSION:
            raise RecordError(field_name, reason("not_image_name", path=repr(path)))
        content = source.read_image(path, field_name)
        claimed = FORMAT_OF_EXTENSION.get(extension)
    elif isinstance(value, str):
        claimed = None
        uri = DATA_URI.match(value)
        if uri:
            value = value[uri.end() :]
            claimed = FORMAT_OF_EXTENSION.get(uri.group(1).lower(), uri.group(1).upper())
        try:
            content = base64.b64decode("".join(value.split()), validate=True)
        except (binascii.Error, ValueError):
            raise RecordError(field_name, reason("not_base64")) from None
    else:
        raise RecordError(field_name, reason("expected_figure"))
    if claimed:
        check_claimed_format(content, claimed, field_name)
    return FigureData(content=content, name=field_name, origin=Figure.Origin.IMPORTED)
