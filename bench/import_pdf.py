"""PDF import speed, end to end: render, extract, segment, save.

    DEBUG=1 DATA_DIR=/tmp/k12-bench .venv/bin/python -m bench.import_pdf --pages 100 --per-page 10 --scanned 3

Builds a two-column text-layer paper of ``--pages`` pages with the test fixture
builder, imports it into a fresh database (migrated on the way) and prints pages/s;
then OCRs ``--scanned`` scanned pages with the configured OCR backend and prints
seconds per page. Targets: >= 20 pages/s for text-layer papers, <= 2 s/page OCR.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def bench_text_layer(pages: int, per_page: int) -> dict:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation.models import Question
    from annotation.pdf import import_document, register_pdf_upload
    from tests import fixtures_pdf

    pdf = fixtures_pdf.exam_pages(pages, per_column=per_page // 2)
    document = register_pdf_upload(uploaded_file_or_path=SimpleUploadedFile("bench.pdf", pdf))
    started, cpu_started = time.perf_counter(), time.process_time()
    summary = import_document(document=document)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    assert Question.objects.filter(source_document=document).count() == summary.questions + summary.existing
    stages = summary.seconds
    # Pages (render, text layer, figures, page rows) plus reading order and segmentation, without
    # create_question: how fast the importer itself is, apart from the question bank's service.
    reading_seconds = stages["pages"] + stages["segment"]
    return {"pages": summary.pages, "questions": summary.questions, "figures": summary.figures,
            "seconds": round(seconds, 2), "pages_per_second": round(summary.pages / seconds, 1),
            "cpu_seconds": round(cpu, 2), "stages_seconds": stages,
            "pages_per_second_without_saving_questions": round(summary.pages / reading_seconds, 1),
            "ms_per_question_saved": round(1000 * stages["questions"] / max(1, summary.questions), 1)}  # fmt: skip


def bench_ocr(pages: int) -> dict:
    import pymupdf

    from annotation.ocr import get_ocr_backend
    from annotation.pdf import reading
    from tests import fixtures_pdf

    backend = get_ocr_backend()
    page = pymupdf.open(stream=fixtures_pdf.two_column_exam().pdf, filetype="pdf")[0]
    started = time.perf_counter()
    reading.ocr_layer(page, 1, backend)  # loading the models is paid once per worker process
    load = time.perf_counter() - started
    times = []
    cpu_started = time.process_time()
    for _ in range(pages):
        started = time.perf_counter()
        reading.ocr_layer(page, 1, backend)
        times.append(time.perf_counter() - started)
    # CPU time over all threads: on a busy machine wall time says more about the neighbours.
    cpu = (time.process_time() - cpu_started) / pages
    return {"backend": backend.name, "pages": pages, "first_call_seconds": round(load, 2),
            "seconds_per_page": round(sum(times) / len(times), 2), "best_seconds": round(min(times), 2),
            "cpu_seconds_per_page": round(cpu, 2)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--per-page", type=int, default=10, help="questions a page (two columns)")
    parser.add_argument("--scanned", type=int, default=3, help="full pages to OCR (0 to skip)")
    args = parser.parse_args(argv)
    if "DATA_DIR" not in os.environ:
        os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="k12-bench-")
    _setup_django()
    result = {"cpus": os.cpu_count(), "text_layer": bench_text_layer(args.pages, args.per_page)}
    if args.scanned:
        result["ocr"] = bench_ocr(args.scanned)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
