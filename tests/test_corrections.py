"""Correcting a released question on its own path (issue 29): opened by a researcher or inspector,
fixed by an annotator, checked by one inspector, carried with its diff by the next release; the
published release never changes."""

import pytest
from django.core.exceptions import PermissionDenied

from annotation import corrections, releases
from annotation.models import CandidateSet, Correction, Question, Release
from k12vista.jobs import execute_job
from k12vista.models import Job
from k12vista.roles import Role
from tests.annotation_factories import make_question
from tests.conftest import make_person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("tmp_media", "english")]


def build(candidate, user) -> Release:
    release = releases.start_release(candidate_set=candidate, by=user)
    assert execute_job(release.job_id) == Job.Status.SUCCEEDED, Job.objects.get(pk=release.job_id).error
    release.refresh_from_db()
    return release


@pytest.fixture
def v1(researcher):
    questions = [make_question(researcher) for _ in range(2)]
    Question.objects.update(status=Question.Status.AUDITED)
    candidate = CandidateSet.objects.create(name="draw", seed=1, bank_fingerprint="x")
    candidate.questions.set(questions)
    return releases.publish_release(release=build(candidate, researcher), by=researcher)


def released(v1):
    return Question.objects.filter(release_items__release=v1).order_by("hash_id").first()


def test_who_may_open_a_correction(v1, researcher, inspector, annotator, administrator):
    question = released(v1)
    for outsider in (annotator, administrator):
        with pytest.raises(PermissionDenied):
            corrections.open_correction(question=question, problem="答案错了", by=outsider)
    opened = corrections.open_correction(question=question, problem="答案错了", proposal="应为 C", by=inspector)
    assert (opened.state, opened.found_in, opened.opened_by) == ("open", v1, inspector)
    with pytest.raises(corrections.CorrectionError, match="under way already"):
        corrections.open_correction(question=question, problem="还有一处", by=researcher)


def test_only_a_released_question_is_corrected_here_and_a_reason_is_needed(v1, researcher):
    with pytest.raises(corrections.CorrectionError, match="no published release"):
        corrections.open_correction(question=make_question(researcher), problem="错", by=researcher)
    with pytest.raises(corrections.CorrectionError, match="what is wrong"):
        corrections.open_correction(question=released(v1), problem="  ", by=researcher)


def test_who_may_fix_and_check(v1, researcher, inspector, annotator):
    correction = corrections.open_correction(question=released(v1), problem="答案错了", by=inspector)
    with pytest.raises(PermissionDenied):
        corrections.fix_correction(correction=correction, changes={"answers": ["C"]}, by=researcher)
    with pytest.raises(corrections.CorrectionError, match="cannot be corrected: status"):
        corrections.fix_correction(correction=correction, changes={"status": "imported"}, by=annotator)
    with pytest.raises(corrections.CorrectionError, match="changes nothing"):
        corrections.fix_correction(correction=correction, changes={"answers": ["B"]}, by=annotator)
    fixed = corrections.fix_correction(correction=correction, changes={"answers": ["C"]}, by=annotator)
    assert fixed.changes == {"answers": {"before": ["B"], "after": ["C"]}}
    assert Question.objects.get(pk=correction.question_id).answers == ["B"]  # not in the bank before the check
    with pytest.raises(corrections.CorrectionError, match="nothing to fix"):
        corrections.fix_correction(correction=correction, changes={"answers": ["D"]}, by=annotator)
    with pytest.raises(PermissionDenied):
        corrections.check_correction(correction=correction, accept=True, by=annotator)
    with pytest.raises(corrections.CorrectionError, match="another inspector"):  # inspector opened it
        corrections.check_correction(correction=correction, accept=True, by=inspector)
    other = make_person("olga", Role.INSPECTOR)
    with pytest.raises(corrections.CorrectionError, match="still wrong"):
        corrections.check_correction(correction=correction, accept=False, by=other)
    back = corrections.check_correction(correction=correction, accept=False, note="选项也要改", by=other)
    assert back.state == "returned" and corrections.may_fix(annotator, back)
    corrections.fix_correction(correction=back, changes={"answers": ["C"], "text": "改过的题干"}, by=annotator)
    accepted = corrections.check_correction(correction=back, accept=True, by=other)
    question = Question.objects.get(pk=correction.question_id)
    assert accepted.state == "accepted" and (question.answers, question.text) == (["C"], "改过的题干")
    assert question.edits.filter(field="answers", user=annotator, note__contains=f"correction #{back.pk}").exists()


def test_a_fix_made_on_an_older_version_is_not_written(v1, researcher, inspector, annotator):
    from annotation import services

    correction = corrections.open_correction(question=released(v1), problem="答案错了", by=researcher)
    corrections.fix_correction(correction=correction, changes={"answers": ["C"]}, by=annotator)
    question = Question.objects.get(pk=correction.question_id)
    services.edit_question(question=question, changes={"source": "另一处修改"}, user=researcher,
                           expected_version=question.version)  # fmt: skip
    with pytest.raises(corrections.CorrectionError, match="changed since the fix"):
        corrections.check_correction(correction=correction, accept=True, by=inspector)
    assert Question.objects.get(pk=question.pk).answers == ["B"]


def test_the_next_release_carries_the_diff_and_the_published_one_never_changes(v1, researcher, inspector, annotator):
    question = released(v1)
    before_item = v1.items.get(hash_id=question.hash_id).content
    correction = corrections.open_correction(question=question, problem="答案应为 C", by=researcher)
    corrections.fix_correction(correction=correction, changes={"answers": ["C"]}, by=annotator)
    corrections.check_correction(correction=correction, accept=True, by=inspector)

    v1.refresh_from_db()
    assert v1.items.get(hash_id=question.hash_id).content == before_item and "corrections" in v1.summary
    assert v1.summary["corrections"] == []  # built before the correction: its notes stay as published
    v2 = build(v1.candidate_set, researcher)
    assert v2.items.get(hash_id=question.hash_id).content["answers"] == ["C"]
    assert v2.summary["corrections"] == [{
        "correction": correction.pk, "hash_id": question.hash_id, "field": "answers", "before": ["B"],
        "after": ["C"], "why": "答案应为 C", "opened_by": "rita", "fixed_by": "alice", "checked_by": "ivan",
    }]  # fmt: skip
    releases.publish_release(release=v2, by=researcher)
    v3 = build(v1.candidate_set, researcher)
    assert v3.summary["corrections"] == []  # carried once, by the release that published it
    assert releases.compare_releases(v1, v2)["changed"][0]["fields"][0]["field"] == "answers"


def token_client(user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_the_whole_path_through_the_api_with_tokens(v1, researcher, inspector, annotator):
    question = released(v1)
    rita, alice, ivan = token_client(researcher), token_client(annotator), token_client(inspector)
    assert (
        alice.post("/api/corrections/", {"hash_id": question.hash_id, "problem": "错"}, format="json").status_code
        == 403
    )
    refused = rita.post("/api/corrections/", {"hash_id": question.hash_id, "problem": "x", "proposl": "y"},
                        format="json")  # fmt: skip
    assert refused.status_code == 400 and "proposl" in refused.json()
    opened = rita.post("/api/corrections/", {"hash_id": question.hash_id, "problem": "答案应为 C", "proposal": "C"},
                       format="json")  # fmt: skip
    assert opened.status_code == 201, opened.json()
    pk = opened.json()["id"]
    assert [c["id"] for c in alice.get("/api/corrections/?state=open").json()["results"]] == [pk]
    assert rita.post(f"/api/corrections/{pk}/fix/", {"changes": {"answers": ["C"]}}, format="json").status_code == 403
    bad = alice.post(f"/api/corrections/{pk}/fix/", {"changes": {"grade": 99}}, format="json")
    assert bad.status_code == 400 and bad.json()["changes"]["grade"]
    fixed = alice.post(f"/api/corrections/{pk}/fix/", {"changes": {"answers": ["C"]}}, format="json")
    assert fixed.status_code == 200 and fixed.json()["state"] == "fixed", fixed.json()
    checked = ivan.post(f"/api/corrections/{pk}/check/", {"decision": "accept"}, format="json")
    assert checked.status_code == 200 and checked.json()["state"] == "accepted", checked.json()
    v2 = build(v1.candidate_set, researcher)
    rows = rita.get(f"/api/benchmark/releases/v{v2.version}/corrections/").json()
    assert [(r["hash_id"], r["field"], r["before"], r["after"]) for r in rows] == [
        (question.hash_id, "answers", ["B"], ["C"])
    ]
    assert rita.get(f"/api/benchmark/releases/v{v1.version}/corrections/").json() == []
    assert alice.get(f"/api/benchmark/releases/v{v2.version}/corrections/").status_code == 403


def test_the_pages_refuse_the_wrong_role_and_hostile_input(v1, researcher, inspector, annotator, login):
    from django.urls import reverse

    question = released(v1)
    url = reverse("annotation:correction_open", args=[question.hash_id])
    assert login(annotator).post(url, {"problem": "错"}).status_code == 403
    page = login(researcher).get(reverse("annotation:question_detail", args=[question.hash_id]))
    assert b'id="open-correction"' in page.content
    login(researcher).post(url, {"problem": "答案错了"})
    correction = Correction.objects.get()
    detail = reverse("annotation:correction", args=[correction.pk])
    assert b'id="fix-form"' in login(annotator).get(detail).content
    assert b'id="fix-form"' not in login(researcher).get(detail).content
    assert login(researcher).post(reverse("annotation:correction_fix", args=[correction.pk]),
                                  {"answers": "C"}).status_code == 403  # fmt: skip
    fix = reverse("annotation:correction_fix", args=[correction.pk])
    # Refused as the question editor refuses them: a line that is no option wipes nothing.
    for hostile in ({"options": "junk line only"}, {"options": "A. 1\njunk"}, {"answers": "\x00"}, {}):
        assert login(annotator).post(fix, hostile).status_code == 302
        correction.refresh_from_db()
        assert (correction.state, correction.changes) == ("open", {}), hostile
    # Read as the editor reads them: the full-width colon and the parenthesis are labels too.
    assert login(annotator).post(fix, {"options": "A：1\nB) 2"}).status_code == 302
    correction.refresh_from_db()
    assert correction.state == "fixed"
    assert correction.changes["options"]["after"] == [{"label": "A", "text": "1"}, {"label": "B", "text": "2"}]
    assert login(inspector).post(reverse("annotation:correction_check", args=[correction.pk]),
                                 {"decision": "maybe"}).status_code == 302  # fmt: skip
    assert login(annotator).get(reverse("annotation:corrections")).status_code == 200


def test_what_postgresql_cannot_store_is_refused_not_saved(v1, researcher, annotator):
    with pytest.raises(corrections.CorrectionError, match="NUL"):
        corrections.open_correction(question=released(v1), problem="错\x00", by=researcher)
    correction = corrections.open_correction(question=released(v1), problem="错", by=researcher)
    with pytest.raises(corrections.CorrectionError, match="NUL"):
        corrections.fix_correction(correction=correction, changes={"answers": ["C\x00"]}, by=annotator)
    assert Correction.objects.get().state == "open"


def test_a_fix_of_the_wrong_kind_is_refused_before_it_reaches_the_database(v1, researcher, annotator):
    correction = corrections.open_correction(question=released(v1), problem="错", by=researcher)
    wrong = ({"text": ["a list"]}, {"source": "长" * 301}, {"answers": [1]}, {"grade": 13}, {"difficulty": "x"},
             {"options": [{"label": ["A"], "text": {"x": 1}}]}, {"options": [{"label": "A", "text": 1}]},
             {"difficulty": True}, {"grade": "9"}, {"knowledge_points": [1]}, {"knowledge_points": "x"})  # fmt: skip
    for changes in wrong:
        with pytest.raises(corrections.CorrectionError) as refused:
            corrections.fix_correction(correction=correction, changes=changes, by=annotator)
        assert "not supported" not in str(refused.value), changes  # worded for people, not a Python TypeError
    assert Correction.objects.get().state == "open"


def test_a_hostile_fix_stored_earlier_is_refused_on_accept_not_a_500(v1, researcher, inspector, annotator):
    question = released(v1)
    correction = corrections.open_correction(question=question, problem="错", by=researcher)
    # As the fix of this kind was stored before validate() refused it.
    hostile = [{"label": ["A"], "text": {"x": 1}}]
    Correction.objects.filter(pk=correction.pk).update(
        state="fixed", fixed_by=annotator, base_version=question.version,
        changes={"options": {"before": question.options, "after": hostile}},
    )  # fmt: skip
    with pytest.raises(corrections.CorrectionError, match="options"):
        corrections.check_correction(correction=correction, accept=True, by=inspector)
    question.refresh_from_db()
    assert question.options != hostile


def test_the_validation_messages_read_in_chinese(v1, researcher, annotator):
    from django.utils import translation

    correction = corrections.open_correction(question=released(v1), problem="错", by=researcher)
    with translation.override("zh-hans"):
        with pytest.raises(corrections.CorrectionError, match="选项"):
            corrections.fix_correction(correction=correction, changes={"options": [{"label": 1}]}, by=annotator)
        with pytest.raises(corrections.CorrectionError, match="年级"):
            corrections.fix_correction(correction=correction, changes={"grade": 13}, by=annotator)


def test_the_correction_pages_read_in_chinese(v1, client, settings):
    from django.urls import reverse

    from tests.test_chinese_pages import read

    settings.LANGUAGE_CODE = "zh-hans"
    # People named as the Chinese pages test names them: a name is user content, not an English word.
    researcher, annotator = make_person("研究员小陈", Role.RESEARCHER), make_person("标注员小王", Role.ANNOTATOR)
    inspector = make_person("质检员小李", Role.INSPECTOR)
    question = released(v1)
    correction = corrections.open_correction(question=question, problem="答案错了", proposal="改为 C", by=researcher)
    corrections.fix_correction(correction=correction, changes={"answers": ["C"]}, by=annotator)
    other = make_person("质检员小刘", Role.INSPECTOR)
    corrections.check_correction(correction=correction, accept=False, note="还要改解析", by=other)
    corrections.fix_correction(correction=correction, changes={"answers": ["C"], "raw_solution": "改后"}, by=annotator)
    corrections.check_correction(correction=correction, accept=True, by=other)
    v2 = build(v1.candidate_set, researcher)
    pages = {
        researcher: [reverse("annotation:question_detail", args=[question.hash_id]), reverse("annotation:corrections"),
                     reverse("annotation:release", args=[v2.version])],
        annotator: [reverse("annotation:queue"), reverse("annotation:corrections")],
        inspector: [reverse("annotation:correction", args=[correction.pk])],
    }  # fmt: skip
    found = {}
    for person, paths in pages.items():
        client.force_login(person, backend="django.contrib.auth.backends.ModelBackend")
        for path in paths:
            response = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-hans")
            assert response.status_code == 200, path
            # "rita" made the fixture's questions: her name in their history is user content.
            words = sorted(set(read(response.content.decode()).found) - {"td rita"})
            if words:
                found[path] = words
    assert found == {}
    client.force_login(inspector, backend="django.contrib.auth.backends.ModelBackend")
    page = client.get(reverse("annotation:correction", args=[correction.pk])).content.decode()
    assert "修改前" in page
    assert "['C']" not in page and '<td class="after">C</td>' in page  # the value as read, not a Python list
    client.force_login(researcher, backend="django.contrib.auth.backends.ModelBackend")
    page = client.get(reverse("annotation:release", args=[v2.version]), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "<td>answers</td>" not in page and "<td>原始解析</td>" in page
    assert "['C']" not in page and '<td class="after">C</td>' in page
