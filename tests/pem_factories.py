"""Small builders for PEBench tests: chains of thought with steps and labels,
inference runs with answers, and step-by-step scoring runs."""

import itertools
from collections.abc import Sequence

from inference.models import InferenceRun, JudgedStep, Judgment, ModelEndpoint, Response, ScoringRun
from pem.models import ChainOfThought, PEBenchItem, Step, StepLabel

_counter = itertools.count(1)

STEPS = ("由图可知 $AB=4$，$BC=3$。", "由勾股定理得 $AC=5$。", "所以周长为 $12$。")


def make_cot(*, steps: Sequence[str] = STEPS, key: str | None = None, **fields) -> ChainOfThought:
    """A chain of thought with its steps (math, grade 9, multiple choice unless told)."""
    n = next(_counter)
    fields.setdefault("origin", ChainOfThought.Origin.IMPORTED)
    fields.setdefault("subject", "math")
    fields.setdefault("grade", 9)
    fields.setdefault("stage", "middle")
    fields.setdefault("qtype", "multiple_choice")
    fields.setdefault("question_text", f"题目 {n}")
    fields.setdefault("response_text", "\n\n".join(steps))
    cot = ChainOfThought.objects.create(key=key or f"cot-{n:05d}", **fields)
    Step.objects.bulk_create(Step(cot=cot, position=i, text=text) for i, text in enumerate(steps, 1))
    return cot


def label_steps(
    cot: ChainOfThought, labels: Sequence[str], *, source: str = StepLabel.Source.PERSON, rater: str = "alice",
    user=None, explanation: str = "", **fields,
) -> list[StepLabel]:  # fmt: skip
    """One label per step, in order (None leaves a step unlabelled)."""
    made = []
    for step, label in zip(cot.steps.order_by("position"), labels, strict=False):
        if label is not None:
            made.append(StepLabel.objects.create(step=step, source=source, rater=rater, user=user, label=label,
                                                 explanation=explanation, **fields))  # fmt: skip
    return made


def add_to_pebench(*cots: ChainOfThought, build=None) -> None:
    PEBenchItem.objects.bulk_create(PEBenchItem(cot=cot, build=build) for cot in cots)


def make_endpoint(name: str = "student") -> ModelEndpoint:
    return ModelEndpoint.objects.create(name=name, base_url="http://127.0.0.1:8000/v1", model_name=name)


def make_run(endpoint: ModelEndpoint | None = None, mode: str = InferenceRun.Mode.STEP_BY_STEP) -> InferenceRun:
    endpoint = endpoint or make_endpoint(f"student-{next(_counter)}")
    return InferenceRun.objects.create(name=f"run of {endpoint.name}", endpoint=endpoint, mode=mode)


def answer(run: InferenceRun, question, raw_output: str, status: str = Response.Status.OK) -> Response:
    return Response.objects.create(run=run, question=question, status=status, raw_output=raw_output)


def make_scoring_run(run: InferenceRun, judge: ModelEndpoint | None = None) -> ScoringRun:
    judge = judge or make_endpoint(f"judge-{next(_counter)}")
    return ScoringRun.objects.create(
        name=f"{judge.name} on {run.name}", inference_run=run, judge=judge, method=ScoringRun.Method.JUDGE_STEPS
    )


def judge(scoring_run: ScoringRun, response: Response, steps: Sequence[tuple[str, str, str]]) -> Judgment:
    """An OK judgment of ``response`` whose judge split it into ``steps`` = (text, label, reason)."""
    judgment = Judgment.objects.create(
        scoring_run=scoring_run, response=response, status=Judgment.Status.OK, parse_status="ok",
        score=sum(label == "CS" for _, label, _ in steps) / len(steps),
    )  # fmt: skip
    JudgedStep.objects.bulk_create(
        JudgedStep(judgment=judgment, position=i, text=text, label=label, reason=reason)
        for i, (text, label, reason) in enumerate(steps, 1)
    )
    return judgment
