"""Importing an exam PDF: the upload, the job and the import itself.

The import is written to be run again on the same document: pages already
saved are not rendered again, and questions are keyed by a hash of the
document's SHA-256, the section and the question number, so a second run
creates nothing that the first one did. A document that cannot be opened gets
its reason on ``SourceDocument.error`` before anything else is written.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from annotation import segmentation
from annotation.images import BadImage
from annotation.job_shapes import ImportPdfParams, ImportPdfResult
from annotation.models import Figure, Flag, Page, Question, SourceDocument
from annotation.ocr import OCRServiceError, OCRUnavailable, get_ocr_backend
from annotation.pdf import figures, reading, vision
from annotation.pdf.figures import FigureRegion
from annotation.pdf.layout import (
    QUESTION_START,
    Line,
    PageLayout,
    PageText,
    Span,
    group_lines,
    line_text,
    reading_order,
    union,
)
from annotation.pdf.notes import Note, english, note
from annotation.pdf.reading import PdfImportError
from annotation.pdf.segment import ParsedQuestion, Segmented, segment
from annotation.services import FigureData, QuestionData, QuestionDataError, create_question
from k12vista import job_text
from k12vista.jobs import Progress, TransientJobError, job_handler, start_job
from k12vista.lazy import lazy_module
from k12vista.line_reasons import reason
from k12vista.models import Job
from k12vista.text import storable
from k12vista.vocabulary import Subject

if TYPE_CHECKING:
    import pymupdf
else:
    pymupdf = lazy_module("pymupdf")  # loaded at the first PDF: about 130 MiB (k12vista/lazy.py)

JOB_KIND = "annotation.import_pdf"
CHUNK = 1024 * 1024
DEFAULT_SUBJECT = Subject.MATH
DEFAULT_GRADE = 9
SAVE_BATCH = 25  # questions a transaction


@dataclass
class ImportSummary:
    pages: int = 0
    questions: int = 0  # created by this run; questions already there are counted in ``existing``
    existing: int = 0
    figures: int = 0
    ocr_pages: int = 0
    # What the import is unsure of, as codes with parameters worded when shown (annotation.pdf.notes);
    # ``warnings`` holds the same in English, for logs and the command line.
    notes: list[Note] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The paper's consistency report (segment.consistency_report): numbers found, gaps, duplicates,
    # questions per section against the heading's count, text that went to no question.
    report: dict = field(default_factory=dict)
    failed: list[dict] = field(default_factory=list)  # questions that could not be saved, with the reason
    partial: list[dict] = field(default_factory=list)  # questions saved with a part left out (flagged import_error)
    # Wall time of each stage, so a slow import shows where it spent its time.
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)

    def say(self, said: Note) -> None:
        if said not in self.notes:
            self.notes.append(said)
            self.warnings.append(english(said))


# --- upload -----------------------------------------------------------------------


def _chunks(source: Any) -> Any:
    if hasattr(source, "chunks"):
        yield from source.chunks(CHUNK)
        return
    while block := source.read(CHUNK):
        yield block


@transaction.atomic
def register_pdf_upload(*, uploaded_file_or_path: Any, user: Any = None) -> SourceDocument:
    """Copies an upload (or a file on disk) into storage in chunks, hashing as it goes.

    Refuses files over MAX_UPLOAD_BYTES and files that do not start like a PDF,
    before any row is written.
    """
    if isinstance(uploaded_file_or_path, str | Path):
        with open(uploaded_file_or_path, "rb") as source:
            return _register(source, name=Path(uploaded_file_or_path).name, user=user)
    name = Path(getattr(uploaded_file_or_path, "name", "") or "upload.pdf").name
    return _register(uploaded_file_or_path, name=name, user=user)


def check_pdf(content: bytes, *, name: str) -> None:
    """Refuses what PyMuPDF cannot open as a PDF (HTML that starts with %PDF-, say). A PDF that opens
    but cannot be imported (no pages, a password) is refused by the import, on the document."""
    try:
        pymupdf.open(stream=content, filetype="pdf").close()
    except (RuntimeError, ValueError):  # pymupdf.FileDataError is a RuntimeError
        raise PdfImportError(_("%(name)s is not a PDF that can be opened.") % {"name": name}) from None


def _register(source: IO[bytes], *, name: str, user: Any) -> SourceDocument:
    digest, size, head = hashlib.sha256(), 0, b""
    with tempfile.TemporaryFile() as copy:
        for block in _chunks(source):
            size += len(block)
            if size > settings.MAX_UPLOAD_BYTES:
                raise PdfImportError(
                    _("%(name)s is larger than the limit of %(limit)d bytes.")
                    % {"name": name, "limit": settings.MAX_UPLOAD_BYTES}
                )
            head += block[: 5 - len(head)]
            digest.update(block)
            copy.write(block)
        if not head.startswith(b"%PDF-"):
            raise PdfImportError(_("%(name)s is not a PDF (it does not start with %%PDF-).") % {"name": name})
        copy.seek(0)
        check_pdf(copy.read(), name=name)
        copy.seek(0)
        uploader = user if getattr(user, "is_authenticated", False) else None
        document = SourceDocument(kind=SourceDocument.Kind.PDF, original_name=name[:300], sha256=digest.hexdigest(),
                                  size=size, uploaded_by=uploader)  # fmt: skip
        # Stored under a name of ours (SourceDocument.file's upload_to), never the uploader's.
        document.file.save(f"upload.{SourceDocument.Kind.PDF}", File(copy), save=False)
        document.save()
    return document


def start_pdf_import(*, document: SourceDocument, user: Any, subject: str = DEFAULT_SUBJECT,
                     grade: int = DEFAULT_GRADE, reader: str = vision.DEFAULT_READER) -> Job:  # fmt: skip
    """``reader``: which pages a vision model reads (annotation.pdf.vision): "unsure", "vision" (all) or
    "rules" (none). Choosing "vision" where no backend is configured is refused here, before the job."""
    if reader not in vision.READERS:
        raise PdfImportError(_("Unknown reader %(reader)r.") % {"reader": reader})
    if reader == "vision":
        try:
            configured = vision.get_segmentation_backend() is not None
        except vision.VisionUnavailable:
            configured = False
        if not configured:
            raise PdfImportError(_("No vision model is set up to read pages (SEGMENTATION_BACKEND)."))
    if subject not in Subject.values:
        raise PdfImportError(_("Unknown subject %(subject)r.") % {"subject": subject})
    if not 1 <= int(grade) <= 12:
        raise PdfImportError(_("Grade must be 1-12, not %(grade)r.") % {"grade": grade})
    params = {"source_document_id": document.pk, "subject": subject, "grade": int(grade), "reader": reader}
    job = start_job(
        kind=JOB_KIND, user=user, params=params, title=job_text.title("import_file", file=document.original_name)
    )
    SourceDocument.objects.filter(pk=document.pk).update(job=job)
    return job


def retry_pdf_import(*, document: SourceDocument, user: Any) -> Job:
    """Starts the import of a document again with the subject and grade of its last run. The new run
    reuses the pages already read (and OCR'd) and skips the questions already saved."""
    if document.job is not None and not document.job.is_finished:
        raise PdfImportError(_("This import is still running."))
    params = document.job.params if document.job is not None else {}
    return start_pdf_import(document=document, user=user, subject=params.get("subject", DEFAULT_SUBJECT),
                            grade=int(params.get("grade", DEFAULT_GRADE)),
                            reader=params.get("reader", vision.DEFAULT_READER))  # fmt: skip


@job_handler(JOB_KIND, queue=Job.Queue.CPU, params=ImportPdfParams, result=ImportPdfResult)
def import_pdf_job(job: Job, progress: Progress) -> dict:
    document = SourceDocument.objects.get(pk=job.params["source_document_id"])
    try:
        summary = import_document(document=document, subject=job.params.get("subject", DEFAULT_SUBJECT),
                                  grade=int(job.params.get("grade", DEFAULT_GRADE)), progress=progress,
                                  reader=job.params.get("reader", vision.DEFAULT_READER))  # fmt: skip
    except OCRServiceError as exc:
        raise TransientJobError(str(exc)) from exc
    return summary.as_dict()


# --- import -----------------------------------------------------------------------


def _read_document(document: SourceDocument) -> pymupdf.Document:
    try:
        path = document.file.path
    except NotImplementedError:  # a storage without local files (S3 and the like): read it through the API
        with document.file.open("rb") as stored:
            return reading.open_pdf(stored.read())
    return reading.open_pdf(path)


def import_document(*, document: SourceDocument, subject: str = DEFAULT_SUBJECT, grade: int = DEFAULT_GRADE,
                    progress: Callable[[int, int], None] | None = None, user: Any = None,
                    reader: str = vision.DEFAULT_READER) -> ImportSummary:  # fmt: skip
    """Imports one PDF: pages, then questions with their figures. Safe to run again.

    A refusal (PdfImportError) is recorded on the document before it is raised.
    """
    try:
        summary = _import(document=document, subject=subject, grade=grade, user=user, reader=reader,
                          report=progress or (lambda done, total: None))  # fmt: skip
    except PdfImportError as exc:
        document.record_error(exc.reason)  # the job fails with the same code (k12vista.jobs)
        raise
    except OCRServiceError:
        raise  # retried by the job
    except Exception as exc:
        # A crash: the document says why, worded for its reader from the note kept on the report (the
        # English copy in ``error``); a retry continues it (pages and questions saved are reused).
        document.import_report = (
            SourceDocument.objects.filter(pk=document.pk).values_list("import_report", flat=True).first()
        )
        document.record_error(note("import_stopped", error=f"{type(exc).__name__}: {exc}"[:1000]))
        raise
    SourceDocument.objects.filter(pk=document.pk).update(page_count=summary.pages, error="",
                                                         import_report=summary.as_dict())  # fmt: skip
    document.import_report = summary.as_dict()
    return summary


def _import(*, document: SourceDocument, subject: str, grade: int, user: Any, reader: str,
            report: Callable[[int, int], None]) -> ImportSummary:  # fmt: skip
    with _read_document(document) as pdf:
        summary = ImportSummary(pages=pdf.page_count)
        steps = summary.pages + 1  # one step per page, and a last one for saving the questions
        with _timed(summary, "pages"):
            pages = _import_pages(document=document, pdf=pdf, summary=summary, progress=lambda n: report(n, steps))
        with _timed(summary, "segment"):
            analysis = analyse([p.text for p in pages], [r for p in pages for r in p.regions])
        with _timed(summary, "vision"):
            analysis = _read_by_vision(analysis, pages, reader, heartbeat=lambda: report(summary.pages, steps))
        summary.report = analysis.parsed.report
        for said in analysis.parsed.notes:
            summary.say(said)
        # Kept on the document before any question is saved: a crash while saving leaves the report.
        SourceDocument.objects.filter(pk=document.pk).update(import_report=summary.as_dict())
        with _timed(summary, "questions"):
            _save_questions(document=document, pdf=pdf, pages=pages, analysis=analysis, subject=subject,
                            grade=grade, summary=summary, user=user,
                            heartbeat=lambda: report(summary.pages, steps))  # fmt: skip
    report(steps, steps)
    return summary


@contextmanager
def _timed(summary: ImportSummary, stage: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    summary.seconds[stage] = round(time.perf_counter() - started, 3)


@dataclass
class ImportedPage:
    row: Page
    text: PageText
    regions: list[figures.FigureRegion]


def _import_pages(*, document: SourceDocument, pdf: pymupdf.Document, summary: ImportSummary,
                  progress: Callable[[int], None]) -> list[ImportedPage]:  # fmt: skip
    saved = {page.number: page for page in document.pages.all()}
    imported = []
    for index, page in enumerate(pdf.pages()):
        number = index + 1
        try:
            imported.append(_import_page(document=document, page=page, number=number, row=saved.get(number),
                                         summary=summary))  # fmt: skip
        except OCRServiceError:
            raise  # worth retrying: the job handler turns it into a TransientJobError
        except OCRUnavailable as exc:
            raise PdfImportError(reason("pdf_needs_ocr", n=number, error=str(exc))) from exc
        except (RuntimeError, ValueError, ArithmeticError, IndexError, TypeError) as exc:
            # MuPDF raises RuntimeError subclasses for broken page content. One page that cannot be read
            # is said, and the rest of the paper goes on.
            summary.say(note("page_unreadable", page=number, error=f"{type(exc).__name__}: {exc}"[:300]))
        progress(number)
    return imported


def read_page(page: pymupdf.Page, number: int) -> tuple[PageText, str, list[figures.FigureRegion]]:
    """A page's text (its text layer, or OCR where it has none), its source and its figure regions."""
    page_text = reading.text_layer(page, number)
    source = "text-layer"
    if not reading.has_usable_text(page_text) and reading.has_unread_ink(page):
        backend = get_ocr_backend()
        page_text, source = reading.ocr_layer(page, number, backend), backend.name
    regions = figures.read_formulas(page, figures.figure_regions(page, page_text))
    return figures.with_formulas(_without_figure_text(page_text, regions), regions), source, regions


@dataclass
class Analysis:
    """What the importer reads from a paper before anything is saved."""

    parsed: Segmented
    layouts: dict[int, PageLayout]
    # FigureRegion by its own name: in this class body "figures" is the field, not the module.
    figures: dict[int, list[FigureRegion]]  # by index into parsed.questions
    formulas: dict[str, FigureRegion] = field(default_factory=dict)  # formula images by placeholder
    regions: list[FigureRegion] = field(default_factory=list)  # every figure region, as read


def analyse(texts: list[PageText], regions: list[figures.FigureRegion]) -> Analysis:
    """Reading order, questions and each question's figures: the import without the database."""
    problems: list[tuple[int, str]] = []
    lines, layouts = reading_order(texts, problems)
    parsed = segment(lines)
    for page, error in problems:
        said = note("page_layout", page=page, error=error[:300])
        parsed.report.setdefault("notes", []).insert(0, said)
        parsed.report.setdefault("warnings", []).insert(0, english(said))
        parsed.warnings.insert(0, english(said))
    formulas = {r.token: r for r in regions if r.is_formula}
    return Analysis(parsed, layouts, _figures_of(parsed, layouts, regions), formulas, regions)


def _figures_of(parsed: Segmented, layouts: dict[int, PageLayout],
                regions: list[figures.FigureRegion]) -> dict[int, list[figures.FigureRegion]]:  # fmt: skip
    keyed = [(_figure_key(layouts[r.page], r.bbox), r) for r in regions if not r.is_formula and r.page in layouts]
    return assign_figures(parsed.questions, keyed, parsed.answers_key)


def _read_by_vision(analysis: Analysis, pages: list[ImportedPage], reader: str,
                    heartbeat: Callable[[], None] = lambda: None) -> Analysis:  # fmt: skip
    """The pages the reader asks for read again by the vision model, where one is set up
    (annotation.pdf.vision); its questions replace the rules' on those pages, with figures assigned anew."""
    if reader == "rules":
        return analysis
    problem: vision.VisionUnavailable | None = None
    try:
        backend = vision.get_segmentation_backend()
    except vision.VisionUnavailable as exc:
        backend, problem = None, exc
    numbers = [p.row.number for p in pages]
    chosen = numbers if reader == "vision" else vision.unsure_pages(analysis.parsed, numbers)
    if not chosen:
        return analysis
    if backend is None:
        if not problem and reader == "unsure":
            return analysis  # no lab model: the rules' reading, whose report already says what is unsure
        said = [(vision.unavailable_note(problem), chosen[0])]
        parsed = vision.merge(analysis.parsed, [], analysis.layouts, said)
        return replace(analysis, parsed=parsed)
    inputs = []
    for page in pages:
        if page.row.number in chosen:
            with page.row.image.open("rb") as image:
                png = image.read()
            text = "" if page.text.ocr else reading.page_text_lines(page.text)
            inputs.append((page.row.number, png, text, page.row.width_pt, page.row.height_pt))
    readings, said = vision.read_pages(backend, inputs, heartbeat=heartbeat)
    parsed = vision.merge(analysis.parsed, readings, analysis.layouts, said)
    return replace(analysis, parsed=parsed, figures=_figures_of(parsed, analysis.layouts, analysis.regions))


def _import_page(*, document: SourceDocument, page: pymupdf.Page, number: int, row: Page | None,
                 summary: ImportSummary) -> ImportedPage:  # fmt: skip
    if row is not None and row.text_source != "text-layer" and row.ocr_lines:
        # OCR'd by an earlier run of this import (one that crashed later): read, not redone.
        summary.ocr_pages += 1
        page_text = _stored_ocr(row, page, number)
        regions = figures.read_formulas(page, figures.figure_regions(page, page_text))
        return ImportedPage(row, figures.with_formulas(_without_figure_text(page_text, regions), regions), regions)
    page_text, source, regions = read_page(page, number)
    if source != "text-layer":
        summary.ocr_pages += 1
    row = row or _save_page(document=document, page=page, number=number, text=page_text, source=source)
    return ImportedPage(row, page_text, regions)


def _stored_ocr(row: Page, page: pymupdf.Page, number: int) -> PageText:
    lines = row.ocr_lines
    spans = [Span(text, tuple(box), baseline, size) for text, box, baseline, size in lines[0]["spans"]]
    gutters = lines[0].get("gutters")
    return PageText(number, page.rect.width, page.rect.height, spans, ocr=True, gutters=gutters)


def _without_figure_text(page_text: PageText, regions: list[figures.FigureRegion]) -> PageText:
    """Labels inside a figure are part of the figure, not of the question text.

    Two kinds of text inside a figure's box stay text: a line that goes on
    outside every figure (a figure box drawn a little too tall reaches over the
    stem line above it) or starts a question, and option letters set one under
    each of a row of pictures ("A", "B", "C", "D"): they are the question's options.
    """
    regions = [r for r in regions if not r.is_formula]  # a formula image is text, in its line
    if not regions:
        return page_text

    def region_of(box: tuple) -> int:
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        for i, r in enumerate(regions):
            if r.bbox[0] <= cx <= r.bbox[2] and r.bbox[1] <= cy <= r.bbox[3]:
                return i
        return -1

    where = [region_of(s.bbox) for s in page_text.spans]
    if all(w < 0 for w in where):
        return page_text
    keep = [w < 0 for w in where]
    index_of = {id(s): i for i, s in enumerate(page_text.spans)}
    for line in group_lines(page_text.spans):
        for run in _runs(line):
            indexes = [index_of[id(s)] for s in run]
            inside = [i for i in indexes if where[i] >= 0]
            if not inside:
                continue
            if len(inside) < len(indexes) or QUESTION_START.match(line_text(run)):
                for i in inside:
                    keep[i] = True
        if _picture_letters(line, [where[index_of[id(s)]] for s in line]):
            for s in line:
                keep[index_of[id(s)]] = True
    spans = [s for s, kept in zip(page_text.spans, keep, strict=True) if kept]
    return PageText(page_text.number, page_text.width, page_text.height, spans, page_text.ocr, page_text.gutters)


def _runs(line: list[Span]) -> list[list[Span]]:
    """A line cut where runs stand apart (more than a character and a half): a column, a figure's label."""
    runs: list[list[Span]] = []
    for span in line:
        if runs and span.bbox[0] - runs[-1][-1].bbox[2] < 1.5 * max(span.size, runs[-1][-1].size):
            runs[-1].append(span)
        else:
            runs.append([span])
    return runs


def _picture_letters(line: list[Span], regions_of: list[int]) -> bool:
    """A row of single letters A, B, C… each in its own figure: the labels of picture options."""
    letters = [s.text.strip().strip("()（）.．") for s in line]
    if len(line) < 2 or any(len(letter) != 1 for letter in letters):
        return False
    in_order = all(ord(b) - ord(a) == 1 for a, b in zip(letters, letters[1:], strict=False))
    return in_order and letters[0] in "AC" and len(set(regions_of)) == len(line) and min(regions_of) >= 0


def _save_page(*, document: SourceDocument, page: pymupdf.Page, number: int, text: PageText, source: str) -> Page:
    row = Page(document=document, number=number, width_pt=page.rect.width, height_pt=page.rect.height,
               text=reading.page_text_lines(text), text_source=source)  # fmt: skip
    if text.ocr:
        spans = [[s.text, [round(v, 2) for v in s.bbox], round(s.baseline, 2), round(s.size, 2)] for s in text.spans]
        row.ocr_lines = [{"spans": spans, "gutters": text.gutters}]
    png = reading.render_png(page)
    row.image.save(f"doc{document.pk}-p{number}.png", ContentFile(png), save=False)
    row.width, row.height = reading.png_size(png)
    row.save()
    return row


# --- questions ----------------------------------------------------------------------


def question_hash(document: SourceDocument, question: ParsedQuestion) -> str:
    return hashlib.sha256(f"pdf:{document.sha256}:{question.section}:{question.number}".encode()).hexdigest()


def _figure_key(layout: PageLayout, box: tuple) -> tuple:
    """Where a figure falls in reading order: by its middle, so a figure beside a question's first line counts."""
    middle = (box[1] + box[3]) / 2
    page, band, column, _ = layout.key_of((box[0], middle, box[2], middle))
    return (page, band, column, middle)


def assign_figures(parsed: list[ParsedQuestion], regions: list[tuple[tuple, figures.FigureRegion]],
                   answers_key: tuple | None) -> dict[int, list[figures.FigureRegion]]:  # fmt: skip
    """Each figure goes to the question its caption names (第5题图) or the one question whose text refers
    to its label (如图1所示 for 图1), else to the question being read where it stands; none in the answer
    section."""
    starts = [(q.lines[0].key, i) for i, q in enumerate(parsed) if q.lines]  # in reading order already
    start_keys = [key for key, _ in starts]
    assigned: dict[int, list[figures.FigureRegion]] = {}
    for key, region in sorted(regions, key=lambda item: item[0]):
        if answers_key is not None and key >= answers_key:
            continue
        at = bisect.bisect_right(start_keys, key)
        named = _named_by_caption(parsed, region)
        if named is not None:
            assigned.setdefault(named, []).append(region)
        elif at:
            assigned.setdefault(starts[at - 1][1], []).append(region)
    return assigned


QUESTION_FIGURE = re.compile(r"^第\s*(\d{1,3})\s*(?:小)?题\s*图")
FIGURE_LABEL = re.compile(r"^图\s*([0-9０-９]+(?:\s*[-－]\s*[0-9]+)?|[一二三四五六七八九十甲乙丙丁])")


def _named_by_caption(parsed: list[ParsedQuestion], region: figures.FigureRegion) -> int | None:
    """The question a figure's caption links it to, or None: a caption that names no question, or a label
    that no question or several refer to (a paper that calls each question's figure 图1)."""
    near = [i for i, q in enumerate(parsed) if q.lines and any(abs(ln.page - region.page) <= 1 for ln in q.lines)]
    if found := QUESTION_FIGURE.match(region.caption):
        numbered = [i for i in near if parsed[i].number == int(found.group(1)) and not parsed[i].name]
        return numbered[0] if len(numbered) == 1 else None
    if found := FIGURE_LABEL.match(region.caption):
        label = re.sub(r"\s", "", found.group(1))
        refers = re.compile(rf"图\s*{re.escape(label)}(?![0-9０-９])")
        referring = [i for i in near if refers.search(parsed[i].text)]
        return referring[0] if len(referring) == 1 else None
    return None


def question_boxes(lines: list[Line], regions: list[figures.FigureRegion]) -> list[list[float]]:
    """[page, x0, y0, x1, y1] for each run of the question's lines in one column, and for each figure."""
    runs: list[tuple[tuple, list[Line]]] = []
    for line in lines:
        where = line.key[:3]  # page, band, column
        if runs and runs[-1][0] == where:
            runs[-1][1].append(line)
        else:
            runs.append((where, [line]))
    boxes = [[run[0].page, *union([line.bbox for line in run])] for _, run in runs]
    boxes += [[r.page, *r.bbox] for r in regions if not r.is_formula]
    return [[box[0]] + [round(v, 2) for v in box[1:]] for box in boxes]


def _first_page_box(lines: list[Line], regions: list[figures.FigureRegion]) -> tuple[int, list[float]]:
    page = lines[0].page
    boxes = [line.bbox for line in lines if line.page == page] + [r.bbox for r in regions if r.page == page]
    return page, [round(v, 2) for v in union(boxes)]


def _save_questions(*, document: SourceDocument, pdf: pymupdf.Document, pages: list[ImportedPage],
                    analysis: Analysis, subject: str, grade: int, summary: ImportSummary, user: Any,
                    heartbeat: Callable[[], None]) -> None:  # fmt: skip
    """Creates the questions not saved yet, SAVE_BATCH to a transaction.

    One transaction for the whole paper would hold SQLite's write lock for
    minutes on a long paper and hide the job's heartbeat (it beats between
    batches); one per question spends most of its time committing. A crash
    keeps the batches saved so far, and the next run skips them by hash_id.
    """
    parsed, by_question = analysis.parsed.questions, analysis.figures
    reasons = analysis.parsed.report.get("reasons", {})
    rows = {p.row.number: p.row for p in pages}
    hashes = {question_hash(document, q) for q in parsed if q.lines}
    existing = set(Question.objects.filter(hash_id__in=hashes).values_list("hash_id", flat=True))
    summary.existing = len(existing)
    todo = [(i, q) for i, q in enumerate(parsed) if q.lines and question_hash(document, q) not in existing]
    # A question read where a person repaired the cut (annotation.segmentation) is theirs: not read again.
    repaired = segmentation.repaired_boxes(document)
    for _i, q in todo:
        if segmentation.covered(q.lines, repaired):
            summary.say(note("repaired_region", label=q.label))
    todo = [(i, q) for i, q in todo if not segmentation.covered(q.lines, repaired)]
    for start in range(0, len(todo), SAVE_BATCH):
        with transaction.atomic():
            for index, question in todo[start : start + SAVE_BATCH]:
                _save_question(document=document, pdf=pdf, rows=rows, question=question, subject=subject,
                               grade=grade, found=by_question.get(index, []), summary=summary, user=user,
                               reasons=reasons.get(question.label, []), formulas=analysis.formulas)  # fmt: skip
        heartbeat()


# A fault in one question's content (UnicodeEncodeError from a cut surrogate pair is a ValueError, a
# figure that is no image a BadImage). A crash of the process or the database (DatabaseError, OSError)
# is none of these: it stops the import, which a retry continues.
QUESTION_FAULTS = (QuestionDataError, BadImage, ValueError, TypeError, KeyError, IndexError, AttributeError)


def _save_question(*, document: SourceDocument, pdf: pymupdf.Document, rows: dict[int, Page],
                   question: ParsedQuestion, subject: str, grade: int, found: list[figures.FigureRegion],
                   summary: ImportSummary, user: Any, reasons: list[Note],
                   formulas: dict[str, figures.FigureRegion]) -> None:  # fmt: skip
    """Saves one question. What fails in it is recorded on it (an ``import_error`` flag) and the paper
    goes on: a figure that cannot be cropped is left out; a question refused as read is saved again
    with its text made storable and without figures. Only a question refused twice is left out, and
    the document's report names it."""
    hash_id = question_hash(document, question)
    page_number, bbox = _first_page_box(question.lines, found)
    problems: list[Note] = []
    crops: list[FigureData] = []
    for region in found:
        try:
            crops.append(_figure_data(pdf, rows, region, hash_id, len(crops)))
        except (RuntimeError, ValueError) as exc:  # MuPDF cannot render this part of the page
            problems.append(note("figure_uncropped", page=region.page, error=f"{type(exc).__name__}: {exc}"))
    # Formula images stand in the text as [[formula:N]], N their place after the question's figures; an
    # answer key's entry can be one too (a fraction or a vector set as a picture), so answers go through it.
    answers = [str(a) for a in question.answers]
    texts, inline = figures.placeholders(
        [question.text, question.solution, *answers, *(o["text"] for o in question.options)], formulas, first=len(crops)
    )
    answers = texts[2 : 2 + len(answers)]
    options = [{**o, "text": t} for o, t in zip(question.options, texts[2 + len(answers) :], strict=True)]
    for region in inline:
        try:
            crops.append(_figure_data(pdf, rows, region, hash_id, len(crops)))
        except (RuntimeError, ValueError) as exc:
            problems.append(note("formula_uncropped", page=region.page, error=str(exc)))
    data = QuestionData(
        hash_id=hash_id, subject=subject, grade=grade, qtype=question.qtype, text=texts[0],
        options=options, answers=answers, raw_solution=texts[1],
        source=document.original_name, source_document=document, source_page=rows[page_number], bbox=bbox,
        boxes=question_boxes(question.lines, found),
        figures=crops,
    )  # fmt: skip
    history = f"imported from {document.original_name}"[:300]
    # create_question is atomic itself: a refused question rolls back to its own savepoint only.
    try:
        saved = create_question(data=data, user=user, note=history)
    except IntegrityError:
        summary.existing += 1  # another import of the same paper saved it first
        return
    except QUESTION_FAULTS as exc:
        reason = _fault(exc)
        try:
            saved = create_question(data=_storable(data), user=user, note=history)
        except IntegrityError:
            summary.existing += 1
            return
        except QUESTION_FAULTS as again:
            both = reason if _fault(again) == reason else f"{reason}; then {_fault(again)}"
            summary.say(note("question_failed", label=question.label, reason=both))
            summary.failed.append({"question": question.label, "reason": reason})
            return
        problems.append(note("question_cleaned", label=question.label, reason=reason))
        summary.say(problems[-1])
        crops = []
    if problems:
        _flag(saved, Flag.Code.IMPORT_ERROR, problems)
        summary.partial.append({"question": question.label, "problems": [english(p) for p in problems],
                                "notes": problems})  # fmt: skip
    if reasons:
        _flag(saved, Flag.Code.IMPORT_GAP, reasons)
    # How it was cut (its number, its parts' regions), for the segmentation screen.
    segmentation.record_import(question=saved, document=document, label=question.label, lines=question.lines)
    summary.questions += 1
    summary.figures += sum(1 for crop in crops if crop.kind == Figure.Kind.FIGURE)


def _flag(question: Question, code: str, notes: list[Note]) -> None:
    """A flag whose notes are worded for each reader (annotation.pdf.notes); its message is the English copy."""
    Flag.objects.create(question=question, code=code, message=storable("; ".join(english(n) for n in notes)),
                        detail={"report": "pdf import", "notes": notes})  # fmt: skip


def _fault(exc: Exception) -> str:
    return str(exc) if isinstance(exc, QuestionDataError | BadImage) else f"{type(exc).__name__}: {exc}"


def _storable(data: QuestionData) -> QuestionData:
    """The question as read, each text made storable (no NUL, no lone surrogate), without figures."""
    return replace(
        data,
        text=storable(data.text),
        options=[
            {"label": storable(str(o.get("label", ""))), "text": storable(str(o.get("text", "")))} for o in data.options
        ],  # fmt: skip
        answers=[storable(str(a)) for a in data.answers],
        raw_solution=storable(data.raw_solution),
        figures=[],
    )


def _figure_data(pdf: pymupdf.Document, rows: dict[int, Page], region: figures.FigureRegion, hash_id: str,
                 position: int) -> FigureData:  # fmt: skip
    cut = figures.crop_region(pdf[region.page - 1], region)
    origin = Figure.Origin.DRAWING if region.origin == "drawing" else Figure.Origin.EMBEDDED
    kind = Figure.Kind.FORMULA if region.is_formula else Figure.Kind.FIGURE
    return FigureData(content=cut.content, name=f"{hash_id[:12]}-{position}.bmp", origin=origin,
                      page=rows[region.page], bbox=[round(v, 2) for v in region.bbox], kind=kind,
                      source_size=cut.source_size, source_sharpness=cut.source_sharpness)  # fmt: skip
