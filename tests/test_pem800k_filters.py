"""The four PEM-800K filters and their funnel."""

import json

import pytest

from bench.generate import iter_pem
from pem.models import FilteredChain, StepLabel
from pem.training import filters, pem800k_import
from tests.pem_factories import label_steps, make_cot

pytestmark = pytest.mark.django_db

IMPORTED = StepLabel.Source.IMPORTED
STEPS = ("由图可知 $AB=4$。", "由勾股定理得 $AC=5$。", "所以答案为 12。")


def chain(question: str, model: str, labels=("CS", "CS", "CS"), *, explanation="理由", steps=STEPS, **fields):
    fields.setdefault("reference_answer", "12")
    cot = make_cot(key=f"{question}:{model}:{labels}:{steps[0]}", model_name=model, steps=steps, **fields)
    label_steps(cot, labels, source=IMPORTED, rater="pem", explanation=explanation)
    return cot


def run(params=None, user=None):
    filter_run = filters.start_filter_run(source=IMPORTED, rater="pem", params=params, user=user)
    filters.run_filters(filter_run)
    filter_run.refresh_from_db()
    return filter_run


def removed(filter_run, cot):
    row = FilteredChain.objects.get(run=filter_run, cot=cot)
    return row.removed_by, row.reason


def test_it_removes_each_bad_chain_at_the_first_filter_it_fails(researcher):
    good = [chain("q1", f"m{i}") for i in range(3)]
    unlabelled = chain("q1", "m4", ("CS", "CS", None))
    mismatch = make_cot(key="q1:mm", model_name="m5", steps=STEPS, response_text="别的文字", reference_answer="12")
    label_steps(mismatch, ("CS", "CS", "CS"), source=IMPORTED, rater="pem")
    no_reason = chain("q1", "m6", ("CS", "CE", "CS"), explanation="")
    contradiction = chain(
        "q1", "m7", steps=(*STEPS[:2], "所以答案为 13。"), response_text="\n\n".join((*STEPS[:2], "所以答案为 13。"))
    )
    thin = [chain("q2", "m1"), chain("q2", "m2"), chain("q2", "m2", ("CS", "CE", "CS"))]
    filter_run = run(user=researcher)
    assert {removed(filter_run, c) for c in good} == {("", "")}
    assert removed(filter_run, unlabelled) == ("format", "unlabelled_steps")
    assert removed(filter_run, mismatch) == ("format", "text_mismatch")
    assert removed(filter_run, no_reason) == ("consistency", "error_without_reason")
    assert removed(filter_run, contradiction) == ("consistency", "answer_contradicts_labels")
    assert {removed(filter_run, c) for c in thin} == {("coverage", "fewer_models")}  # two models only
    funnel = filter_run.funnel
    assert funnel["input"]["chains"] == 10 and funnel["input"]["steps"] == 30
    assert funnel["format"]["chains"] == 2 and funnel["format"]["reasons"] == {
        "unlabelled_steps": 1,
        "text_mismatch": 1,
    }
    assert funnel["consistency"]["chains"] == 2 and funnel["coverage"]["chains"] == 3
    assert funnel["kept"]["chains"] == 3 == filter_run.kept and funnel["coverage"]["remaining_chains"] == 3
    assert funnel["coverage"]["by_label"]["CE"] == 1 and funnel["kept"]["by_subject"]["math"]["steps"] == 9
    assert filter_run.params["coverage"]["min_models"] == 3  # every threshold is recorded


def test_it_balances_categories_to_the_target_with_a_seed(tmp_path):
    path = tmp_path / "pem.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in iter_pem(0.0003, 5)))
    pem800k_import.import_pem800k(path=path, name="pem")
    params = {"balance": {"target": {"correct": 1, "CE": 1}, "seed": 7}, "coverage": {"min_models": 1}}
    first, again, other = run(params), run(params), run({**params, "balance": {**params["balance"], "seed": 8}})
    kept = FilteredChain.objects.filter(run=first, removed_by="")
    by_category = {c: kept.filter(category=c).count() for c in ("correct", "CE")}
    assert by_category["correct"] == by_category["CE"] > 0 and kept.count() == 2 * by_category["CE"]
    assert first.funnel["balance"]["reasons"]["not_in_target"] > 0
    ids = set(kept.values_list("cot_id", flat=True))
    assert ids == set(FilteredChain.objects.filter(run=again, removed_by="").values_list("cot_id", flat=True))
    assert ids != set(FilteredChain.objects.filter(run=other, removed_by="").values_list("cot_id", flat=True))


def test_it_refuses_unknown_parameters():
    with pytest.raises(filters.FilterError):
        filters.clean_params({"coverage": {"min_model": 3}})
    with pytest.raises(filters.FilterError):
        filters.clean_params({"balance": {"target": {"XX": 1}}})
    assert filters.balance_quotas({"correct": 100, "CE": 10}, {"correct": 0.8, "CE": 0.2}) == {"correct": 40, "CE": 10}
