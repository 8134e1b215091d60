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

    DEBUG=1 .venv/bin/python -m bench.real_papers --generated 300 --seed 0 [--keep DIR]

scores the importer on papers made by ``bench/exam_papers.py`` (real question text in layouts real
papers use, with known truth) instead of a folder. Their truth allows two more measures: the character
error rate of each matched question's text (stem and option texts, whitespace ignored, NFKC) against what
the page prints, and "crossed" questions, whose text holds a distinctive piece (12 characters found in no
other question's truth) of another question's text. The scores are then also broken down by layout
feature (page size, columns, numbering, option style and layout, answer placement, figures, shared
stems, scanned/outlined), worst first: which layouts the importer fails on. Every run ends with the
issue's targets beside the results.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import tempfile
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
    # Baselines on the same text-layer pages, in the same run: PyMuPDF's get_text("dict") alone, and that
    # plus rendering the page at the stored image's resolution (what any import that keeps page images pays).
    raw_text_seconds: float = 0.0
    raw_render_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)  # each matched question that differs, and how
    error: str = ""
    # Only where the truth has the text (generated papers):
    cer_errors: int = 0
    cer_chars: int = 0
    crossed: int = 0  # matched questions holding a distinctive piece of another question's text
    key_total: int = 0  # choice questions whose answer the paper prints
    key_ok: int = 0  # … and the importer attached exactly those letters
    features: list[str] = field(default_factory=list)
    # One row per expected question: its features and how it fared, for the breakdown by feature.
    rows: list[dict] = field(default_factory=list)

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

    score = PaperScore(path.name, expected=len(expected["questions"]), features=list(expected.get("features", [])))
    try:
        pdf = reading.open_pdf(path)
    except reading.PdfImportError as exc:
        score.error = str(exc)
        return score
    with pdf:
        score.pages = pdf.page_count
        texts, regions, sources = [], [], []
        for index in range(pdf.page_count):
            page = pdf.load_page(index)
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
                started = time.perf_counter()
                page.get_text("dict")
                score.raw_text_seconds += time.perf_counter() - started
                page.get_pixmap(dpi=reading.PAGE_DPI, alpha=False)
                score.raw_render_seconds += time.perf_counter() - started
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
    generated = all("text" in q for q in expected)
    rows = [{"features": [*score.features, *q.get("features", []), f"type={q['type']}"], "matched": False}
            for q in expected]  # fmt: skip
    score.rows = rows if generated else []
    pieces = _distinctive_pieces(expected) if generated else []
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
                letters = "".join(o["label"] for o in question.options)
                score.misses.append(f"{label}: options {question.option_count} ({letters}), expected {exp['options']}")
        has_solution = bool(question.solution.strip() or question.answer.strip())
        score.solution_ok += has_solution == bool(exp["has_solution"])
        if has_solution != bool(exp["has_solution"]):
            score.misses.append(f"{label}: solution {'found' if has_solution else 'missing'}")
        found = len(figures_of.get(index_of[id(question)], []))
        score.figures_ok += abs(found - int(exp.get("figures") or 0)) <= 1
        if abs(found - int(exp.get("figures") or 0)) > 1:
            score.misses.append(f"{label}: {found} figures, expected {exp.get('figures') or 0}")
        if generated:
            row = rows[a]
            row.update(matched=True, type_ok=type_ok, solution_ok=has_solution == bool(exp["has_solution"]),
                       figures_ok=abs(found - int(exp.get("figures") or 0)) <= 1)  # fmt: skip
            if exp.get("options"):
                row["options_ok"] = question.option_count == exp["options"]
            _compare_text(score, row, exp, question, [p for j, p in enumerate(pieces) if j != a])


def _question_text(question) -> str:  # noqa: ANN001 (a segment.ParsedQuestion)
    return question.text + "".join(option["text"] for option in question.options)


def _distinctive_pieces(expected: list[dict], size: int = 12) -> list[list[str]]:
    """Per question, the pieces of its text (every ``size`` characters) found nowhere else in the truth.

    A solution may quote its own question, so the solutions count as elsewhere too."""
    from bench.exam_papers import normalized

    texts = [normalized(q["text"]) for q in expected]
    others = [normalized(q.get("shared_stem", "") + q.get("solution", "")) for q in expected]
    pieces = []
    for i, text in enumerate(texts):
        rest = [t for j, t in enumerate(texts) if j != i] + others
        pieces.append([p for k in range(0, max(1, len(text) - size + 1), size)
                       if len(p := text[k : k + size]) == size and not any(p in t for t in rest)])  # fmt: skip
    return pieces


def _compare_text(score: PaperScore, row: dict, exp: dict, question, others: list[list[str]]) -> None:  # noqa: ANN001
    from bench.exam_papers import normalized

    got, want = normalized(_question_text(question)), normalized(exp["text"])
    errors = levenshtein(got, want)
    if exp.get("shared_stem"):
        # A shared stem may be attached to the question it introduces (or kept apart): either reads right.
        errors = min(errors, levenshtein(got, normalized(exp["shared_stem"]) + want))
    score.cer_errors += errors
    score.cer_chars += len(want)
    row.update(cer_errors=errors, cer_chars=len(want))
    if errors > 0.1 * len(want):
        score.misses.append(f"{question.label}: text {errors}/{len(want)} characters wrong: {got[:60]!r}")
    everything = normalized(_question_text(question) + question.answer + question.solution)
    crossed = any(piece in everything for pieces in others for piece in pieces)
    score.crossed += crossed
    row["crossed"] = crossed
    if crossed:
        score.misses.append(f"{question.label}: holds text of another question")
    if exp["type"] == "选择题" and exp.get("answer") and exp["has_solution"]:
        score.key_total += 1
        letters = "".join(sorted(set(re.findall(r"[A-E]", question.answer.upper()))))
        score.key_ok += letters == "".join(sorted(exp["answer"]))
        row["key_ok"] = letters == "".join(sorted(exp["answer"]))


def levenshtein(a: str, b: str) -> int:
    """Edit distance, bit-parallel (Myers 1999 as Hyyrö writes it): Python's big ints make it fast enough."""
    if not a or not b:
        return len(a) + len(b)
    if len(a) < len(b):
        a, b = b, a
    masks: dict[str, int] = {}
    for i, char in enumerate(b):
        masks[char] = masks.get(char, 0) | 1 << i
    top, full = 1 << (len(b) - 1), (1 << len(b)) - 1
    plus, minus, distance = full, 0, len(b)
    for char in a:
        eq = masks.get(char, 0)
        xv = eq | minus
        xh = (((eq & plus) + plus) ^ plus) | eq
        ph = minus | ~(xh | plus)
        mh = plus & xh
        distance += 1 if ph & top else -1 if mh & top else 0
        ph = (ph << 1) | 1
        mh <<= 1
        plus = (mh | ~(xv | ph)) & full
        minus = ph & xv & full
    return distance


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.2f}"


def print_table(scores: list[PaperScore], worst: int | None = None) -> None:
    """Every paper, or only the ``worst`` by recall then precision (a few hundred generated ones)."""
    head = f"{'paper':40} {'exp':>3} {'got':>3} {'prec':>5} {'rec':>5} {'type':>5} {'opts':>5} {'sol':>5} "
    head += f"{'fig':>5} {'txt p/s':>7} {'ocr s/p':>7}  missing / extra"
    print(head)
    shown = sorted(scores, key=lambda s: (not s.error, s.recall, s.precision))[:worst] if worst else scores
    for s in shown:
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
    print(f"baseline on the same text pages: PyMuPDF get_text('dict') {total['raw_text_pages_per_second'] or 0:.1f} "
          f"pages/s, get_text + page render {total['raw_render_pages_per_second'] or 0:.1f} pages/s; the import "
          f"reads at {total['text_vs_raw_render'] or 0:.2f}x the second")  # fmt: skip
    if total["cer"] is not None:
        print(f"character error rate {total['cer']:.4f}; questions holding another's text {total['crossed']}; "
              f"choice answers with the right letters {total['answer_letters'] or 0:.3f}")  # fmt: skip
    print("targets (issue 23):")
    print("\n".join(target_lines(total)))


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
        "raw_text_pages_per_second": ratio(text_pages, sum(s.raw_text_seconds for s in scores)),
        "raw_render_pages_per_second": ratio(text_pages, sum(s.raw_render_seconds for s in scores)),
        "text_vs_raw_render": ratio(sum(s.raw_render_seconds for s in scores), text_seconds),
        "errors": [s.file for s in scores if s.error],
        "cer": ratio(sum(s.cer_errors for s in scores), sum(s.cer_chars for s in scores)),
        "crossed": sum(s.crossed for s in scores) if any(s.rows for s in scores) else None,
        "answer_letters": ratio(sum(s.key_ok for s in scores), sum(s.key_total for s in scores)),
    }


# The targets (issue 23): (name, key in totals(), at least / at most, the bound).
TARGETS = [
    ("question-number recall", "recall", ">=", 0.97),
    ("question-number precision", "precision", ">=", 0.97),
    ("lowest recall of a paper", "min_recall", ">=", 0.9),
    ("lowest precision of a paper", "min_precision", ">=", 0.9),
    ("types", "type", ">=", 0.9),
    ("option counts", "options", ">=", 0.9),
    ("answers attached", "solution", ">=", 0.9),
    ("character error rate of question text", "cer", "<=", 0.03),
    ("questions holding another's text", "crossed", "<=", 0),
    ("text pages per second", "text_pages_per_second", ">=", 20),
    ("seconds per OCR page", "ocr_seconds_per_page", "<=", 2.0),
]


def target_lines(total: dict) -> list[str]:
    """Each target beside its result: met, not met, or not measured here (no OCR page, no text truth)."""
    lines = []
    for name, key, sense, bound in TARGETS:
        value = total.get(key)
        if value is None:
            lines.append(f"  {name:40} {'-':>8}   target {sense} {bound:<5}  not measured")
            continue
        met = value >= bound if sense == ">=" else value <= bound
        shown = f"{value:8.3f}" if isinstance(value, float) else f"{value:8}"
        lines.append(f"  {name:40} {shown}   target {sense} {bound:<5}  {'met' if met else 'NOT MET'}")
    return lines


FEATURE_COLUMNS = ("matched", "type_ok", "options_ok", "solution_ok", "figures_ok", "key_ok", "crossed")


def by_feature(scores: list[PaperScore]) -> list[dict]:
    """The generated papers' scores per layout feature (of the paper or the question), worst recall first."""
    groups: dict[str, list[dict]] = {}
    for s in scores:
        for row in s.rows:
            for feature in row["features"]:
                groups.setdefault(feature, []).append(row)
    table = []
    for feature, rows in groups.items():
        line: dict = {"feature": feature, "questions": len(rows)}
        for column in FEATURE_COLUMNS:
            among = rows if column == "matched" else [r for r in rows if r.get("matched")]
            values = [bool(r[column]) for r in among if column in r]
            line[column] = sum(values) / len(values) if values else None
        chars = sum(r.get("cer_chars", 0) for r in rows)
        line["cer"] = sum(r.get("cer_errors", 0) for r in rows) / chars if chars else None
        table.append(line)
    return sorted(table, key=lambda line: (line["matched"], line["feature"]))


def print_features(scores: list[PaperScore]) -> None:
    names = {"matched": "recall", "type_ok": "type", "options_ok": "opts", "solution_ok": "sol", "figures_ok": "fig",
             "key_ok": "key", "crossed": "cross", "cer": "CER"}  # fmt: skip
    print(f"\n{'layout feature':28} {'qs':>5} " + " ".join(f"{name:>6}" for name in names.values()))
    for line in by_feature(scores):
        cells = " ".join("     -" if line[c] is None else f"{line[c]:6.3f}" for c in names)
        print(f"{line['feature'][:28]:28} {line['questions']:5} {cells}")


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

    setattr(backend, "recognize", cached)  # noqa: B010 (mypy refuses assigning to a method)


def run(folder: Path, only: str = "") -> list[PaperScore]:
    expected = json.loads((folder / "expected.json").read_text(encoding="utf-8"))
    return [score_paper(folder / paper["file"], paper) for paper in expected if only in paper["file"]]


def run_generated(count: int, seed: int, keep: Path | None = None, only: str = "", *, scanned: float = 0.04,
                  outlined: float = 0.04) -> list[PaperScore]:  # fmt: skip
    """``count`` papers from bench/exam_papers.py, written to ``keep`` (or a temporary folder) and scored."""
    from bench.exam_papers import write_papers

    with tempfile.TemporaryDirectory(prefix="exam-papers-") as scratch:
        folder = keep or Path(scratch)
        write_papers(folder, count, seed, scanned_share=scanned, outlined_share=outlined)
        return run(folder, only)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", type=Path, default=None)
    parser.add_argument("--only", default="", help="score only the papers whose file name contains this")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--ocr-cache", type=Path, help="keep OCR results here between runs (OCR times then mean nothing)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print each paper's warnings and misses too")
    parser.add_argument("--generated", type=int, metavar="N", help="score N papers made by bench/exam_papers.py")
    parser.add_argument("--seed", type=int, default=0, help="of the generated papers")
    parser.add_argument("--scanned", type=float, default=0.04, help="share of generated papers that are scans")
    parser.add_argument("--outlined", type=float, default=0.04, help="share with glyphs drawn as outlines")
    parser.add_argument("--keep", type=Path, help="write the generated papers and their truth here, to look at")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")
    import django

    django.setup()
    if args.ocr_cache:
        cache_ocr(args.ocr_cache)
    if args.generated:
        scores = run_generated(args.generated, args.seed, args.keep, args.only, scanned=args.scanned,
                               outlined=args.outlined)  # fmt: skip
    else:
        scores = run(args.folder or default_folder(), args.only)
    if args.json:
        result = {"papers": [s.__dict__ for s in scores], "total": totals(scores)}
        if args.generated:
            result["features"] = by_feature(scores)
        json.dump(result, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return
    print_table(scores, worst=20 if args.generated and not args.verbose else None)
    if args.generated:
        print_features(scores)
    if args.verbose:
        for s in scores:
            print(f"\n{s.file}:\n  " + "\n  ".join(s.warnings + [f"miss {m}" for m in s.misses]))


if __name__ == "__main__":
    main()
