r"""Question text for the generated exam papers (bench/exam_papers.py), from ``../shared/realdata/records/``.

GAOKAO-Bench objective questions and GAOKAO-MM (with its PNG figures) are read at run time; nothing of them is
kept in the repository. Each usable record becomes a group of ``Item``: one question, or several sharing the
passage before them ("据此完成 3～5 题"). LaTeX is printed as plain text, and characters the PDF's built-in
fonts do not give back from the text layer are dropped, so that the truth is what the page holds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pymupdf

CJK = "china-s"  # PyMuPDF's built-in CJK font: every glyph one em wide
LATIN = "helv"


def records_folder() -> Path:
    """``../shared/realdata/records`` beside the clone, or beside a folder above it (a worktree's)."""
    for above in Path(__file__).resolve().parents[1].parents:
        if (above / "shared" / "realdata" / "records").is_dir():
            return above / "shared" / "realdata" / "records"
    return Path(__file__).resolve().parents[1].parent / "shared" / "realdata" / "records"


# --------------------------------------------------------------------------------------------
# Question text from the records
# --------------------------------------------------------------------------------------------

_SYMBOLS = {
    "times": "×", "cdot": "·", "cdots": "…", "leqslant": "≤", "leq": "≤", "le": "≤", "geqslant": "≥", "geq": "≥",
    "ge": "≥", "in": "∈", "infty": "∞", "rightarrow": "→", "to": "→", "uparrow": "↑", "downarrow": "↓",
    "pi": "π", "alpha": "α", "beta": "β", "theta": "θ", "omega": "ω", "lambda": "λ", "mu": "μ", "pm": "±",
    "mid": "|", "sim": "～", "circ": "°", "prime": "′", "vee": "∨", "wedge": "∧", "neg": "¬", "cap": "∩",
    "cup": "∪", "emptyset": "∅", "subseteq": "⊆", "square": "□", "quad": " ", "sin": "sin", "cos": "cos",
    "tan": "tan", "ln": "ln", "log": "log", "Delta": "Δ", "angle": "∠", "perp": "⊥", "parallel": "∥",
    "neq": "≠", "approx": "≈", "div": "÷", "triangle": "△",
}  # fmt: skip
# Characters the built-in CJK font does not carry through its text layer (checked by round trip below).
_PLAIN = {"²": "2", "³": "3", "₂": "2", "₃": "3", "₄": "4", "−": "-", "\u3000": " ", "\xa0": " "}


def plain_math(text: str) -> str:
    r"""``$\frac{1}{2} x^{2}$`` as a page prints it in plain text: ``1/2 x2``."""
    text = re.sub(r"\\(?:begin|end)\{[^{}]*\}(?:\{[^{}]*\})?", " ", text)
    text = text.replace("$", "").replace("\\{", "\x01").replace("\\}", "\x02")
    text = re.sub(r"\\(?:left|right|displaystyle|mathrm|text|mathbf|operatorname|mathit|boldsymbol)\b", "", text)
    for _ in range(3):  # nested braces unwind from the inside
        text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"√\1", text)
        text = re.sub(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"\1/\2", text)
        text = re.sub(r"\\(?:overline|bar|vec|overrightarrow)\s*\{([^{}]*)\}", r"\1", text)
        text = re.sub(r"[\^_]\s*\{([^{}]*)\}", r"\1", text)
        text = re.sub(r"(?<![A-Za-z}])\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _SYMBOLS.get(m.group(1), ""), text)
    text = re.sub(r"[\^_~\\{}]", "", text).replace("\x01", "{").replace("\x02", "}")
    text = "".join(_PLAIN.get(c, c) for c in text)
    return re.sub(r"[ \t]+", " ", text).strip()


@dataclass
class Item:
    """One question of a record, ready to print."""

    stem: str  # without its printed number
    options: list[str]
    answer: str  # the option letters
    analysis: str
    source: str  # record file and index, for a person who looks at a bad case
    picture: Path | None = None
    passage: str = ""  # the shared stem printed before the group, if the record has one


OPTION = re.compile(r"(?<![A-Za-z])([A-E])\s*[.．、]")
SCORE = re.compile(r"^[（(]\s*\d+\s*分\s*[)）]\s*")
QUESTION_START = re.compile(r"(?:^|(?<=[。．.！？)）\s]))(\d{1,2})\s*[.．、]\s*(?=[（(]\s*\d+\s*分|[^\d])")
GROUP_MARK = re.compile(r"(据此|回答|完成)[^。．.]*?\d+\s*[～~\-—至]\s*\d+\s*题[。．.]?")


def _split_options(text: str) -> tuple[str, list[str]] | None:
    """Stem and options A-D of a choice question, or None when its letters are not plainly in order."""
    found, after = [], 0
    for letter in "ABCD":
        for match in OPTION.finditer(text, after):
            if match.group(1) == letter:
                found.append(match)
                after = match.end()
                break
        else:
            return None
    stem = text[: found[0].start()].strip()
    options = [
        text[m.end() : n.start() if n else len(text)].strip() for m, n in zip(found, [*found[1:], None], strict=True)
    ]
    if not stem or any(not o or len(o) > 60 for o in options):
        return None
    return stem, options


def _items_of(record: dict, where: str, root: Path) -> list[Item]:
    raw = record["question"]
    if re.search(r"\\begin|\\hline|\\array", raw):
        return []  # tables and arrays are not plain text
    answers = record["answer"] if isinstance(record["answer"], list) else [record["answer"]]
    text = plain_math(raw.replace("\n", " "))
    # Each question starts at its printed number "3．" (at the start, or after the shared passage).
    starts = [m for m in QUESTION_START.finditer(text) if not OPTION.match(text, m.start())]
    if len(answers) > 1:
        # Keep the starts whose numbers run on one by one from the first.
        run: list[re.Match] = []
        for m in starts:
            if not run or int(m.group(1)) == int(run[-1].group(1)) + 1:
                run = [m] if not run else [*run, m]
        starts = run
    if not starts or len(starts) < len(answers):
        return []
    starts = starts[: len(answers)]
    passage = text[: starts[0].start()].strip()
    passage = GROUP_MARK.sub("", passage).strip()
    pictures = [root / "GAOKAO-MM" / p.removeprefix("../") for p in record.get("picture") or []]
    analysis = plain_math((record.get("analysis") or "").replace("\n", " "))
    # A record of several questions has one analysis: each question's part starts at 解 (or 【解答】).
    parts = [p.strip() for p in re.split(r"(?=【解答】|(?<!】)解\s*[:：])", analysis) if p.strip()]
    if len(answers) > 1 and len(parts) != len(answers):
        parts = [f"故选：{answer}。" for answer in answers]
    items = []
    for i, (m, answer) in enumerate(zip(starts, answers, strict=True)):  # starts were cut to the answers
        body = text[m.end() : starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        body = SCORE.sub("", body.strip())
        split = _split_options(body)
        if split is None or not re.fullmatch(r"[A-D]{1,4}", str(answer)):
            return []
        stem, options = split
        stem = re.sub(r"[（(]\s*[)）]\s*$", "（　）", stem).replace("　", " ")
        items.append(Item(stem, options, str(answer), parts[i] if len(answers) > 1 else analysis, where,
                          pictures[0] if pictures and i == 0 else None, passage))  # fmt: skip
    return items


@cache
def load_groups(root: Path | None = None) -> tuple[tuple[Item, ...], ...]:
    """Every usable record as a group of items (one, or several sharing a passage), in file order."""
    root = root or records_folder()
    groups = []
    for path in sorted(root.glob("*/Data/**/*.json")):
        for record in json.loads(path.read_text(encoding="utf-8"))["example"]:
            items = _items_of(record, f"{path.name}#{record.get('index')}", root)
            if items:
                groups.append(tuple(_printable(item) for item in items))
    if not groups:
        raise FileNotFoundError(f"no usable question records under {root}")
    return tuple(groups)


def _printable(item: Item) -> Item:
    """The item with every character the PDF cannot carry dropped, so the truth is what the text layer holds."""

    def keep(text: str) -> str:
        return re.sub(r" +", " ", "".join(c for c in text if _carried(c))).strip()

    return Item(keep(item.stem), [keep(o) for o in item.options], item.answer, keep(item.analysis), item.source,
                item.picture, keep(item.passage))  # fmt: skip


@cache
def _carried(char: str) -> bool:
    """Whether the text layer gives the character back as written (the CJK font loses ² and ₂, for one)."""
    if char.isspace():
        return char == " "
    scratch = pymupdf.open()
    page = scratch.new_page(width=60, height=30)
    writer = pymupdf.TextWriter(page.rect)
    writer.append((5, 20), char, font=font(LATIN if char.isascii() else CJK), fontsize=10)
    writer.write_text(page)
    return page.get_text().strip() == char


@cache
def font(name: str) -> pymupdf.Font:
    return pymupdf.Font(name)
