"""PDF import of exam papers: ``register_pdf_upload`` stores the file,
``start_pdf_import`` runs ``import_document`` as a job.

reading (open, render, text layer, OCR) -> layout (columns, running text,
reading order, exponents) -> segment (questions, options, answers) ->
figures (crops) -> importer (rows).
"""

from annotation.pdf.importer import (
    ImportSummary,
    import_document,
    import_pdf_job,
    register_pdf_upload,
    retry_pdf_import,
    start_pdf_import,
)
from annotation.pdf.reading import PdfImportError

__all__ = [
    "ImportSummary",
    "PdfImportError",
    "import_document",
    "import_pdf_job",
    "register_pdf_upload",
    "retry_pdf_import",
    "start_pdf_import",
]
