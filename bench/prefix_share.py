"""How much of a run's requests a server's prefix cache can reuse (vLLM's automatic prefix caching,
SGLang's radix cache): for each request, the longest common prefix with any earlier request of the
run, as a share of the request. Fixed instructions first and the question's own parts (subject,
question, figure) after make that share large; a subject or a figure before the instructions cuts
it to the system prompt.

    python -m bench.prefix_share [--questions 300] [--seed 0]

The requests are the studio's default prompts rendered over generated questions (bench.generate)
and built into chat messages as a run builds them (``client.build_messages``), each figure a
distinct image part. A request is measured as the text a server tokenises in order (system, then
the user message's parts; an image part counts as one 64-character marker, since a server caches
its tokens only after an identical prefix). Characters stand in for tokens: the cache works in
blocks of tokens, and a shared prefix in characters is a shared prefix in tokens up to the last
block. No database: only the prompts, the generator and the message builder."""

from __future__ import annotations

import argparse
import bisect
import hashlib
import os
import sys
from collections.abc import Iterable
from typing import Any

from bench.generate import make_question
from inference import client, default_prompts
from inference.default_prompts import PromptKind
from k12vista.vocabulary import QUESTION_TYPE_ZH, SUBJECT_ZH, QuestionType, Subject

# The prompts of a run, by the values they need beyond the question's.
KINDS = {
    PromptKind.ANSWER_DIRECT: {},
    PromptKind.ANSWER_STEP_BY_STEP: {},
    PromptKind.JUDGE_DIRECT: {"model_answer": "步骤1：……\n最终答案：B"},
    PromptKind.JUDGE_STEPS: {"model_answer": "步骤1：……\n最终答案：B"},
    PromptKind.SPLIT_STEPS: {"model_answer": "步骤1：……\n最终答案：B"},
}


def values_of(seed: int, index: int) -> tuple[str, dict[str, str], str]:
    """(question type, prompt values, figure marker) of generated question ``index``."""
    question = make_question(seed, index)
    answers = [str(answer) for answer in question.ground_truth]
    values = {
        "question": question.text, "options": "", "question_with_options": question.text,
        "subject": SUBJECT_ZH[Subject(question.subject)], "grade": str(question.grade),
        "reference_answer": default_prompts.BLANK_SEPARATOR.join(answers), "reference_answer_lines": "\n".join(answers),
        "reference_solution": "\n".join(question.solution_steps), "raw_solution": "\n".join(question.solution_steps),
        "caption": "", "question_type": QUESTION_TYPE_ZH[QuestionType(question.qtype)],
    }  # fmt: skip
    figure = "<image:" + hashlib.sha256(f"{seed}:{index}".encode()).hexdigest()[:56] + ">"
    return str(question.qtype), values, figure


def request_text(messages: list[dict[str, Any]]) -> str:
    """What a server tokenises, in order: each message's text, an image part as its marker."""
    pieces: list[str] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            pieces.append(content)
            continue
        pieces.extend(part["text"] if part["type"] == "text" else part["image_url"]["url"] for part in content)
    return "\x00".join(pieces)


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def prefix_share(requests: Iterable[str]) -> float:
    """Characters shared with the longest common prefix of an earlier request, over all characters.
    The earlier request sharing the longest prefix is a neighbour in sorted order, so each request
    is compared with two."""
    seen: list[str] = []
    shared = total = 0
    for text in requests:
        at = bisect.bisect_left(seen, text)
        best = max((common_prefix(text, seen[i]) for i in (at - 1, at) if 0 <= i < len(seen)), default=0)
        shared, total = shared + best, total + len(text)
        seen.insert(at, text)
    return shared / total if total else 0.0


def run_requests(kind: str, *, questions: int, seed: int) -> list[str]:
    """The requests of one run of ``kind`` over the first ``questions`` generated questions."""
    requests = []
    for index in range(questions):
        qtype, values, figure = values_of(seed, index)
        prompt = default_prompts.default_prompt(kind, qtype if "answer" in kind else None)
        system, user = default_prompts.render(prompt, **values, **KINDS[PromptKind(kind)])
        requests.append(request_text(client.build_messages(system=system, user=user, image_urls=[figure])))
    return requests


def shares(*, questions: int, seed: int) -> dict[str, float]:
    return {str(kind): prefix_share(run_requests(kind, questions=questions, seed=seed)) for kind in KINDS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")
    import django

    django.setup()  # the message builder's module reads the settings' names
    for kind, share in shares(questions=args.questions, seed=args.seed).items():
        print(f"{kind:24} shared prefix {share:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
