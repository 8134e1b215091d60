"""Knowledge points into core units: clustering per subject as a job, people's
merge/split/rename/move decisions surviving a re-clustering, paths as a hierarchy."""

import pytest

from annotation import knowledge
from annotation.models import CoreUnit, KnowledgePoint
from k12vista.jobs import execute_job
from k12vista.models import Job
from tests.annotation_factories import make_question

pytestmark = pytest.mark.django_db

NEAR_DUPLICATES = [
    ["一元二次方程的解法", "解一元二次方程", "一元二次方程求解"],
    ["勾股定理", "勾股定理的应用", "勾股定理及其逆定理"],
    ["三角形内角和", "三角形的内角和定理", "三角形内角和定理"],
]


@pytest.fixture
def points():
    found = {}
    for group in NEAR_DUPLICATES:
        for name in group:
            found[name] = KnowledgePoint.objects.create(subject="math", name=name)
    return found


def units_of(names):
    return {KnowledgePoint.objects.get(subject="math", name=n).core_unit_id for n in names}


def test_near_duplicate_points_end_up_in_the_same_unit(points, researcher):
    job = knowledge.start_clustering(by=researcher, subjects=["math"])
    assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.params["params"]["points_per_unit"] == 3.0  # the parameters are recorded
    [result] = job.result["subjects"]
    assert (result["points"], result["units"]) == (9, 3)
    for group in NEAR_DUPLICATES:
        assert len(units_of(group)) == 1


def test_decisions_survive_a_re_clustering(points, researcher):
    knowledge.cluster_subject("math", knowledge.ClusterParams())
    a = KnowledgePoint.objects.get(name="勾股定理").core_unit
    b = KnowledgePoint.objects.get(name="三角形内角和").core_unit
    merged = knowledge.merge_units(into=a, others=[b], by=researcher)
    knowledge.rename_unit(unit=merged, name="三角形", by=researcher)
    moved = KnowledgePoint.objects.get(name="解一元二次方程")
    knowledge.move_point(point=moved, unit=merged, by=researcher)
    knowledge.cluster_subject("math", knowledge.ClusterParams(points_per_unit=1))
    merged.refresh_from_db()
    assert merged.confirmed and merged.name == "三角形"
    assert set(merged.points.values_list("name", flat=True)) == {*NEAR_DUPLICATES[1], *NEAR_DUPLICATES[2],
                                                                 "解一元二次方程"}  # fmt: skip
    # The unpinned points were regrouped, one unit each with points_per_unit=1.
    assert len(units_of(["一元二次方程的解法", "一元二次方程求解"])) == 2


def test_splitting_a_unit_keeps_both_parts(points, researcher):
    knowledge.cluster_subject("math", knowledge.ClusterParams())
    unit = KnowledgePoint.objects.get(name="勾股定理").core_unit
    inverse = KnowledgePoint.objects.get(name="勾股定理及其逆定理")
    new = knowledge.split_unit(unit=unit, point_ids=[inverse.pk], name="勾股定理的逆定理", by=researcher)
    assert list(new.points.values_list("name", flat=True)) == ["勾股定理及其逆定理"]
    assert unit.points.count() == 2 and CoreUnit.objects.get(pk=unit.pk).confirmed
    with pytest.raises(knowledge.KnowledgeError):
        knowledge.split_unit(unit=unit, point_ids=list(unit.points.values_list("pk", flat=True)), name="x",
                             by=researcher)  # fmt: skip


def test_paths_become_a_hierarchy_and_only_leaves_are_clustered(researcher):
    make_question(researcher, knowledge_points=["拓展思维->数字谜->日期中的周期"])
    knowledge.cluster_subject("math", knowledge.ClusterParams())
    leaf = KnowledgePoint.objects.get(name="拓展思维->数字谜->日期中的周期")
    assert leaf.parent.name == "拓展思维->数字谜" and leaf.parent.parent.name == "拓展思维"
    assert leaf.core_unit.name == "日期中的周期"
    assert leaf.parent.core_unit is None


def test_a_move_across_subjects_is_refused(points, researcher):
    knowledge.cluster_subject("math", knowledge.ClusterParams())
    physics = CoreUnit.objects.create(subject="physics", name="力")
    with pytest.raises(knowledge.KnowledgeError):
        knowledge.move_point(point=KnowledgePoint.objects.first(), unit=physics, by=researcher)
