"""Knowledge points into core units (paper, stage 3): near-duplicate points
("一元二次方程的解法" / "解一元二次方程") grouped per subject, then reviewed by people.

Clustering (the ``annotation.cluster_knowledge`` job, parameters recorded on
the job): each point is described by TF-IDF on character n-grams of its name
(with its path) and of the start of its questions' text, reduced by a truncated SVD; the points are
grouped by agglomerative clustering (cosine distance, average linkage) or, for
subjects of more than 4,000 points, MiniBatchKMeans, into about one unit per
``points_per_unit`` points. Nothing is downloaded.

People's decisions win: a point a person moved is *pinned* and a unit a person
merged, split or renamed is *confirmed* (all its points pinned). A re-clustering
only regroups unpinned points and replaces unconfirmed units.

Paths as some sources write them ("拓展思维->数字谜->日期中的周期") become a
hierarchy: each prefix is a point of its own and the parent of the next; only
the leaves are clustered.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Count, Q
from django.db.models.functions import Substr
from django.utils.translation import gettext

from annotation.job_shapes import ClusterJobParams, ClusterResult
from annotation.models import CoreUnit, KnowledgePoint, Question
from k12vista import job_text
from k12vista.jobs import Progress, job_handler, start_job
from k12vista.models import Job
from k12vista.vocabulary import Subject

PATH_SEPARATOR = re.compile(r"\s*(?:->|→|＞)\s*")
AGGLOMERATIVE_MAX = 4000  # above this many points in a subject, MiniBatchKMeans (memory grows with n²)


class KnowledgeError(ValueError):
    """A clustering or review action that cannot be done; the message says why."""


@dataclass
class ClusterParams:
    points_per_unit: float = 3.0
    ngram_min: int = 1
    ngram_max: int = 3
    svd_dims: int = 64
    questions_per_point: int = 3
    question_weight: float = 0.5
    seed: int = 0

    @classmethod
    def from_dict(cls, data: dict) -> ClusterParams:
        try:
            params = cls(**{k: type(getattr(cls, k))(v) for k, v in (data or {}).items() if hasattr(cls, k)})
        except (TypeError, ValueError):
            raise KnowledgeError(gettext("clustering parameters must be numbers")) from None
        if params.points_per_unit < 1 or not 1 <= params.ngram_min <= params.ngram_max <= 6 or params.svd_dims < 2:
            raise KnowledgeError(gettext("points per unit >= 1, 1 <= n-gram min <= max <= 6, SVD dimensions >= 2"))
        return params


# --- the hierarchy -------------------------------------------------------------------------


def path_parts(name: str) -> list[str]:
    return [part for part in PATH_SEPARATOR.split(name) if part]


def leaf_name(name: str) -> str:
    parts = path_parts(name)
    return parts[-1] if parts else name


def link_hierarchy(subject: str) -> int:
    """Makes every path prefix a point and links each point to its parent; returns links made."""
    linked = 0
    for point in KnowledgePoint.objects.filter(subject=subject).filter(
        Q(name__contains="->") | Q(name__contains="→") | Q(name__contains="＞")
    ):  # fmt: skip
        parts = path_parts(point.name)
        parent = None
        for depth in range(1, len(parts)):
            name = "->".join(parts[:depth])[:200]
            node, _ = KnowledgePoint.objects.get_or_create(subject=subject, name=name)
            if parent is not None and node.parent_id != parent.pk:
                KnowledgePoint.objects.filter(pk=node.pk).update(parent=parent)
            parent = node
        if parent is not None and point.parent_id != parent.pk:
            KnowledgePoint.objects.filter(pk=point.pk).update(parent=parent)
            linked += 1
    return linked


# --- clustering ----------------------------------------------------------------------------


def leaves(subject: str):
    return KnowledgePoint.objects.filter(subject=subject).annotate(n_children=Count("children")).filter(n_children=0)


def descriptions(points: list[KnowledgePoint], per_point: int) -> tuple[list[str], list[str]]:
    """Per point: its name text (leaf and path) and the start of a few of its questions."""
    through = Question.knowledge_points.through.objects.filter(knowledgepoint_id__in=[p.pk for p in points])
    texts: dict[int, list[str]] = defaultdict(list)
    rows = through.annotate(start=Substr("question__text", 1, 120)).order_by("knowledgepoint_id", "question_id")
    # "start" is annotated just above; the stubs' plugin does not see annotations on the auto-created through model.
    for point_id, start in rows.values_list("knowledgepoint_id", "start").iterator(chunk_size=5000):  # type: ignore[misc]
        if len(texts[point_id]) < per_point:
            texts[point_id].append(start or "")
    names = [f"{leaf_name(p.name)} {leaf_name(p.name)} {' '.join(path_parts(p.name)[:-1])}" for p in points]
    return names, [" ".join(texts.get(p.pk, [])) for p in points]


def embed(names: list[str], questions: list[str], params: ClusterParams) -> Any:
    """Row-normalized sparse TF-IDF: the name's character n-grams, then (weighted) its questions'."""
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    grams = (params.ngram_min, params.ngram_max)
    matrices = [TfidfVectorizer(analyzer="char", ngram_range=grams, sublinear_tf=True).fit_transform(names)]
    if any(questions) and params.question_weight > 0:
        vectorizer = TfidfVectorizer(analyzer="char", ngram_range=grams, sublinear_tf=True, max_features=50000)
        matrices.append(vectorizer.fit_transform(questions) * params.question_weight)
    return normalize(hstack(matrices).tocsr())


def reduce(vectors: Any, params: ClusterParams) -> np.ndarray:
    """A truncated SVD of the sparse vectors, normalized again (few iterations: enough to group names)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.preprocessing import normalize

    dims = min(params.svd_dims, vectors.shape[1] - 1, vectors.shape[0] - 1)
    if dims < 2:
        return vectors.toarray()
    return normalize(TruncatedSVD(n_components=dims, random_state=params.seed, n_iter=2).fit_transform(vectors))


def cluster_labels(vectors: np.ndarray, params: ClusterParams) -> tuple[np.ndarray, str]:
    n = len(vectors)
    k = max(1, min(n, math.ceil(n / params.points_per_unit)))
    if n < 2 or k == n:
        return np.arange(n), "none"
    if n <= AGGLOMERATIVE_MAX:
        from sklearn.cluster import AgglomerativeClustering

        model = AgglomerativeClustering(n_clusters=k, metric="cosine", linkage="average")
        return model.fit_predict(vectors), "agglomerative"
    from sklearn.cluster import MiniBatchKMeans

    model = MiniBatchKMeans(n_clusters=k, random_state=params.seed, batch_size=2048, n_init=3, max_iter=50)
    return model.fit_predict(vectors), "minibatch_kmeans"


def cluster_subject(subject: str, params: ClusterParams, *, job: Job | None = None) -> dict:
    """Regroups the subject's unpinned leaf points; pinned points and confirmed units stay."""
    link_hierarchy(subject)
    points = list(leaves(subject).filter(unit_pinned=False).order_by("id"))
    result = {"subject": subject, "points": len(points), "units": 0, "method": "none",
              "pinned": KnowledgePoint.objects.filter(subject=subject, unit_pinned=True).count()}  # fmt: skip
    labels = np.array([], dtype=int)
    vectors = None
    if points:
        names, questions = descriptions(points, params.questions_per_point)
        vectors = reduce(embed(names, questions, params), params)
        labels, result["method"] = cluster_labels(vectors, params)
    with transaction.atomic():
        KnowledgePoint.objects.filter(subject=subject, unit_pinned=False).update(core_unit=None)
        CoreUnit.objects.filter(subject=subject, confirmed=False).delete()
        members: dict[int, list[int]] = defaultdict(list)
        for index, label in enumerate(labels):
            members[int(label)].append(index)
        units = []
        for label in sorted(members):
            indexes = members[label]
            assert vectors is not None  # there are labels only when there were points, and so vectors
            rows = vectors[indexes]
            # The unit is named after the member nearest its centre (ties: the shortest name).
            closeness = rows @ rows.mean(axis=0)
            best = max(range(len(indexes)), key=lambda j: (float(closeness[j]), -len(points[indexes[j]].name)))
            units.append(CoreUnit(subject=subject, name=leaf_name(points[indexes[best]].name)[:200], job=job))
        CoreUnit.objects.bulk_create(units)
        for unit, label in zip(units, sorted(members), strict=True):
            KnowledgePoint.objects.filter(pk__in=[points[i].pk for i in members[label]]).update(core_unit=unit)
    result["units"] = len(units) if points else 0
    return result


def start_clustering(*, by: Any, subjects: list[str] | None = None, params: ClusterParams | None = None) -> Job:
    chosen = bool(subjects)
    subjects = subjects or list(Subject.values)
    unknown = set(subjects) - set(Subject.values)
    if unknown:
        raise KnowledgeError(gettext("unknown subjects: %(subjects)s") % {"subjects": ", ".join(sorted(unknown))})
    # Clustering nothing would "succeed" with 0 units and no warning (issue 29): refused before a job. Without a
    # choice, the subjects that have knowledge points; a chosen subject without any is named.
    having = set(KnowledgePoint.objects.filter(subject__in=subjects).values_list("subject", flat=True).distinct())
    empty = [subject for subject in subjects if subject not in having]
    if not having or (empty and chosen):
        raise KnowledgeError(
            gettext("no knowledge points to cluster in %(subjects)s; import questions with knowledge points first")
            % {"subjects": ", ".join(empty or subjects)}
        )
    subjects = [subject for subject in subjects if subject in having]
    params = params or ClusterParams()
    return start_job(kind="annotation.cluster_knowledge", user=by,
                     params={"subjects": subjects, "params": asdict(params)},
                     title=job_text.title("cluster_knowledge", subjects=", ".join(subjects)))  # fmt: skip


@job_handler("annotation.cluster_knowledge", queue=Job.Queue.CPU, params=ClusterJobParams, result=ClusterResult)
def cluster_job(job: Job, progress: Progress) -> dict:
    params = ClusterParams.from_dict(job.params.get("params") or {})
    subjects = job.params.get("subjects") or list(Subject.values)
    results = []
    for done, subject in enumerate(subjects):
        progress(done, len(subjects))
        results.append(cluster_subject(subject, params, job=job))
    progress(len(subjects), len(subjects))
    return {"subjects": results, "params": asdict(params)}


# --- people's decisions ----------------------------------------------------------------------


def _confirm(*units: CoreUnit) -> None:
    """A unit a person touched is theirs: it and its points survive re-clustering."""
    ids = [u.pk for u in units]
    CoreUnit.objects.filter(pk__in=ids).update(confirmed=True)
    KnowledgePoint.objects.filter(core_unit_id__in=ids).update(unit_pinned=True)


@transaction.atomic
def rename_unit(*, unit: CoreUnit, name: str, by: Any) -> CoreUnit:
    name = name.strip()
    if not name:
        raise KnowledgeError(gettext("a core unit needs a name"))
    CoreUnit.objects.filter(pk=unit.pk).update(name=name[:200])
    _confirm(unit)
    unit.refresh_from_db()
    return unit


@transaction.atomic
def merge_units(*, into: CoreUnit, others: list[CoreUnit], by: Any) -> CoreUnit:
    others = [u for u in others if u.pk != into.pk]
    if not others:
        raise KnowledgeError(gettext("choose another unit to merge into this one"))
    if any(u.subject != into.subject for u in others):
        raise KnowledgeError(gettext("only units of the same subject can be merged"))
    KnowledgePoint.objects.filter(core_unit__in=others).update(core_unit=into)
    CoreUnit.objects.filter(pk__in=[u.pk for u in others]).delete()
    _confirm(into)
    return into


@transaction.atomic
def split_unit(*, unit: CoreUnit, point_ids: list[int], name: str, by: Any) -> CoreUnit:
    """The chosen points leave ``unit`` for a new unit called ``name``."""
    chosen = KnowledgePoint.objects.filter(core_unit=unit, pk__in=point_ids)
    first = chosen.first()
    if first is None or chosen.count() == unit.points.count():
        raise KnowledgeError(gettext("choose some, not all, of the unit's points to split off"))
    new = CoreUnit.objects.create(subject=unit.subject, name=(name.strip() or leaf_name(first.name))[:200])
    chosen.update(core_unit=new)
    _confirm(unit, new)
    return new


@transaction.atomic
def move_point(*, point: KnowledgePoint, unit: CoreUnit, by: Any) -> KnowledgePoint:
    if point.subject != unit.subject:
        raise KnowledgeError(gettext("a point can only move to a unit of its own subject"))
    old = point.core_unit_id
    KnowledgePoint.objects.filter(pk=point.pk).update(core_unit=unit, unit_pinned=True)
    _confirm(unit)
    if old and not KnowledgePoint.objects.filter(core_unit_id=old).exists():
        CoreUnit.objects.filter(pk=old).delete()
    point.refresh_from_db()
    return point


# --- the review screen -------------------------------------------------------------------------


def units_for_review(subject: str, *, query: str = "", examples: int = 2) -> Any:
    units = CoreUnit.objects.filter(subject=subject).annotate(n_points=Count("points"))
    if query:
        units = units.filter(Q(name__contains=query) | Q(points__name__contains=query)).distinct()
    return units.order_by("-confirmed", "-n_points", "name", "id")


def attach_members(units: list[CoreUnit], examples: int = 2) -> list[CoreUnit]:
    """Each unit's points and a few example questions, in two queries for the page."""
    points = KnowledgePoint.objects.filter(core_unit__in=units).order_by("name")
    by_unit: dict[int, list[KnowledgePoint]] = defaultdict(list)
    for point in points:
        assert point.core_unit_id is not None  # filtered on core_unit__in
        by_unit[point.core_unit_id].append(point)
    through = Question.knowledge_points.through.objects.filter(knowledgepoint__core_unit__in=units)
    found: dict[int, list[tuple[str, str]]] = defaultdict(list)
    rows = through.order_by("knowledgepoint__core_unit_id", "question_id").values_list(
        "knowledgepoint__core_unit_id", "question__hash_id", "question__text"
    )
    for unit_id, hash_id, text in rows[: 50 * len(units)]:
        if len(found[unit_id]) < examples and hash_id not in {h for h, _t in found[unit_id]}:
            found[unit_id].append((hash_id, text[:160]))
    for unit in units:
        # For the page; no fields of the model.
        unit.members = by_unit.get(unit.pk, [])  # type: ignore[attr-defined]
        unit.examples = found.get(unit.pk, [])  # type: ignore[attr-defined]
    return units
