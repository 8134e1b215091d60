"""The paper's Table 2 (the statistics of K12Vista) for a release of the studio, and its Table 3
rows for a PEBench release and a PEM-800K training export, with the tokenizer that counted their
tokens named.

Tokens are counted by the tokenizer the lab points the studio at (``STATS_TOKENIZER_DIR``: a
local folder holding a model's ``tokenizer.json``, read with the ``tokenizers`` library where it
is installed), else by a stated fallback: one token per CJK character, per run of Latin letters,
per number and per other symbol. The fallback is no model's count: numbers from it are not the
paper's, and the table says which was used. The paper's own figures for its release stand beside
ours (``PAPER_TABLE_2``), never mixed in. Row names are the paper's, in English on the cards and
translated on the pages (``gettext_noop`` here).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext_noop as _noop

from annotation.reference_format import without_placeholders

# The K12Vista paper, Table 2 ("The statistic of K12Vista"), for its release of 33,660 questions.
PAPER_TABLE_2 = {
    "questions": 33660,
    "subjects": 5,
    "knowledge_points": 17721,
    "types": 3,
    "problem_tokens": 150.44,
    "solution_tokens": 247.48,
    "solution_steps": 5.15,
    "answers": 3.24,
    "answer_tokens": 24.88,
}
TABLE_2_ROWS = (
    ("questions", _noop("Question Number")),
    ("subjects", _noop("Total Subjects")),
    ("knowledge_points", _noop("Total Knowledge Points")),
    ("types", _noop("Total Question Types")),
    ("problem_tokens", _noop("Avg. Problem Tokens")),
    ("solution_tokens", _noop("Avg. Reference Solution Tokens")),
    ("solution_steps", _noop("Avg. Reference Solution Steps")),
    ("answers", _noop("Avg. Number of Answers")),
    ("answer_tokens", _noop("Avg. Answer Tokens")),
)
# The paper, Table 3 ("The Statistic of K12-PEM800K and K12-PEBench"): the K12-PEBench rows.
PAPER_TABLE_3_PEBENCH = {
    "records": 3033,
    "solution_tokens": 220.34,
    "problem_tokens": 134.43,
    "student_input_tokens": 317.59,
    "student_input_steps": 6.32,
    "student_error_steps": 2.95,
}
TABLE_3_PEBENCH_ROWS = (
    ("records", _noop("K12-PEBench")),
    ("solution_tokens", _noop("Avg. Reference Solution Tokens")),
    ("problem_tokens", _noop("Avg. Problem Tokens")),
    ("student_input_tokens", _noop("Avg. Student Input Tokens")),
    ("student_input_steps", _noop("Avg. Student Input Steps")),
    ("student_error_steps", _noop("Avg. Student Error Steps")),
)
# The K12-PEM-800K rows of the same table.
PAPER_TABLE_3_PEM = {
    "records": 840175,
    "solution_tokens": 257.40,
    "problem_tokens": 150.59,
    "student_input_tokens": 423.79,
    "output_tokens": 331.04,
    "student_error_steps": 3.99,
}
TABLE_3_PEM_ROWS = (
    ("records", _noop("K12-PEM-800K")),
    ("solution_tokens", _noop("Avg. Reference Solution Tokens")),
    ("problem_tokens", _noop("Avg. Problem Tokens")),
    ("student_input_tokens", _noop("Avg. Student Input Tokens")),
    ("output_tokens", _noop("Avg. Output Tokens")),
    ("student_error_steps", _noop("Avg. Student Error Steps")),
)
# Token means of a training export are taken over every k-th record, at most this many: counting
# every one of 800,000 records would add a large share to the export's time.
PEM_TOKEN_SAMPLE = 5_000
CORRECT_STEP = {"CS", "步骤正确"}
FALLBACK = "fallback: one per CJK character, Latin word, number or other symbol"
# A run of Latin letters, a number, else any one character that is not a space (a CJK character,
# a symbol): one token each.
_FALLBACK_TOKEN = re.compile(r"[A-Za-z]+|\d+(?:\.\d+)?|\S")


@dataclass(frozen=True)
class TokenCounter:
    name: str  # what the table names as its tokenizer
    count: Callable[[str], int]


def fallback_count(text: str) -> int:
    return len(_FALLBACK_TOKEN.findall(text))


def token_counter() -> TokenCounter:
    """The configured tokenizer, or the fallback with the reason it is used."""
    folder = settings.STATS_TOKENIZER_DIR
    if not folder:
        return TokenCounter(FALLBACK + " (no STATS_TOKENIZER_DIR set)", fallback_count)
    path = Path(folder) / "tokenizer.json"
    try:
        from tokenizers import Tokenizer  # in the ml extra (with transformers), not a web dependency

        tokenizer = Tokenizer.from_file(str(path))
    except ImportError:
        return TokenCounter(FALLBACK + " (the tokenizers library is not installed here)", fallback_count)
    except Exception as exc:  # a missing or damaged file: said, and the fallback counts
        return TokenCounter(f"{FALLBACK} ({path} could not be read: {exc})", fallback_count)
    return TokenCounter(
        f"{Path(folder).name} ({path})", lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)
    )


def problem_text(content: dict) -> str:
    """The question as the reference record gives it (stem and options), without the placeholder."""
    options = [f"{o['label']}. {o['text']}" for o in content.get("options") or []]
    return without_placeholders("\n".join([content.get("text", ""), *options]))


def solution_text(content: dict) -> str:
    steps = content.get("solution_steps") or []
    return "\n".join(steps) if steps else content.get("raw_solution", "")


def _mean(values: list[int]) -> float | None:
    return round(sum(values) / len(values), 2) if values else None


def table_2(contents: Iterable[dict], counter: TokenCounter | None = None) -> dict:
    """Table 2 over release contents (``ReleaseItem.content``): counts, and means per question
    (answer tokens: all of a question's sub-answers together)."""
    counter = counter or token_counter()
    subjects: set[str] = set()
    types: set[str] = set()
    points: set[str] = set()
    problem: list[int] = []
    solution: list[int] = []
    steps: list[int] = []
    answers: list[int] = []
    answer_tokens: list[int] = []
    for c in contents:
        subjects.add(c["subject"])
        types.add(c["qtype"])
        points.update(f"{c['subject']}:{name}" for name in c.get("knowledge_points", []))
        problem.append(counter.count(problem_text(c)))
        solution.append(counter.count(solution_text(c)))
        steps.append(len(c.get("solution_steps") or []))
        answers.append(len(c.get("answers") or []))
        answer_tokens.append(sum(counter.count(a) for a in c.get("answers") or []))
    return {
        "questions": len(problem),
        "subjects": len(subjects),
        "knowledge_points": len(points),
        "types": len(types),
        "problem_tokens": _mean(problem),
        "solution_tokens": _mean(solution),
        "solution_steps": _mean(steps),
        "answers": _mean(answers),
        "answer_tokens": _mean(answer_tokens),
        "tokenizer": counter.name,
    }


def table_2_rows(ours: dict) -> list[tuple[str, object, object]]:
    """(row name, ours, the paper's) in the paper's order."""
    return [(label, ours.get(key), PAPER_TABLE_2[key]) for key, label in TABLE_2_ROWS]


def table_3_pebench(records: Iterable[dict], counter: TokenCounter | None = None) -> dict:
    """Table 3's PEBench rows over PEBench reference records (``question``, ``format_solution``,
    ``student_infer``, ``step_labels``): an error step is one whose gold label is not 步骤正确."""
    counter = counter or token_counter()
    solution: list[int] = []
    problem: list[int] = []
    student: list[int] = []
    steps: list[int] = []
    errors: list[int] = []
    for record in records:
        solution.append(counter.count(record.get("format_solution") or ""))
        problem.append(counter.count(without_placeholders(record.get("question") or "")))
        student.append(counter.count(record.get("student_infer") or ""))
        labels = [entry[1] for entry in record.get("step_labels") or []]
        steps.append(len(labels))
        errors.append(sum(label not in CORRECT_STEP for label in labels))
    return {
        "records": len(steps),
        "solution_tokens": _mean(solution),
        "problem_tokens": _mean(problem),
        "student_input_tokens": _mean(student),
        "student_input_steps": _mean(steps),
        "student_error_steps": _mean(errors),
        "tokenizer": counter.name,
    }


def table_3_pebench_rows(ours: dict) -> list[tuple[str, object, object]]:
    return [(label, ours.get(key), PAPER_TABLE_3_PEBENCH[key]) for key, label in TABLE_3_PEBENCH_ROWS]


class PemTable3:
    """Table 3's PEM-800K rows, gathered while an export writes its records: the record count and
    error steps (labels other than CS) exact, the token means over every k-th record (stated)."""

    def __init__(self, total: int, counter: TokenCounter | None = None, sample: int = PEM_TOKEN_SAMPLE) -> None:
        self.counter = counter or token_counter()
        self.every = max(1, -(-total // sample))
        self.records = 0
        self.error_steps = 0
        self.tokens: dict[str, list[int]] = {k: [] for k in ("solution", "problem", "student", "output")}

    def add(self, *, problem: str, solution: str, steps: list[str], output: str) -> None:
        """One record; the student input is its steps, a line each (joined only when counted)."""
        if self.records % self.every == 0:
            student = "\n".join(steps)
            for key, text in (("solution", solution), ("problem", problem), ("student", student), ("output", output)):
                self.tokens[key].append(self.counter.count(text))
        self.records += 1

    def result(self, labels: dict[str, int]) -> dict:
        """``labels``: steps per label over every record (the export counts them anyway)."""
        self.error_steps = sum(n for label, n in labels.items() if label not in CORRECT_STEP)
        return {
            "records": self.records,
            "solution_tokens": _mean(self.tokens["solution"]),
            "problem_tokens": _mean(self.tokens["problem"]),
            "student_input_tokens": _mean(self.tokens["student"]),
            "output_tokens": _mean(self.tokens["output"]),
            "student_error_steps": round(self.error_steps / self.records, 2) if self.records else None,
            "tokens_counted_on": len(self.tokens["problem"]),
            "tokenizer": self.counter.name,
        }


def table_3_pem_rows(ours: dict) -> list[tuple[str, object, object]]:
    return [(label, ours.get(key), PAPER_TABLE_3_PEM[key]) for key, label in TABLE_3_PEM_ROWS]
