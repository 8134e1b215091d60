"""The blind rule everywhere: someone who reads every label by role (inspector, researcher and
admin at once) but holds an open labelling task on a PEBench item is that item's annotator
first. Every page, API route, download and stored file reachable with GET is walked as that
person, the routes enumerated by the URL resolver (so a route added later is walked too), and
none may show anyone else's label on the item."""

import io
import itertools
import zipfile
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from django.apps import apps
from django.db import models
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse

from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from pem import labelling, releases
from pem.models import LabellingTask, StepLabel
from review.models import Rating
from tests.conftest import make_person
from tests.pem_factories import add_to_pebench, label_steps, make_cot
from tests.review_factories import audit_of, three_inspectors

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media")]

# Distinctive reasons on every label of the item that is not hers: any of them on a response is a leak.
SECRETS = {
    "amy": "AMY-SECRET-vb88",
    "model": "MODEL-SECRET-qz41",
    "imported": "IMPORTED-SECRET-kp07",
    "gold": "GOLD-SECRET-tt19",
}
APPS = ("k12vista", "annotation", "inference", "pem", "review", "auth", "authtoken", "axes")
WORDS = ("csv", "json", "jsonl", "zip", "pdf", "png", "md", "txt")


@pytest.fixture(params=["every role", "inspector"])
def iris(request, annotator, other_annotator, inspector, researcher):
    """Iris reads every label by role (inspector, researcher and admin; or inspector only) but holds
    an open task on a PEBench item in her audit queue; the item carries amy's submitted labels and
    model, imported and gold labels. A PEBench release (a file holding the labels) exists, built by
    a researcher before."""
    cot = make_cot(key="blind-item")
    add_to_pebench(cot)
    labelling.open_labelling(cot)
    label_steps(cot, ["CS", "KAE", "CS"], source=StepLabel.Source.MODEL, rater="judge", explanation=SECRETS["model"])
    label_steps(cot, ["CS", "HE", "CS"], source=StepLabel.Source.IMPORTED, rater="pebench-release",
                explanation=SECRETS["imported"])  # fmt: skip
    label_steps(cot, ["CS", "QM", "CS"], source=StepLabel.Source.GOLD, rater="someone", explanation=SECRETS["gold"])
    amy_task = labelling.next_task(other_annotator)
    draft = {"1": {"label": "CS"}, "2": {"label": "LRE", "reason": SECRETS["amy"]}, "3": {"label": "CS"}}
    labelling.submit(labelling.save_draft(task=amy_task, draft=draft, expected_version=0))
    release = releases.start_release(by=researcher)
    assert execute_job(release.job_id) == Job.Status.SUCCEEDED
    readers = [Role.INSPECTOR, Role.RESEARCHER, Role.ADMIN] if request.param == "every role" else [Role.INSPECTOR]
    person = make_person("iris", Role.ANNOTATOR, *readers)
    task = LabellingTask.objects.create(cot=cot, annotator=person)
    audit = audit_of({"kind": "pebench"}, inspectors=[person, *three_inspectors(inspector)[:2]], per_stratum=5)
    assert Rating.objects.filter(item__audit=audit, item__cot=cot, inspector=person).exists()
    return person, cot, task


def leaks(content: bytes) -> list[str]:
    texts = [content]
    if content.startswith(b"PK"):
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            texts += [archive.read(name) for name in archive.namelist()]
    return [who for who, secret in SECRETS.items() if any(secret.encode() in text for text in texts)]


def routes(patterns=None, namespace: str = "") -> Iterator[tuple[str, URLPattern]]:
    """Every named route, with its namespaced name, from the resolver itself."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from routes(pattern.url_patterns, inner)
        elif pattern.name:
            yield namespace + pattern.name, pattern


def stored_names() -> set[str]:
    """Every stored file: all under MEDIA_ROOT, and all the database names (file fields, paths jobs wrote)."""
    from pathlib import Path

    from django.conf import settings

    root = Path(settings.MEDIA_ROOT)
    names = {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}
    for model in apps.get_models():
        for field in model._meta.get_fields():
            if isinstance(field, models.FileField):
                names.update(n for n in model.objects.values_list(field.name, flat=True) if n)
    for result in Job.objects.values_list("result", flat=True):
        if isinstance(result, dict):
            names.update(v for v in result.values() if isinstance(v, str) and "/" in v)
    for model in apps.get_models():
        for field in model._meta.get_fields():
            if isinstance(field, models.CharField) and field.name in ("path", "file"):
                names.update(n for n in model.objects.values_list(field.name, flat=True) if n)
    return names


def candidates() -> dict[str, list]:
    ids: set[int] = set()
    for model in apps.get_models():
        if model._meta.app_label in APPS and model.objects.count() <= 50:
            ids.update(pk for pk in model.objects.values_list("pk", flat=True) if isinstance(pk, int))
    hash_ids = list(apps.get_model("annotation", "Question").objects.values_list("hash_id", flat=True)[:20])
    keys = list(apps.get_model("pem", "ChainOfThought").objects.values_list("key", flat=True))
    return {"int": sorted(ids), "str": [*WORDS, *hash_ids, *keys, *APPS], "path": sorted(stored_names())}


def urls_of(name: str, pattern: URLPattern, values: dict[str, list]) -> Iterator[str]:
    converters = getattr(pattern.pattern, "converters", {})
    params = list(converters) or list(pattern.pattern.regex.groupindex)
    if not params:
        yield reverse(name)
        return
    choices = []
    for param in params:
        kind = type(converters.get(param)).__name__
        choices.append(values["int"] if kind == "IntConverter" else values["path"] + [str(i) for i in values["int"]]
                       if kind == "PathConverter" else values["str"])  # fmt: skip
    for combo in itertools.product(*choices):
        try:
            yield reverse(name, kwargs=dict(zip(params, combo, strict=True)))
        except NoReverseMatch:
            continue


def query_names() -> set[str]:
    """Every GET parameter a view or API reads by name, from the source (so a new one is tried too)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    pattern = re.compile(r"""(?:request\.GET|query_params)(?:\.get\(|\[)["']([A-Za-z_]+)["']""")
    return {
        name for app in APPS[:5] for path in (root / app).rglob("*.py") for name in pattern.findall(path.read_text())
    }


def body(response) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return response.content


# Every route with every id and query parameter the code reads: thousands of requests, 2-4 minutes alone on 2 cores,
# past the suite's 300 s under load.
@pytest.mark.timeout(900)
def test_no_route_shows_her_anyone_elses_label_on_the_item(iris, client, monkeypatch):
    from k12vista.throttling import FailOpenUserRateThrottle

    # Thousands of requests in a minute: the API's rate limit would answer 429 and hide routes.
    monkeypatch.setattr(FailOpenUserRateThrottle, "rate", "1000000/min", raising=False)
    person, cot, task = iris
    client.force_login(person, backend="django.contrib.auth.backends.ModelBackend")
    client.raise_request_exception = False
    values = candidates()
    assert any(name.startswith("exports/pebench-") or "release" in name for name in values["path"])
    names = query_names()
    assert {"old", "new", "after"} <= names
    queries = [urlencode(dict.fromkeys(names, str(i))) for i in values["int"][:2]]
    found, walked, shown, statuses = [], 0, set(), set()
    for name, pattern in routes():
        if name.endswith(("logout", "password_set")):
            continue
        for url in urls_of(name, pattern, values):
            response = client.get(url)
            walked += 1
            statuses.add(response.status_code)
            if response.status_code == 200:
                shown.add(name)
            found += [(url, who) for who in leaks(body(response))]
            if response.status_code in (200, 400):  # and with every query parameter the code reads
                for query in queries:
                    walked += 1
                    found += [(f"{url}?{query}", who) for who in leaks(body(client.get(f"{url}?{query}")))]
    assert found == []
    assert 429 not in statuses and max(statuses) < 500
    # The walk reached the item where it is shown: her labelling page, the audit's pages, the labels API.
    assert {"pem:label_task", "review:rate", "review:item", "pem_api:item_labels"} <= shown, shown
    assert walked > 500
