"""Chains of thought as data: the records that describe them and importing
them. Chains made by the studio's own runs are pem.chains, choosing PEBench is
pem.build and the judge panel's vote is pem.panel.

Importing is idempotent, so a job run again after a crash (or a file imported
twice) changes nothing the first run already did.

**Import** (``pem.pebench_import.import_records``, docs/formats.md "PEBench") reads the reference
PEBench format (``hash_id``, ``question``, ``format_solution``,
``ground_truth``, ``student_infer``, ``step_labels`` as ``[step, label,
explanation]``) and ours (a ``steps`` list), deciding per line. A chain is
found again by its key (``key``, else ``hash_id``):

- not there: created, with its steps fixed by the file and the file's labels
  as ``StepLabel(source=IMPORTED, rater=<import name>)``;
- the same content and labels: unchanged;
- different: updated only while no person has labelled it (no person or gold
  label, no labelling draft); otherwise a conflict, and nothing is touched.

Labels are read by code, English or Chinese name, with stray and full-width
spaces or letters forgiven; anything else fails its line, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Count, Q

from annotation.models import Question
from k12vista.import_files import RecordError
from k12vista.line_reasons import Reason, ReasonError, reason, reason_of
from k12vista.reports import LineReport
from k12vista.vocabulary import (
    TAXONOMY_VERSION,
    Stage,
    Subject,
    label_from_name,
    parse_release_tag,
    question_type_from_name,
    stage_of_grade,
)
from pem.models import Alignment, ChainOfThought, LabellingTask, Step, StepLabel

PROGRESS_EVERY = 100


class PEBenchError(ReasonError):
    """A request that cannot be carried out; the message says why. Given a reason (a code, registered with
    k12vista.line_reasons), a job that raises it stores the code, worded in each reader's language."""


# --- the import report ------------------------------------------------------------


@dataclass
class ImportReport(LineReport):
    updated: int = 0
    warnings: int = 0
    warning_lines: list[dict] = field(default_factory=list)

    def tally(self, outcome: Outcome) -> None:
        kind, line, key, detail, warnings = outcome
        for warning in warnings:
            self.warnings += 1
            self._add(self.warning_lines, {"line": line, "key": key, **self.reason_row(warning)})
        if kind in ("created", "unchanged", "updated"):
            setattr(self, kind, getattr(self, kind) + 1)
        elif kind == "conflict":
            self.conflict_at(line, key, detail)
        elif kind == "failed":
            self.fail(line, key, detail)

    def as_dict(self) -> dict:
        return super().as_dict() | {
            "updated": self.updated,
            "warnings": self.warnings,
            "warning_lines": self.warning_lines,
            "warning_lines_truncated": self.warnings > len(self.warning_lines),
        }


# (created|unchanged|updated|conflict|failed|skip, line, key, detail, warnings)
Outcome = tuple[str, int, str, str | Reason, list[str | Reason]]


# --- records to ChainData ---------------------------------------------------------


@dataclass
class LabelData:
    label: str
    explanation: str
    rater: str  # relative to the import: "" is the import itself


@dataclass
class ChainData:
    key: str
    question_hash_id: str
    question_text: str = ""
    reference_solution: str = ""
    reference_answer: str = ""
    response_text: str = ""
    model_name: str = ""
    subject: str = ""
    grade: int | None = None
    stage: str = ""
    qtype: str = ""
    step_source: str = ChainOfThought.StepSource.IMPORT
    in_training_data: bool = False
    steps: list[str] = field(default_factory=list)
    labels: list[list[LabelData]] = field(default_factory=list)  # per step
    warnings: list[str | Reason] = field(default_factory=list)
    question: Question | None = None  # the bank's question with the record's hash_id


def _text(value: Any, name: str, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise RecordError(name, reason("expected_text" if required else "expected_string"))
    return value


def _text_or_lines(value: Any, name: str) -> str:
    """A string, or a list of strings (and numbers) kept one a line."""
    if isinstance(value, list):
        if not all(isinstance(item, str | int | float) and not isinstance(item, bool) for item in value):
            raise RecordError(name, reason("expected_text_or_lines"))
        return "\n".join(str(item) for item in value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return _text(value, name)


def label_code(value: Any, name: str) -> str:
    """The code of a label given by code, English or Chinese name; unknown ones fail, never guessed."""
    if not isinstance(value, str):
        raise RecordError(name, reason("expected_step_label", value=repr(value)))
    try:
        return label_from_name(value).code
    except ValueError:
        raise RecordError(name, reason("unknown_step_label", value=repr(value))) from None


def reference_steps(value: Any, data: ChainData) -> None:
    """``step_labels``: [step, label, explanation] each; [step, label] is read with no explanation and warned."""
    if not isinstance(value, list) or not value:
        raise RecordError("step_labels", reason("expected_step_labels"))
    for index, entry in enumerate(value):
        name = f"step_labels[{index}]"
        if not isinstance(entry, list | tuple) or len(entry) not in (2, 3):
            got = reason("elements", n=len(entry)) if isinstance(entry, list | tuple) else type(entry).__name__
            raise RecordError(name, reason("expected_step_entry", got=got))
        if len(entry) == 2:
            data.warnings.append(reason("no_explanation", field=name))
        text = _text(entry[0], f"{name}[0]", required=True)
        code = label_code(entry[1], f"{name}[1]")
        explanation = _text(entry[2], f"{name}[2]") if len(entry) == 3 else ""
        data.steps.append(text)
        data.labels.append([LabelData(code, explanation.strip(), "")])


def studio_steps(value: Any, data: ChainData) -> None:
    """``steps``: strings, or {text, label?, explanation?, labels?: [{source, rater, label, explanation}]}."""
    if not isinstance(value, list) or not value:
        raise RecordError("steps", reason("expected_steps"))
    for index, entry in enumerate(value):
        name = f"steps[{index}]"
        if isinstance(entry, str):
            entry = {"text": entry}
        if not isinstance(entry, dict):
            raise RecordError(name, reason("expected_step"))
        data.steps.append(_text(entry.get("text"), f"{name}.text", required=True))
        labels = []
        if entry.get("label") not in (None, ""):
            explanation = _text(entry.get("explanation"), f"{name}.explanation")
            labels.append(LabelData(label_code(entry["label"], f"{name}.label"), explanation.strip(), ""))
        others = entry.get("labels") or []
        if not isinstance(others, list):
            raise RecordError(f"{name}.labels", reason("expected_list"))
        for j, other in enumerate(others):
            where = f"{name}.labels[{j}]"
            if not isinstance(other, dict):
                raise RecordError(where, reason("expected_label_object"))
            who = f"{_text(other.get('source'), where + '.source')}:{_text(other.get('rater'), where + '.rater')}"
            explanation = _text(other.get("explanation"), f"{where}.explanation")
            labels.append(LabelData(label_code(other.get("label"), f"{where}.label"), explanation.strip(), who))
        data.labels.append(labels)


def _key(record: dict) -> str:
    value = record.get("key") or record.get("hash_id")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    key = _text(value, "hash_id", required=True).strip()
    if len(key) > 200:
        raise RecordError("key", reason("too_long_key"))
    return key


def _metadata_from_tag(record: dict, data: ChainData) -> None:
    """Subject and stage from a release tag (``math-g9``), type from a Chinese name or code; all optional."""
    if record.get("subject"):
        try:
            subject, stage = parse_release_tag(_text(record["subject"], "subject"))
        except ValueError as exc:
            raise RecordError("subject", reason_of(exc)) from None
        data.subject, data.stage = subject.value, stage.value
        grade = record.get("grade")
        if (
            isinstance(grade, int)
            and not isinstance(grade, bool)
            and 1 <= grade <= 12
            and stage_of_grade(grade) == stage
        ):
            data.grade = grade
    if record.get("type"):
        data.qtype = _qtype(record["type"])


def _qtype(value: Any) -> str:
    try:
        return question_type_from_name(_text(value, "type")).value
    except ValueError as exc:
        raise RecordError("type", reason_of(exc)) from None


def from_reference(record: dict) -> ChainData:
    data = ChainData(key=_key(record), question_hash_id=_text(record.get("hash_id"), "hash_id").strip())
    data.question_text = _text(record.get("question"), "question")
    data.reference_solution = _text_or_lines(record.get("format_solution"), "format_solution")
    data.reference_answer = _text_or_lines(record.get("ground_truth"), "ground_truth")
    data.response_text = _text(record.get("student_infer"), "student_infer")
    data.model_name = _text(record.get("model"), "model").strip()
    _metadata_from_tag(record, data)
    reference_steps(record.get("step_labels"), data)
    return data


def from_studio(record: dict) -> ChainData:
    data = ChainData(key=_key(record), question_hash_id=_text(record.get("hash_id"), "hash_id").strip())
    data.question_text = _text(record.get("question_text"), "question_text")
    data.reference_solution = _text_or_lines(record.get("reference_solution"), "reference_solution")
    data.reference_answer = _text_or_lines(record.get("reference_answer"), "reference_answer")
    data.response_text = _text(record.get("response"), "response")
    data.model_name = _text(record.get("model"), "model").strip()
    if record.get("subject"):
        if record["subject"] not in Subject.values:
            raise RecordError(
                "subject", reason("unknown_subject", value=repr(record["subject"]), choices=", ".join(Subject.values))
            )
        data.subject = record["subject"]
    grade = record.get("grade")
    if grade is not None:
        if isinstance(grade, bool) or not isinstance(grade, int) or not 1 <= grade <= 12:
            raise RecordError("grade", reason("expected_grade", value=repr(grade)))
        data.grade, data.stage = grade, stage_of_grade(grade).value
    if record.get("stage"):
        if record["stage"] not in Stage.values or (data.stage and data.stage != record["stage"]):
            raise RecordError("stage", reason("unknown_stage", value=repr(record["stage"])))
        data.stage = record["stage"]
    if record.get("type"):
        data.qtype = _qtype(record["type"])
    source = record.get("step_source") or ChainOfThought.StepSource.IMPORT
    if source not in ChainOfThought.StepSource.values:
        raise RecordError("step_source", reason("unknown_step_source", value=repr(source)))
    data.step_source = source
    data.in_training_data = record.get("in_training_data") is True
    studio_steps(record.get("steps"), data)
    return data


def is_reference(record: dict) -> bool:
    return "step_labels" in record or "student_infer" in record


def record_to_chain(record: Any) -> ChainData:
    if not isinstance(record, dict):
        raise RecordError("line", reason("expected_object"))
    data = from_reference(record) if is_reference(record) else from_studio(record)
    fill_from_question(data)
    return data


def fill_from_question(data: ChainData) -> None:
    """The bank's question with the record's hash_id supplies what the record leaves out."""
    fill_from_bank([data])


def fill_from_bank(chains: list[ChainData]) -> None:
    """fill_from_question for a batch of chains, in one query."""
    hash_ids = {data.question_hash_id for data in chains if data.question_hash_id}
    questions = {q.hash_id: q for q in Question.objects.filter(hash_id__in=hash_ids)} if hash_ids else {}
    for data in chains:
        question = questions.get(data.question_hash_id) if data.question_hash_id else None
        data.question = question
        if question is None:
            continue
        if not data.subject:
            data.subject, data.grade, data.stage = question.subject, question.grade, question.stage
        data.qtype = data.qtype or question.qtype
        data.question_text = data.question_text or question_text_of(question)
        data.reference_solution = data.reference_solution or reference_solution_of(question)
        data.reference_answer = data.reference_answer or "\n".join(question.answers)


def question_text_of(question: Question) -> str:
    lines = [question.text] + [f"{o['label']}. {o['text']}" for o in question.options]
    return "\n".join(lines)


def reference_solution_of(question: Question) -> str:
    return "\n".join(question.solution_steps) if question.solution_steps else question.raw_solution


# --- saving a chain ----------------------------------------------------------------

SNAPSHOT_FIELDS = (
    "question_text", "reference_solution", "reference_answer", "response_text", "model_name", "subject", "grade",
    "stage", "qtype", "step_source",
)  # fmt: skip


# The rows a new imported chain is written as. save_chain and the bulk import (pem.pebench_import)
# both build them here, so the two cannot drift (tests/test_creation_paths.py compares what each
# stores). Plain dicts of attnames: the bulk path writes them by COPY without a model instance.
# A column not given takes the model's default on both paths.


def chain_row(data: ChainData) -> dict[str, Any]:
    """A new imported chain's columns."""
    return {
        **{name: getattr(data, name) for name in SNAPSHOT_FIELDS}, "key": data.key,
        "origin": ChainOfThought.Origin.IMPORTED.value, "question_id": data.question.pk if data.question else None,
        "in_training_data": data.in_training_data,
    }  # fmt: skip


def step_rows(texts: Sequence[str]) -> list[dict[str, Any]]:
    """A chain's new steps' columns but their chain, numbered from 1."""
    return [{"position": position, "text": text} for position, text in enumerate(texts, 1)]


def imported_label_row(rater: str, label: str, explanation: str) -> dict[str, Any]:
    """A label from an import file: its columns but its step."""
    return {"source": StepLabel.Source.IMPORTED.value, "rater": rater, "label": label, "explanation": explanation,
            "taxonomy_version": TAXONOMY_VERSION}  # fmt: skip


def has_person_work(cot: ChainOfThought) -> bool:
    """True once a person labelled a step, adjudicated it, or saved a labelling draft:
    from then on its steps are theirs and no import may change them."""
    labelled = StepLabel.objects.filter(step__cot=cot, source__in=[StepLabel.Source.PERSON, StepLabel.Source.GOLD])
    drafted = LabellingTask.objects.filter(cot=cot).filter(Q(submitted__isnull=False) | ~Q(draft={}))
    return labelled.exists() or drafted.exists()


def _rater(import_name: str, relative: str) -> str:
    return (f"{import_name} · {relative}" if relative else import_name)[:200]


def incoming_labels(data: ChainData, import_name: str) -> dict[tuple[int, str], tuple[str, str]]:
    """A file's labels of a chain as {(step position, rater): (label, explanation)}, the rater named
    after the import; the single and the bulk path compare and write them alike."""
    return {
        (position, _rater(import_name, label.rater)): (label.label, label.explanation)
        for position, labels in enumerate(data.labels, 1)
        for label in labels
    }


def _stored_labels(cot: ChainOfThought, raters: set[str]) -> dict[tuple[int, str], tuple[str, str]]:
    rows = StepLabel.objects.filter(step__cot=cot, source=StepLabel.Source.IMPORTED, rater__in=raters)
    values = rows.values_list("step__position", "rater", "label", "explanation")
    return {(position, rater): (label, explanation) for position, rater, label, explanation in values}


def _write_labels(cot: ChainOfThought, labels: dict[tuple[int, str], tuple[str, str]], *, new: bool = False) -> None:
    """Creates or updates this import's labels in two statements (one per label was most of an import's time)."""
    steps = {step.position: step for step in cot.steps.all()}
    rows = StepLabel.objects.filter(step__cot=cot, source=StepLabel.Source.IMPORTED, rater__in={r for _, r in labels})
    existing = {} if new else {(row.step.position, row.rater): row for row in rows.select_related("step")}
    changed, to_create = [], []  # not "new": that is the parameter
    for (position, rater), (label, explanation) in labels.items():
        row = existing.get((position, rater))
        if row is None:
            to_create.append(StepLabel(step=steps[position], **imported_label_row(rater, label, explanation)))
        elif (row.label, row.explanation) != (label, explanation):
            row.label, row.explanation, row.taxonomy_version = label, explanation, TAXONOMY_VERSION
            changed.append(row)
    StepLabel.objects.bulk_update(changed, ["label", "explanation", "taxonomy_version"])
    StepLabel.objects.bulk_create(to_create)


def replace_steps(cot: ChainOfThought, texts: Sequence[str], *, new: bool = False) -> None:
    """New steps; every label and alignment of the old ones goes with them (they judged other text)."""
    if not new:
        cot.steps.all().delete()
        Alignment.objects.filter(cot=cot).delete()
    Step.objects.bulk_create(Step(cot=cot, **row) for row in step_rows(texts))


def _differences(cot: ChainOfThought, data: ChainData) -> list[str]:
    fields = [name for name in SNAPSHOT_FIELDS if getattr(cot, name) != getattr(data, name)]
    if list(cot.steps.order_by("position").values_list("text", flat=True)) != data.steps:
        fields.append("steps")
    return fields


@transaction.atomic
def save_chain(data: ChainData, *, import_name: str) -> tuple[str, str | Reason]:
    """("created" | "unchanged" | "updated" | "conflict", detail) for one record."""
    incoming = incoming_labels(data, import_name)
    cot = ChainOfThought.objects.select_for_update().filter(key=data.key).first()
    if cot is None:
        cot = ChainOfThought(**chain_row(data))
        cot.save()
        replace_steps(cot, data.steps, new=True)
        _write_labels(cot, incoming, new=True)
        return "created", ""
    # The training-data flag keeps a chain out of PEBench: it is set whatever else happens, never cleared.
    flagged = data.in_training_data and not cot.in_training_data
    if flagged:
        cot.in_training_data = True
        cot.save(update_fields=["in_training_data"])
    differences = _differences(cot, data)
    stored = _stored_labels(cot, {rater for _, rater in incoming})
    changed_labels = sorted({f"step {pos}" for (pos, rater), value in stored.items()
                             if incoming.get((pos, rater)) != value})  # fmt: skip
    if not differences and stored == incoming:
        return ("updated" if flagged else "unchanged"), ""
    if not differences and not changed_labels:
        _write_labels(cot, {k: v for k, v in incoming.items() if k not in stored})  # new raters only
        return "updated", ""
    if has_person_work(cot):
        what = ", ".join(differences + (["labels of " + ", ".join(changed_labels)] if changed_labels else []))
        return "conflict", reason("chain_conflict_flagged" if flagged else "chain_conflict", what=what)
    for name in SNAPSHOT_FIELDS:
        setattr(cot, name, getattr(data, name))
    cot.question = cot.question or data.question
    cot.save()
    if "steps" in differences:
        replace_steps(cot, data.steps)
    else:
        for position, rater in set(stored) - set(incoming):  # labels the file no longer gives
            StepLabel.objects.filter(
                step__cot=cot, step__position=position, source=StepLabel.Source.IMPORTED, rater=rater
            ).delete()
    _write_labels(cot, incoming)
    return "updated", ""


def status_counts(queryset=None) -> dict[str, int]:
    """Chains of thought per status, every status present (zero when none)."""
    queryset = ChainOfThought.objects.all() if queryset is None else queryset
    found = dict(queryset.order_by().values_list("status").annotate(n=Count("id")))
    return {status: found.get(status, 0) for status in ChainOfThought.Status.values}
