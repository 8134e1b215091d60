"""PEM-800K lines in their common shape, read without Django.

The importer (pem.training.pem800k_import) and its reader process (pem.training.reader, which
keeps the import's parsing off the interpreter that talks to the database) both read a
line through ``plain``, so a chain gets the same steps, labels and key either way. Nothing
here imports Django: the reader process stays small.
"""

from __future__ import annotations

from typing import Any, NamedTuple

KEY_HASH_LENGTH = 24
# The keys of the common shape. A line holding any other key may hold a float, whose key is
# made by json.dumps (importer.canonical_json): the reader process leaves it to the importer.
PLAIN_KEYS = frozenset(("hash_id", "question", "format_solution", "ground_truth", "student_infer", "step_labels",
                        "model"))  # fmt: skip


def chain_key(hash_id: str, digest: str) -> str:
    """The question and the chain's content (``digest``: of the whole record, canonical): the same
    record always gets the same key."""
    return f"{hash_id[: 200 - KEY_HASH_LENGTH - 1]}:{digest}"


def lines_text(value: Any) -> str | None:
    """Text, or a list of texts one a line; None for anything else."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "\n".join(value)
    return None


class Plain(NamedTuple):
    hash_id: str
    question: str
    solution: str
    answer: str
    response: str
    model: str
    steps: list[tuple[str, str, str]]  # (text, label code, explanation stripped)


def plain(record: dict, label_codes: frozenset[str]) -> Plain | None:
    """The common case read directly: exact label codes, [step, label, explanation] triples, plain
    strings, no metadata tags. Anything else (names for labels, pairs, tags, odd types) returns
    None and goes through pem.services.from_reference, which forgives or explains."""
    hash_id, steps = record.get("hash_id"), record.get("step_labels")
    question, response, model = record.get("question"), record.get("student_infer"), record.get("model")
    solution, answer = lines_text(record.get("format_solution")), lines_text(record.get("ground_truth"))
    if (
        not isinstance(hash_id, str) or not hash_id.strip() or len(hash_id.strip()) > 200
        or record.get("key") or record.get("subject") or record.get("type")
        or not isinstance(question, str | None) or not isinstance(response, str | None)
        or not isinstance(model, str | None) or solution is None or answer is None
        or not isinstance(steps, list) or not steps
    ):  # fmt: skip
        return None
    triples: list[tuple[str, str, str]] = []
    add = triples.append
    for entry in steps:
        if type(entry) is not list or len(entry) != 3:
            return None
        text, label, explanation = entry
        if (
            type(text) is not str or type(label) is not str or type(explanation) is not str
            or label not in label_codes or not text.strip()
        ):  # fmt: skip
            return None
        add((text, label, explanation.strip()))
    return Plain(hash_id.strip(), question or "", solution, answer, response or "", (model or "").strip(), triples)


def copy_text(value: str) -> str:
    """Text as one field of COPY's text format (the backslash first: the others add one)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def copy_field(value: Any) -> str:
    """A value every row shares, as one field of COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    return copy_text(str(value))
