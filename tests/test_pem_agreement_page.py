"""The agreement page, the ratings-file API and ``manage.py agreement``."""

import io
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from pem.models import PEBenchItem
from tests.test_pem_reports import GOLD, MODEL, PERSON, chain, labels, scoring_run

pytestmark = pytest.mark.django_db
URL = "/pem/agreement/"
API = "/api/pem/agreement/"
RATINGS = "item,rater,label\ns1,a,CS\ns1,b,CS\ns2,a,CE\ns2,b,KAE\ns3,a,CS\ns3,b,CS\n"


@pytest.fixture
def labelled():
    """Two chains: everyone says CS everywhere on c1 and c2; a judge misses one step."""
    run = scoring_run("judge-a")
    c1, c2 = chain("c1", 3), chain("c2", 2)
    for cot in (c1, c2):
        n = cot.steps.count()
        labels(cot, PERSON, "alice", ["CS"] * n)
        labels(cot, PERSON, "amy", ["CS"] * n)
        labels(cot, GOLD, "gold", ["CS"] * n)
    labels(c1, MODEL, "judge-a", ["CS", "CE", "CS"], run)
    return c1, c2


# --- the page -------------------------------------------------------------------------------


def test_it_sends_anonymous_visitors_to_log_in(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_keeps_annotators_out(login, annotator):
    assert login(annotator).get(URL).status_code == 403


def test_it_serves_researchers_inspectors_and_administrators(login, researcher, inspector, administrator, labelled):
    for person in (researcher, inspector, administrator):
        response = login(person).get(URL)
        assert response.status_code == 200, person
        assert 'id="count-items" data-count="2"' in response.content.decode()


def test_it_refuses_to_change_anything(login, researcher):
    assert login(researcher).post(URL).status_code == 405


def test_it_shows_undefined_kappa_with_the_raw_agreement(login, researcher, labelled):
    body = login(researcher).get(URL).content.decode()
    # Everyone said CS: kappa is undefined, never 0 or 1, and the raw agreement (1) is beside it.
    row = re.search(r'<tr data-stat="cohen_kappa">.*?</tr>', body, re.S).group(0)
    assert 'class="undefined"' in row and 'data-observed="1.0000"' in row and "data-value=" not in row


def test_it_shows_each_judge_like_table_9_with_a_heatmap(login, researcher, labelled):
    body = login(researcher).get(URL).content.decode()
    row = re.search(r'<tr data-judge="judge-a".*?</tr>', body, re.S).group(0)
    # Gold CS on c1's three steps; the judge said CS, CE, CS: 2 of 3.
    assert re.search(r'data-stat="accuracy"><span data-value="0.6667">', row)
    heat = re.search(r'<details class="judge-confusion" data-judge="judge-a">.*?</details>', body, re.S).group(0)
    assert 'data-row="CS" data-column="CS" data-count="2"' in heat
    assert 'data-row="CS" data-column="CE" data-count="1"' in heat
    assert "style=" not in heat  # shades are SVG attributes, not inline styles


def test_it_limits_the_page_to_pebench_items(login, researcher, labelled):
    PEBenchItem.objects.create(cot=labelled[1])
    body = login(researcher).get(URL + "?scope=pebench").content.decode()
    assert 'id="count-items" data-count="1"' in body and 'id="count-steps" data-count="2"' in body
    # An unknown scope falls back to everything.
    assert 'id="count-items" data-count="2"' in login(researcher).get(URL + "?scope=nonsense").content.decode()


def test_it_renders_with_no_data_at_all(login, researcher):
    body = login(researcher).get(URL).content.decode()
    assert 'id="count-steps" data-count="0"' in body and 'id="judge-table"' in body


# --- the API --------------------------------------------------------------------------------


def api_as(user):
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def upload(text: str, name: str = "ratings.csv"):
    return SimpleUploadedFile(name, text.encode(), content_type="text/csv")


def test_the_api_returns_statistics_of_an_uploaded_file(researcher):
    response = api_as(researcher).post(API, {"file": upload(RATINGS), "reference": "a"}, format="multipart")
    assert response.status_code == 200
    data = response.json()
    assert data["items"] == 3 and data["raters"] == ["a", "b"]
    assert data["statistics"]["raw_agreement"]["successes"] == 2
    assert data["statistics"]["gwet_ac1"]["categories"] == 9
    assert data["against_reference"]["raters"][0]["rater"] == "b"


def test_the_api_takes_options(researcher):
    text = "item,rater,label\ns1,a,yes\ns1,b,no\ns2,a,yes\ns2,b,yes\n"
    response = api_as(researcher).post(
        API, {"file": upload(text), "categories": "yes, no", "scale": "ordinal"}, format="multipart"
    )
    assert response.status_code == 200
    assert response.json()["categories"] == ["yes", "no"] and response.json()["scale"] == "ordinal"


def test_the_api_lists_every_bad_line(researcher):
    bad = "item,rater,label\ns1,a,CS\ns1,a,CE\ns2,b,Nonsense\n"
    response = api_as(researcher).post(API, {"file": upload(bad)}, format="multipart")
    assert response.status_code == 400
    assert response.json() == {
        "errors": ["line 3: item 's1' already has a rating by 'a' (line 2)", "line 4: unknown step label 'Nonsense'"]
    }


def test_the_api_refuses_bad_options_and_a_missing_file(researcher):
    client = api_as(researcher)
    assert client.post(API, {"file": upload(RATINGS), "scale": "ratio"}, format="multipart").status_code == 400
    response = client.post(API, {"file": upload(RATINGS), "reference": "zed"}, format="multipart")
    assert response.status_code == 400 and "zed" in response.json()["errors"][0]
    assert client.post(API, {}, format="multipart").status_code == 400


def test_the_api_is_for_researchers_only(annotator, inspector):
    for person in (annotator, inspector):
        assert api_as(person).post(API, {"file": upload(RATINGS)}, format="multipart").status_code == 403
    assert api_as(None).post(API, {"file": upload(RATINGS)}, format="multipart").status_code in (401, 403)


def test_the_api_appears_in_the_openapi_schema(login, researcher):
    body = login(researcher).get("/api/schema/").content.decode()
    assert "/api/pem/agreement/" in body


# --- the command ----------------------------------------------------------------------------


def test_the_command_prints_statistics_as_json(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text(RATINGS, encoding="utf-8")
    out = io.StringIO()
    call_command("agreement", str(path), "--reference", "a", stdout=out)
    data = json.loads(out.getvalue())
    assert data["ratings"] == 6 and data["statistics"]["cohen_kappa"]["value"] is not None


def test_the_command_reads_jsonl_scores_with_a_scale(tmp_path):
    path = tmp_path / "scores.jsonl"
    rows = [{"item": f"r{i}", "rater": r, "score": s} for i, (a, b) in enumerate([(0, 0.5), (1, 1), (0.5, 0.5)])
            for r, s in (("x", a), ("y", b))]  # fmt: skip
    path.write_text("\n".join(json.dumps(row) for row in rows), encoding="utf-8")
    out = io.StringIO()
    call_command("agreement", str(path), "--scale", "interval", stdout=out)
    assert json.loads(out.getvalue())["statistics"]["krippendorff_alpha"]["metric"] == "interval"


def test_the_command_reports_bad_lines_and_unknown_items(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text(RATINGS + "s9,a,CS\n", encoding="utf-8")
    known = tmp_path / "items.txt"
    known.write_text("s1\ns2\ns3\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"line 8: unknown item 's9'"):
        call_command("agreement", str(path), "--items", str(known), stdout=io.StringIO())
    with pytest.raises(CommandError, match="cannot read"):
        call_command("agreement", str(tmp_path / "missing.csv"), stdout=io.StringIO())
