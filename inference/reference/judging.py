"""Judging in the reference protocol: the judge's prompt and message built the
way the reference's evaluate script and judge class build them, and its reply
read the way they read it (inference.parsing.reference). inference.scoring
calls these for a scoring run whose protocol is "reference", and the
score_replies command calls read_reply, so both read replies the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annotation.export import reference_record
from annotation.models import Question
from inference import client
from inference.models import PromptTemplate, ScoringRun
from inference.parsing import ParseResult
from inference.parsing import reference as reference_reader
from inference.reference import prompts as reference_prompts

# The reference judge asks again until a reply parses, 10 tries in all (retry_times=10).
JUDGE_TRIES = 10


def read_reply(method: str, text: str | None, record: Mapping[str, Any] | None = None) -> ParseResult:
    """A judge reply of ``method`` (a ScoringRun.Method) as the reference reads it; ``record`` is
    the question in the reference record format (the direct reader requires its ground truth)."""
    if method == ScoringRun.Method.JUDGE_DIRECT:
        return reference_reader.read_direct_judgment(text, record)
    return reference_reader.read_step_judgment(text)


def judge_record(question: Question) -> dict[str, Any]:
    """The question as the reference judge receives it: the studio's reference export record."""
    return reference_record(question)


def prompt_text(template: PromptTemplate, record: Mapping[str, Any], student_answer: str) -> str:
    """The reference's ``eval_prompt[...].format(...)``: the answer is the list of sub-answers
    and the solution as the record holds it, printed as Python prints them."""
    answer = record["format_answer"]
    return reference_prompts.render(
        template.user_template, question=record["question"], answer=answer["ground_truth"],
        solution=answer["format_solution"], student_answer=student_answer,
    )  # fmt: skip


def messages(template: PromptTemplate, record: Mapping[str, Any], student_answer: str,
             figures: list[dict[str, Any]]) -> list[dict]:  # fmt: skip
    """The reference judge's one user message, the figures (image parts, stored bytes) where
    ``<image>`` stands."""
    return client.reference_messages(prompt_text(template, record, student_answer), figures)
