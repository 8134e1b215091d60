from tests.annotation_factories import make_question


def test_it_lists_questions_with_filters_and_cursor_pages(api, researcher):
    math = [make_question() for _ in range(3)]
    make_question(subject="chemistry")
    client = api(researcher)
    first = client.get("/api/questions/", {"subject": "math", "page_size": 2}).json()
    assert [q["hash_id"] for q in first["results"]] == [q.hash_id for q in math[:2]]
    second = client.get(first["next"]).json()
    assert [q["hash_id"] for q in second["results"]] == [math[2].hash_id]
    assert second["next"] is None
    row = first["results"][0]
    assert row["stage"] == "middle" and row["figures"][0]["width"] == 400 and row["knowledge_points"] == ["平方根"]


def test_it_returns_one_question_by_hash(api, inspector):
    question = make_question(answers=[])
    data = api(inspector).get(f"/api/questions/{question.hash_id}/").json()
    assert data["answers"] == [] and {f["code"] for f in data["flags"]} == {"missing_answer"}


def test_it_keeps_annotators_out_of_the_question_api(api, annotator):
    question = make_question()
    client = api(annotator)
    assert client.get("/api/questions/").status_code == 403
    assert client.get(f"/api/questions/{question.hash_id}/").status_code == 403
