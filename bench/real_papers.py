"""How well the PDF importer reads real exam papers: a score against a folder's expected.json.

    DEBUG=1 .venv/bin/python -m bench.real_papers [FOLDER] [--only NAME] [--json]

FOLDER is laid out like ``../shared/realdata/exams/`` (the default): PDFs and an
``expected.json`` listing, for every file, the questions a person reads in it
(see that folder's README). Each paper goes through the importer's own code
path (``importer.read_page`` for every page, ``importer.analyse`` for reading
order, segmentation and figure placement, the page render and figure crops the
import stores) without the database, and is scored:

- question numbers: precision and recall of the importer's question labels
  against the expected ones in order (``number`` or, where numbering restarts
  per section, ``label``); on a negative control every question is a false
  positive;
- on the matched questions: type, option count (choice questions), whether a
  solution was routed to the question (``has_solution``), figures within +-1;
- seconds per page, text-layer pages and OCR pages apart.

The table is printed per paper and in total; ``--json`` prints the numbers instead.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


def default_folder() -> Path:
    """``../shared/realdata/exams`` beside the clone, or beside a folder above it (a worktree's)."""
    for above in Path(__file__).resolve().parents[1].parents:
        if (above / "shared" / "realdata" / "exams" / "expected.json").exists():
            return above / "shared" / "realdata" / "exams"
    return Path(__file__).resolve().parents[1].parent / "shared" / "realdata" / "exams"


TYPES = {"选择题": "multiple_choice", "填空题": "fill_in_blank", "解答题": "free_response"}


@dataclass
class PaperScore:
    file: str
    pages: int = 0
    expected: int = 0
    found: int = 0
    matched: int = 0
    type_ok: int = 0
    options_total: int = 0
    options_ok: int = 0
    solution_ok: int = 0
    figures_ok: int = 0
    text_pages: int = 0
    text_seconds: float = 0.0
    text_cpu_seconds: float = 0.0
    ocr_pages: int = 0
    ocr_seconds: float = 0.0
    ocr_cpu_seconds: float = 0.0  # CPU time of this process (all threads): on a shared machine wall time says less
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)  # each matched question that differs, and how
    error: str = ""

    @property
    def precision(self) -> float:
        return self.matched / self.found if self.found else (1.0 if not self.expected else 0.0)

    @property
    def recall(self) -> float:
        return self.matched / self.expected if self.expected else 1.0

    def share(self, ok: int, total: int | None = None) -> float | None:
        total = self.matched if total is None else total
        return ok / total if total else None


def expected_key(question: dict) -> str:
    return str(question.get("label") or question["number"])


def score_paper(path: Path, expected: dict) -> PaperScore:
    from annotation.pdf import figures, importer, reading

    score = PaperScore(path.name, expected=len(expected["questions"]))
    try:
        pdf = reading.open_pdf(path)
    except reading.PdfImportError as exc:
        score.error = str(exc)
        return score
    with pdf:
        score.pages = pdf.page_count
        texts, regions, sources = [], [], []
        for index, page in enumerate(pdf):
            started, cpu = time.perf_counter(), time.process_time()
            text, source, found = importer.read_page(page, index + 1)
            reading.render_png(page)  # the page image the import stores
            seconds = time.perf_counter() - started
            texts.append(text)
            regions += found
            sources.append(source)
            if source == "text-layer":
                score.text_pages, score.text_seconds = score.text_pages + 1, score.text_seconds + seconds
                score.text_cpu_seconds += time.process_time() - cpu
            else:
                score.ocr_pages, score.ocr_seconds = score.ocr_pages + 1, score.ocr_seconds + seconds
                score.ocr_cpu_seconds += time.process_time() - cpu
        started = time.perf_counter()
        analysis = importer.analyse(texts, regions)
        for regions_of in analysis.figures.values():
            for region in regions_of:
                figures.crop(pdf[region.page - 1], region.bbox)
        # Reading order, segmentation and crops are shared out over the pages by their reading time.
        _share_out(score, time.perf_counter() - started)
    parsed = [q for q in analysis.parsed.questions if q.lines]
    score.found = len(parsed)
    score.warnings = list(analysis.parsed.warnings) + list(analysis.parsed.report.get("warnings", []))
    _compare(score, expected["questions"], parsed, analysis.figures, analysis.parsed.questions)
    return score


def _share_out(score: PaperScore, seconds: float) -> None:
    total = score.text_seconds + score.ocr_seconds or 1.0
    text_share = score.text_seconds / total
    score.text_seconds += seconds * text_share
    score.ocr_seconds += seconds * (1 - text_share)


def _compare(score: PaperScore, expected: list[dict], parsed: list, figures_of: dict, all_parsed: list) -> None:
    want = [expected_key(q) for q in expected]
    got = [q.label for q in parsed]
    matcher = difflib.SequenceMatcher(a=want, b=got, autojunk=False)
    pairs = [(block.a + k, block.b + k) for block in matcher.get_matching_blocks() for k in range(block.size)]
    score.matched = len(pairs)
    seen_want = {a for a, _ in pairs}
    seen_got = {b for _, b in pairs}
    score.missing = [want[i] for i in range(len(want)) if i not in seen_want]
    score.extra = [got[i] for i in range(len(got)) if i not in seen_got]
    index_of = {id(q): i for i, q in enumerate(all_parsed)}
    for a, b in pairs:
        exp, question = expected[a], parsed[b]
        label = question.label
        type_ok = TYPES.get(exp["type"]) == question.qtype
        score.type_ok += type_ok
        if not type_ok:
            score.misses.append(f"{label}: type {question.qtype}, expected {exp['type']}")
        if exp.get("options"):
            score.options_total += 1
            options_ok = question.option_count == exp["options"]
            score.options_ok += options_ok
            if not options_ok:
                got = "".join(o["label"] for o in question.options)
                score.misses.append(f"{label}: options {question.option_count} ({got}), expected {exp['options']}")
        has_solution = bool(question.solution.strip() or question.answer.strip())
        score.solution_ok += has_solution == bool(exp["has_solution"])
        if has_solution != bool(exp["has_solution"]):
            score.misses.append(f"{label}: solution {'found' if has_solution else 'missing'}")
        found = len(figures_of.get(index_of[id(question)], []))
        score.figures_ok += abs(found - int(exp.get("figures") or 0)) <= 1
        if abs(found - int(exp.get("figures") or 0)) > 1:
            score.misses.append(f"{label}: {found} figures, expected {exp.get('figures') or 0}")


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.2f}"


def print_table(scores: list[PaperScore]) -> None:
    head = f"{'paper':40} {'exp':>3} {'got':>3} {'prec':>5} {'rec':>5} {'type':>5} {'opts':>5} {'sol':>5} "
    head += f"{'fig':>5} {'txt p/s':>7} {'ocr s/p':>7}  missing / extra"
    print(head)
    for s in scores:
        txt = f"{s.text_pages / s.text_seconds:7.1f}" if s.text_pages and s.text_seconds else "      -"
        ocr = f"{s.ocr_seconds / s.ocr_pages:7.2f}" if s.ocr_pages else "      -"
        tail = s.error or f"-{','.join(s.missing)} +{','.join(s.extra)}"
        print(
            f"{s.file[:40]:40} {s.expected:3} {s.found:3} {_fmt(s.precision)} {_fmt(s.recall)} "
            f"{_fmt(s.share(s.type_ok))} {_fmt(s.share(s.options_ok, s.options_total))} "
            f"{_fmt(s.share(s.solution_ok))} {_fmt(s.share(s.figures_ok))} {txt} {ocr}  {tail}"
        )
    total = totals(scores)
    print(
        f"{'TOTAL':40} {total['expected']:3} {total['found']:3} {_fmt(total['precision'])} {_fmt(total['recall'])} "
        f"{_fmt(total['type'])} {_fmt(total['options'])} {_fmt(total['solution'])} {_fmt(total['figures'])} "
        f"{total['text_pages_per_second'] or 0:7.1f} {total['ocr_seconds_per_page'] or 0:7.2f}"
    )
    cpu = total["ocr_cpu_seconds_per_page"] or 0
    text_cpu = total["text_pages_per_cpu_second"] or 0
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"min precision {total['min_precision']:.2f}, min recall {total['min_recall']:.2f}; "
          f"text pages per CPU second {text_cpu:.1f}; OCR CPU s/page {cpu:.2f}; load average {load}")  # fmt: skip


def totals(scores: list[PaperScore]) -> dict:
    def ratio(a: float, b: float) -> float | None:
        return a / b if b else None

    expected = sum(s.expected for s in scores)
    found = sum(s.found for s in scores)
    matched = sum(s.matched for s in scores)
    text_pages, text_seconds = sum(s.text_pages for s in scores), sum(s.text_seconds for s in scores)
    ocr_pages, ocr_seconds = sum(s.ocr_pages for s in scores), sum(s.ocr_seconds for s in scores)
    return {
        "expected": expected,
        "found": found,
        "precision": ratio(matched, found),
        "recall": ratio(matched, expected),
        "min_precision": min(s.precision for s in scores),
        "min_recall": min(s.recall for s in scores),
        "type": ratio(sum(s.type_ok for s in scores), matched),
        "options": ratio(sum(s.options_ok for s in scores), sum(s.options_total for s in scores)),
        "solution": ratio(sum(s.solution_ok for s in scores), matched),
        "figures": ratio(sum(s.figures_ok for s in scores), matched),
        "text_pages_per_second": ratio(text_pages, text_seconds),
        "ocr_seconds_per_page": ratio(ocr_seconds, ocr_pages),
        "text_pages_per_cpu_second": ratio(text_pages, sum(s.text_cpu_seconds for s in scores)),
        "ocr_cpu_seconds_per_page": ratio(sum(s.ocr_cpu_seconds for s in scores), ocr_pages),
        "errors": [s.file for s in scores if s.error],
    }


def cache_ocr(folder: Path) -> None:
    """For working on segmentation: the configured backend's results are kept by image hash."""
    import hashlib
    import pickle

    from annotation.ocr import get_ocr_backend

    backend = get_ocr_backend()
    recognize = backend.recognize
    folder.mkdir(parents=True, exist_ok=True)

    def cached(image):  # noqa: ANN001, ANN202
        path = folder / (hashlib.sha256(image.tobytes()).hexdigest() + ".pickle")
        if path.exists():
            return pickle.loads(path.read_bytes())  # noqa: S301 (our own cache)
        result = recognize(image)
        path.write_bytes(pickle.dumps(result))
        return result

    backend.recognize = cached


def run(folder: Path, only: str = "") -> list[PaperScore]:
    expected = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    return [score_paper(folder / paper["file"], paper) for paper in expected if only in paper["file"]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", type=Path, default=None)
    parser.add_argument("--only", default="", help="score only the papers whose file name contains this")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--ocr-cache", type=Path, help="keep OCR results here between runs (OCR times then mean nothing)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print each paper's warnings and misses too")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")
    import django

    django.setup()
    if args.ocr_cache:
        cache_ocr(args.ocr_cache)
    scores = run(args.folder or default_folder(), args.only)
    if args.json:
        json.dump({"papers": [s.__dict__ for s in scores], "total": totals(scores)}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return
    print_table(scores)
    if args.verbose:
        for s in scores:
            print(f"\n{s.file}:\n  " + "\n  ".join(s.warnings + [f"miss {m}" for m in s.misses]))


if __name__ == "__main__":
    main()
