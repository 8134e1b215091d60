"""Reads the prompts out of a user's checkout of the K12Vista reference repository.

The reference keeps its prompts as Python dictionaries in two files:

- ``K12_Vista/code/prompt.py``: ``infer_prompt`` (by mode, then by the Chinese
  question type) and ``eval_prompt`` (the judge prompts, the same way);
- ``K12_PEMBench/code/prompt.py``: ``prompt_dict``, whose ``step_by_step_infer``
  entry is the PEBench judge prompt (a step list given, one label a step).

The files are parsed with ``ast`` and only the right-hand sides of those
assignments are read, with ``ast.literal_eval`` on the node: nothing of the
checkout is imported or executed, so a hostile checkout can at worst fail to
register. No prompt text is stored in this repository; the studio keeps what a
researcher registers in the database (inference.reference.register).

Pure Python (no Django), so tests and scripts read a checkout directly.
"""

from __future__ import annotations

import ast
import hashlib
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

VISTA_PROMPTS = Path("K12_Vista/code/prompt.py")
PEMBENCH_PROMPTS = Path("K12_PEMBench/code/prompt.py")
# The reference's prompt files are a few tens of kilobytes; anything far larger is not one.
MAX_FILE_BYTES = 2_000_000

# The reference's mode keys, as the studio names the modes (InferenceRun.Mode values).
MODES = {"directly": "direct", "step_by_step": "step_by_step"}
# The reference's question types are Chinese names; the studio's codes (k12vista.vocabulary.QuestionType).
QUESTION_TYPES = {"选择题": "multiple_choice", "填空题": "fill_in_blank", "问答题": "free_response"}
PEBENCH_KEY = "step_by_step_infer"  # prompt_dict's key for the judge prompt PEBench's infer.py uses
# The fields the reference fills with str.format, per prompt family.
INFER_FIELDS = frozenset({"question"})
JUDGE_FIELDS = frozenset({"question", "answer", "solution", "student_answer"})

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class CheckoutError(ValueError):
    """The folder is not a readable checkout of the reference; the message says what is wrong."""


@dataclass(frozen=True)
class ReferencePrompts:
    """The reference's prompts, keyed by the studio's codes: ``infer[mode][qtype]``,
    ``judge[mode][qtype]`` (mode ``direct`` / ``step_by_step``, qtype a
    QuestionType value) and ``pebench`` (the PEBench judge prompt)."""

    revision: str  # the git commit, or "sha256:<hex>" of the two files where there is no .git
    infer: dict[str, dict[str, str]] = field(default_factory=dict)
    judge: dict[str, dict[str, str]] = field(default_factory=dict)
    pebench: str = ""

    @property
    def set_name(self) -> str:
        """The name the studio registers them under: the reference and its commit."""
        short = self.revision.removeprefix("sha256:")[:12]
        kind = "content" if self.revision.startswith("sha256:") else "commit"
        return f"K12Vista@{short}" if kind == "commit" else f"K12Vista@sha256-{short}"


def template_fields(template: str) -> set[str]:
    """The str.format fields of a template; raises CheckoutError for any field the
    reference's own call could not fill (attribute or index access, conversions)."""
    names = set()
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:  # an unmatched brace: str.format would fail the same way
        raise CheckoutError(f"not a str.format template: {exc}") from exc
    for _literal, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise CheckoutError(f"field {{{name}}} is not a plain name")
        names.add(name)
    return names


def render(template: str, **values: object) -> str:
    """``template.format(**values)`` as the reference calls it, for plain fields only
    (template_fields refuses any other): the text between fields is kept as the
    reference's own format call would keep it ("{{" reads as "{"), and each value is
    ``str()`` of it, so a list of answers reads ``['A', 'B']`` as in the reference."""
    missing = template_fields(template) - values.keys()
    if missing:
        raise KeyError(", ".join(sorted(missing)))
    parts = []
    for literal, name, _spec, _conversion in string.Formatter().parse(template):
        parts.append(literal)
        if name is not None:
            parts.append(str(values[name]))
    return "".join(parts)


def read_checkout(path: str | Path) -> ReferencePrompts:
    """The reference's prompts from the checkout at ``path`` (its root, the folder
    holding K12_Vista/ and K12_PEMBench/)."""
    root = Path(path)
    if not root.is_dir():
        raise CheckoutError(f"{root} is not a folder")
    vista = _assignments(root / VISTA_PROMPTS, {"infer_prompt", "eval_prompt"})
    pembench = _assignments(root / PEMBENCH_PROMPTS, {"prompt_dict"})
    infer = _by_mode(vista["infer_prompt"], "infer_prompt", "_infer_prompt", INFER_FIELDS)
    judge = _by_mode(vista["eval_prompt"], "eval_prompt", "_eval_prompt", JUDGE_FIELDS)
    pebench = pembench["prompt_dict"].get(PEBENCH_KEY)
    if not isinstance(pebench, str):
        raise CheckoutError(f"{PEMBENCH_PROMPTS}: prompt_dict has no text under {PEBENCH_KEY!r}")
    _check_fields(pebench, JUDGE_FIELDS, f"prompt_dict[{PEBENCH_KEY!r}]")
    return ReferencePrompts(revision=revision(root), infer=infer, judge=judge, pebench=pebench)


def _assignments(path: Path, names: set[str]) -> dict[str, dict]:
    """The literal values of the module-level assignments ``names`` in ``path``."""
    if not path.is_file():
        raise CheckoutError(f"{path} is missing: is this a checkout of the K12Vista repository?")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise CheckoutError(f"{path} is over {MAX_FILE_BYTES} bytes")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
        raise CheckoutError(f"{path} cannot be parsed: {exc}") from exc
    found: dict[str, dict] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id in names:
                try:
                    value = ast.literal_eval(node.value)  # a literal only: nothing runs
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
                    raise CheckoutError(f"{path}: {target.id} is not a literal: {exc}") from exc
                if not isinstance(value, dict):
                    raise CheckoutError(f"{path}: {target.id} is not a dictionary")
                found[target.id] = value  # the last assignment wins, as when Python runs the file
    missing = names - found.keys()
    if missing:
        raise CheckoutError(f"{path} assigns no {', '.join(sorted(missing))}")
    return found


def _by_mode(table: dict, name: str, suffix: str, fields: frozenset[str]) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = {}
    for ref_mode, mode in MODES.items():
        key = ref_mode + suffix
        by_type = table.get(key)
        if not isinstance(by_type, dict):
            raise CheckoutError(f"{name} has no dictionary under {key!r}")
        result[mode] = {}
        for zh, qtype in QUESTION_TYPES.items():
            text = by_type.get(zh)
            if not isinstance(text, str):
                raise CheckoutError(f"{name}[{key!r}] has no text for {zh}")
            _check_fields(text, fields, f"{name}[{key!r}][{zh!r}]")
            result[mode][qtype] = text
    return result


def _check_fields(text: str, allowed: frozenset[str], where: str) -> None:
    try:
        unknown = template_fields(text) - allowed
    except CheckoutError as exc:
        raise CheckoutError(f"{where}: {exc}") from exc
    if unknown:
        raise CheckoutError(f"{where} uses {', '.join(sorted(unknown))}, which the reference does not fill")


def revision(root: Path) -> str:
    """The checkout's commit (from .git/HEAD and its ref, loose or packed, without
    running git), else ``sha256:`` of the two prompt files' bytes."""
    commit = _git_commit(root)
    if commit:
        return commit
    digest = hashlib.sha256()
    for relative in (VISTA_PROMPTS, PEMBENCH_PROMPTS):
        content = (root / relative).read_bytes()
        digest.update(str(len(content)).encode() + b"\0" + content)
    return "sha256:" + digest.hexdigest()


def _git_commit(root: Path) -> str:
    git = root / ".git"
    try:
        if git.is_file():  # a worktree or submodule: "gitdir: <path>"
            pointer = git.read_text(encoding="utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return ""
            git = (root / pointer.removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return ""
    if _SHA.fullmatch(head):
        return head  # a detached HEAD
    if not head.startswith("ref:"):
        return ""
    ref = head.removeprefix("ref:").strip()
    common = git
    commondir = git / "commondir"  # a worktree's refs live in the main repository
    if commondir.is_file():
        common = (git / commondir.read_text(encoding="utf-8").strip()).resolve()
    for base in (git, common):
        loose = base / ref
        if loose.is_file():
            value = loose.read_text(encoding="utf-8").strip()
            return value if _SHA.fullmatch(value) else ""
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text(encoding="utf-8").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and _SHA.fullmatch(parts[0]):
                return parts[0]
    return ""
