"""Messages in the reader's language (issue 25 fault 8, issue 29): what the studio stores is a code with
parameters, worded when shown, in pages and in the API (whose Accept-Language is honoured), so a job started
from the Chinese pages reads in English to an English reader and the other way round."""

import importlib
import json

import pytest
from django.apps import apps
from django.conf import settings
from django.utils import translation
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from k12vista import job_text
from k12vista.models import Job
from k12vista.roles import Role
from pem import agreement_store
from pem import jobs as pem_jobs
from tests.conftest import make_person
from tests.test_pem800k_train import export  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher(db):
    return make_person("rita", Role.RESEARCHER, Role.INSPECTOR, Role.ADMIN)


def api(user, language=None):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    if language:
        client.defaults["HTTP_ACCEPT_LANGUAGE"] = language
    return client


def test_a_job_title_reads_in_each_readers_language(researcher, client):
    with translation.override("zh-hans"):  # started from the Chinese pages
        job = pem_jobs.start_build(target_size=40, min_steps=2, strata=[], seed=7, user=researcher)
        agreement = agreement_store.start_agreement(scope="all", user=researcher)
    job.refresh_from_db()
    assert job.title == "Build PEBench (40 items, seed 7)"  # the English copy, for logs and the admin
    with translation.override("en"):
        assert job.display_title == "Build PEBench (40 items, seed 7)"
        assert agreement.display_title == "Agreement report (all chains of thought)"
    with translation.override("zh-hans"):
        assert job.display_title == "构建 PEBench（40 条，种子 7）"
        assert agreement.display_title == "一致性报告（全部思维链）"
    # On the pages, by the reader's cookie.
    client.force_login(researcher)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    assert "Agreement report (all chains of thought)" in client.get(f"/jobs/{agreement.pk}/").content.decode()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    assert "一致性报告（全部思维链）" in client.get(f"/jobs/{agreement.pk}/").content.decode()


def test_the_api_answers_in_the_language_accept_language_asks_for(researcher):
    with translation.override("en"):
        job = agreement_store.start_agreement(scope="all", user=researcher)
    assert (
        api(researcher, "en-US,en;q=0.9").get(f"/api/jobs/{job.pk}/").json()["title"]
        == "Agreement report (all chains of thought)"
    )
    chinese = api(researcher, "zh-CN,zh;q=0.9").get(f"/api/jobs/{job.pk}/")
    assert chinese.json()["title"] == "一致性报告（全部思维链）"
    assert chinese["Content-Language"] == "zh-hans"
    # No Accept-Language: the studio's own language, Chinese; one it does not speak: the same.
    assert api(researcher).get(f"/api/jobs/{job.pk}/").json()["title"] == "一致性报告（全部思维链）"
    assert api(researcher, "fr-FR").get(f"/api/jobs/{job.pk}/").json()["title"] == "一致性报告（全部思维链）"
    # DRF's own messages follow it too, a missing object included (Django words that one in English only).
    assert api(researcher, "zh-CN").get("/api/jobs/999999/").json()["detail"] == "未找到。"
    assert api(researcher, "en").get("/api/jobs/999999/").json()["detail"] == "Not found."


def test_a_titles_codes_are_worded_not_shown_raw(researcher):
    from annotation.knowledge import start_clustering
    from tests.annotation_factories import make_question

    make_question(hash_id="k1", subject="math", knowledge_points=["勾股定理"])
    make_question(hash_id="k2", subject="physics", knowledge_points=["牛顿第二定律"])
    with translation.override("zh-hans"):
        job = start_clustering(subjects=["math", "physics"], by=researcher)
    job.refresh_from_db()
    assert job.title == "Cluster knowledge points: Mathematics, Physics"
    with translation.override("zh-hans"):
        assert job.display_title == "聚类知识点：数学、物理"
    with translation.override("en"):
        assert job.display_title == "Cluster knowledge points: Mathematics, Physics"
        # A title stored before the wording (the code as its parameter) reads the same.
        assert job_text.title_text("cluster_knowledge", {"subjects": "math"}) == "Cluster knowledge points: Mathematics"
        assert job_text.title_text("agreement", {"scope": "pebench"}) == "Agreement report (PEBench)"


def test_every_job_title_has_its_chinese_wording():
    with translation.override("zh-hans"):
        untranslated = [code for code, template in job_text.TITLES.items() if translation.gettext(template) == template]
    assert untranslated == []


def test_titles_stored_worded_are_read_back_into_codes(researcher):
    # Rows made before the codes hold the title worded in their starter's language.
    old = [
        Job.objects.create(kind="annotation.import_pdf", title="导入 期中试卷.pdf"),
        Job.objects.create(kind="pem.agreement", title="Agreement report (all)"),
        Job.objects.create(kind="inference.run", title="qwen 第一轮"),  # a run's name: kept as written
    ]
    migration = importlib.import_module("k12vista.migrations.0005_job_title_code")
    migration.coded_titles(apps, None)
    imported, agreement, named = (Job.objects.get(pk=job.pk) for job in old)
    assert (imported.title_code, imported.title_params) == ("import_file", {"file": "期中试卷.pdf"})
    assert agreement.title_code == "agreement"
    assert named.title_code == ""
    with translation.override("en"):
        assert imported.display_title == "Import 期中试卷.pdf"
        assert named.display_title == "qwen 第一轮"
    with translation.override("zh-hans"):
        assert agreement.display_title == "一致性报告（全部思维链）"


def test_an_endpoint_refusal_reads_in_the_requests_language(researcher, settings):
    settings.MODEL_API_KEY_VARIABLES = ["OPENAI_API_KEY"]
    body = {"name": "qwen", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model_name": "qwen",
            "api_key_env": "SECRET_KEY"}  # fmt: skip
    chinese = api(researcher, "zh-CN").post("/api/endpoints/", body, format="json")
    assert chinese.status_code == 400
    assert "不在 MODEL_API_KEY_VARIABLES" in chinese.json()["api_key_env"][0]
    english = api(researcher, "en").post("/api/endpoints/", body, format="json")
    assert "is not one of MODEL_API_KEY_VARIABLES" in english.json()["api_key_env"][0]
    body["api_key_env"] = "sk-12345 not a name"
    refused = api(researcher, "zh-CN").post("/api/endpoints/", body, format="json")
    assert "环境变量名" in refused.json()["api_key_env"][0]


def test_the_leaderboard_words_the_status_of_a_run_it_does_not_count():
    from inference.board_notes import reason

    with translation.override("zh-hans"):
        assert reason("succeeded") == "已完成"
        assert reason("rescore failed") == "正在重新评分：失败"
    with translation.override("en"):
        assert reason("running") == "running"
    template = (settings.BASE_DIR / "templates/inference/leaderboard.html").read_text()
    assert "n.reason" in template and "{{ n.status }}" not in template


def test_an_answers_error_reads_in_the_readers_language_on_the_page_and_in_the_api(researcher, client):
    from inference.models import Response
    from tests.test_inference_views import answer, make_run

    run = make_run(researcher, finished=True)
    answer(run, error="truncated: the answer reached max_tokens", finish_reason="length")
    answer(run, status=Response.Status.FAILED, raw_output="", error="the model returned an empty answer")
    client.force_login(researcher)
    page = client.get(f"/research/runs/{run.pk}/").content.decode()
    assert "被截断：回答达到了 max_tokens 上限" in page and "模型返回了空回答。" in page
    assert "truncated: the answer" not in page and "the model returned an empty answer" not in page
    english = api(researcher, "en").get(f"/api/runs/{run.pk}/responses/").json()["results"]
    assert {row["error_message"] for row in english} == {
        "Cut off: the answer reached max_tokens; it is kept as far as it goes.",
        "The model returned an empty answer.",
    }
    chinese = api(researcher, "zh-CN").get(f"/api/runs/{run.pk}/responses/").json()["results"]
    assert {row["error_message"] for row in chinese} == {
        "被截断：回答达到了 max_tokens 上限；已保留截断前的部分。",
        "模型返回了空回答。",
    }
    assert {row["error"] for row in chinese} >= {"truncated: the answer reached max_tokens"}  # English kept


def test_a_judgments_parse_error_is_worded_for_the_reader():
    from inference import parsing
    from inference.call_errors import message

    failed = parsing.parse_step_judgment("学生的解题过程基本正确，只有第二步计算有误。")
    with translation.override("zh-hans"):
        assert message(failed.error) == "在回复正文中：没有找到 JSON 对象或列表。"
        assert message("something nobody listed") == "something nobody listed"
    with translation.override("en"):
        assert message(failed.error) == "In the reply: No JSON object or list was found."


@pytest.mark.slow
def test_a_training_failure_reads_in_each_readers_language(export, researcher):  # noqa: F811 (the fixture)
    import subprocess
    from unittest import mock

    from k12vista.jobs import execute_job
    from pem.training import jobs as training_jobs
    from pem.training import train

    run = training_jobs.start_training(export=export, base_model="/nowhere", hyperparameters={}, user=researcher)
    failed = subprocess.CompletedProcess([], 1, stdout='{"error": "StopIteration"}', stderr="")
    with translation.override("zh-hans"), mock.patch.object(train.subprocess, "run", return_value=failed):
        assert execute_job(run.job_id) == Job.Status.FAILED  # the worker in Chinese
    job = Job.objects.get(pk=run.job_id)
    assert (job.error_code, job.error_params) == ("pem.training_failed", {"detail": "StopIteration"})
    with translation.override("en"):
        assert job.error_message == "training failed: StopIteration"
    with translation.override("zh-hans"):
        assert job.error_message == "训练失败：StopIteration"


QUESTION_LINES = "\n".join([
    '{"hash_id": "x1", "question": "缺少学科", "type": "选择题"}',  # missing “subject”
    "not json at all",
    '{"hash_id": "x2", "text": "1+1=?", "subject": "math", "grade": 3, "type": "fill_in_blank", "difficulty": "hard"}',
]).encode()  # fmt: skip


def _import_questions(user, tmp_path, language):
    from annotation.jsonl_import import register_upload, start_import
    from k12vista.jobs import execute_job

    path = tmp_path / f"bank-{language}.jsonl"
    path.write_bytes(QUESTION_LINES)
    with translation.override(language):  # the worker runs in its starter's language (or none)
        document = register_upload(path=path, user=user)
        job = start_import(document=document, user=user)
        assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    assert job.result["failed"] == 3
    return document, job


@pytest.mark.usefixtures("tmp_media")
@pytest.mark.parametrize(("worker", "reader"), [("zh-hans", "en"), ("en", "zh-hans")])
def test_a_question_imports_failed_lines_read_in_the_readers_language(researcher, client, tmp_path, worker, reader):
    document, job = _import_questions(researcher, tmp_path, worker)
    english = ["missing “subject”", "not valid JSON: it breaks at character 1", "difficulty: expected a number"]
    chinese = ["缺少“subject”", "不是有效的 JSON：在第 1 个字符处出错", "“difficulty”：应为数字"]
    wanted, other = (english, chinese) if reader == "en" else (chinese, english)
    # The stored row: a code with parameters, and an English copy for logs.
    assert job.result["failed_lines"][0]["reason_code"] == "missing"
    assert job.result["failed_lines"][0]["reason"] == "missing “subject”"
    client.force_login(researcher)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = reader
    page = client.get(f"/annotate/imports/{document.pk}/").content.decode()
    report = page.split('id="line-errors"')[1]
    assert all(text in report for text in wanted), report
    assert not any(text in report for text in other)
    reasons = [
        row["reason"] for row in api(researcher, reader).get(f"/api/jobs/{job.pk}/").json()["result"]["failed_lines"]
    ]
    assert all(any(text in reason for reason in reasons) for text in wanted), reasons
    assert not any(text in reason for reason in reasons for text in other)


@pytest.mark.usefixtures("tmp_media")
def test_a_pebench_imports_failed_lines_read_in_the_readers_language(researcher, client, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from k12vista.jobs import execute_job
    from pem import jobs as pem_data_jobs
    from tests.test_pem_import import reference

    lines = [reference("ok"), reference("bad", labels=[["x", "wrong", ""]]), reference("short", labels=[["x", "HE"]])]
    upload = SimpleUploadedFile("up.jsonl", "\n".join(json.dumps(r, ensure_ascii=False) for r in lines).encode())
    with translation.override("zh-hans"):
        job = pem_data_jobs.start_import(
            stored_name=pem_data_jobs.store_upload(upload), name="up.jsonl", user=researcher
        )
        assert execute_job(job.pk) == Job.Status.SUCCEEDED
    client.force_login(researcher)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    page = client.get(f"/pem/data/imports/{job.pk}/").content.decode()
    assert "step_labels[0][1]: unknown step label &#x27;wrong&#x27; (expected one of the nine codes or names)" in page
    assert "step_labels[0]: [step, label] without an explanation" in page and "未知的步骤标签" not in page
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    page = client.get(f"/pem/data/imports/{job.pk}/").content.decode()
    assert "未知的步骤标签 &#x27;wrong&#x27;" in page and "缺少说明" in page and "unknown step label" not in page
    result = api(researcher, "en").get(f"/api/jobs/{job.pk}/").json()["result"]
    assert result["failed_lines"][0]["reason"].startswith("step_labels[0][1]: unknown step label 'wrong'")
    assert result["failed_lines"][0]["reason_code"] == "field"
    assert "without an explanation" in result["warning_lines"][0]["reason"]


def test_a_report_stored_before_the_codes_shows_its_text():
    from k12vista.line_reasons import row_reason

    assert row_reason({"line": 1, "key": "k", "reason": "缺少“type”"}) == "缺少“type”"
    assert row_reason({"line": 1, "reason": "x", "reason_code": "nobody", "reason_params": {}}) == "x"


def test_an_assist_runs_skip_reasons_read_in_the_readers_language(researcher):
    from tests.annotation_factories import make_question
    from tests.test_assist import endpoint, run_now, scripted_server, start  # noqa: F401 (a fixture)

    make_question(raw_solution="")
    with translation.override("zh-hans"):  # started and run in Chinese
        run = run_now(start(endpoint("http://127.0.0.1:9/v1"), researcher, "restructure_solution"))
    job = Job.objects.get(pk=run.job_id)
    assert job.result["skipped_why"] == {"the question has no raw solution to restructure": 1}  # the code
    english = api(researcher, "en").get(f"/api/assist/{run.pk}/").json()["counts"]["skipped_why"]
    assert english == {"the question has no raw solution to restructure": 1}
    chinese = api(researcher, "zh-CN").get(f"/api/assist/{run.pk}/").json()["counts"]["skipped_why"]
    assert chinese == {"题目没有可重构的原始解析": 1}


def test_refusals_read_in_the_requests_language(researcher):
    from inference.models import ModelEndpoint
    from pem import panel

    judge = ModelEndpoint.objects.create(name="e", kind="openai", base_url="http://127.0.0.1:9/v1", model_name="m")
    body = {"name": "p", "judges": [judge.pk], "runs": []}
    chinese = api(researcher, "zh-CN").post("/api/pem/panels/", body, format="json")
    assert chinese.status_code == 400 and chinese.json()["judges"] == ["请选择评审团要标注其思维链的推理运行"]
    english = api(researcher, "en").post("/api/pem/panels/", body, format="json")
    assert english.json()["judges"] == ["choose the inference runs whose chains the panel labels"]
    split = {"splitter": judge.pk, "runs": []}
    refused = api(researcher, "zh-CN").post("/api/pem/splits/", split, format="json").json()
    assert refused == {"splitter": ["请选择要拆分其思维链的推理运行"]}
    with translation.override("zh-hans"), pytest.raises(panel.PanelError, match="^每个评判模型只能在评审团中出现一次$"):
        panel.check_panel(judges=[judge, judge], threshold=1, explainer="")
    with translation.override("en"), pytest.raises(panel.PanelError, match="explainer 'x' is not one of"):
        panel.check_panel(judges=[judge], threshold=1, explainer="x")


# --- refusals a worker stores: a code with parameters, worded for each reader (issue 29) ------------------


def worded_error(user, job, language):
    """The job's failure as the API words it for a reader asking for ``language``."""
    return api(user, language).get(f"/api/jobs/{job.pk}/").json()["error"]


def run_in_chinese(job):
    """The job run by a worker whose language is Chinese: what it stores must not be Chinese text."""
    from k12vista.jobs import execute_job

    with translation.override("zh-hans"):
        assert execute_job(job.pk) == Job.Status.FAILED
    job.refresh_from_db()
    return job


def test_a_refused_pebench_build_reads_in_each_readers_language(researcher, client):
    job = run_in_chinese(pem_jobs.start_build(target_size=5, min_steps=3, strata=["subject"], seed=1, user=researcher))
    english = "no chain of thought is eligible (at least 3 steps, not in PEBench, not used for PEM training)"
    chinese = "没有符合条件的思维链（至少 3 步、不在 PEBench 中、未用作 PEM 训练数据）"
    assert (job.error_code, job.error_params, job.error) == ("build_none_eligible", {"min_steps": 3}, english)
    assert worded_error(researcher, job, "en") == english
    assert worded_error(researcher, job, "zh-CN") == chinese
    client.force_login(researcher)  # the pages, in the studio's language (Chinese)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert chinese in page and "no chain of thought" not in page


@pytest.mark.usefixtures("tmp_media")
def test_a_refused_question_file_reads_in_each_readers_language(researcher, client, tmp_path):
    from pathlib import Path

    from annotation.jsonl_import import register_upload, start_import
    from tests.test_jsonl_import import image_bytes, studio, studio_zip

    document = register_upload(path=studio_zip(tmp_path / "ok.zip", [studio()], {}), user=researcher)
    # The stored file changed after the upload check: the import, in the worker, refuses it.
    studio_zip(Path(document.file.path), [studio()], {"../evil.png": image_bytes()})
    job = run_in_chinese(start_import(document=document, user=researcher))
    document.refresh_from_db()
    english = "The archive holds '../evil.png', which points outside the archive; refusing it."
    chinese = "压缩包中含有 '../evil.png'，它指向压缩包之外；拒绝导入。"
    assert job.error_code == "member_outside" and job.error == document.error == english
    for language, wanted in (("en", english), ("zh-CN", chinese)):
        assert worded_error(researcher, job, language) == wanted
        detail = api(researcher, language).get(f"/api/imports/{document.pk}/").json()
        assert detail["error"] == detail["job"]["error"] == wanted
    client.force_login(researcher)
    page = client.get(f"/annotate/imports/{document.pk}/").content.decode()
    assert "它指向压缩包之外" in page and "points outside" not in page


@pytest.mark.usefixtures("tmp_media")
def test_a_refused_pdf_reads_in_each_readers_language(researcher, client, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation import pdf
    from tests import fixtures_pdf

    settings.PDF_MAX_PAGES = 2
    upload = SimpleUploadedFile("exam.pdf", fixtures_pdf.text_pages(3))
    document = pdf.register_pdf_upload(uploaded_file_or_path=upload, user=researcher)
    job = run_in_chinese(pdf.start_pdf_import(document=document, user=researcher))
    document.refresh_from_db()
    english, chinese = "The PDF has 3 pages; at most 2 are accepted.", "该 PDF 有 3 页；最多接受 2 页。"
    assert (job.error_code, job.error_params) == ("pdf_too_many_pages", {"pages": 3, "limit": 2})
    assert job.error == document.error == english
    for language, wanted in (("en", english), ("zh-CN", chinese)):
        assert worded_error(researcher, job, language) == wanted
        assert api(researcher, language).get(f"/api/imports/{document.pk}/").json()["error"] == wanted
    client.force_login(researcher)
    page = client.get(f"/annotate/imports/{document.pk}/").content.decode()
    assert chinese in page and english not in page


def test_a_stale_filter_confirmation_reads_in_each_readers_language(researcher):
    from inference import difficulty
    from inference.models import AssistResult, AssistRun
    from tests.annotation_factories import make_question
    from tests.test_difficulty_filters import filter_run

    easy, hard = make_question(figures=[]), make_question(figures=[])
    small = filter_run(researcher, AssistRun.Kind.SMALL_MODEL_FILTER, {easy: "最终答案：B", hard: "C"})
    preview = difficulty.preview_filters([small], None)
    job = difficulty.start_confirm_filters(small_runs=[small], text_only_run=None, fingerprint=preview.fingerprint,
                                           user=researcher)  # fmt: skip
    AssistResult.objects.filter(run=small, question=hard).update(parsed={"correct": True})  # meanwhile
    job = run_in_chinese(job)
    assert (job.error_code, job.error_params) == ("filters_stale", {"n": 2})
    english = "the questions to remove changed since the preview (2 now); look again"
    assert worded_error(researcher, job, "en") == english
    assert worded_error(researcher, job, "zh-CN") == "预览之后，要移除的题目已有变化（现在 2 道）；请重新查看"


@pytest.mark.usefixtures("tmp_media")
def test_a_line_the_database_cannot_store_reads_in_each_readers_language(researcher, tmp_path):
    from annotation.jsonl_import import register_upload, start_import
    from k12vista.jobs import execute_job

    path = tmp_path / "nul.jsonl"
    path.write_text('{"hash_id": "n1", "text": "a\\u0000b", "subject": "math", "grade": 3, "type": "fill_in_blank"}')
    with translation.override("zh-hans"):
        job = start_import(document=register_upload(path=path, user=researcher), user=researcher)
        assert execute_job(job.pk) == Job.Status.SUCCEEDED
    job.refresh_from_db()
    row = job.result["failed_lines"][0]
    assert row["reason_code"] == "unstorable"
    assert row["reason"] == "text: a NUL character (\\u0000) at character 2, which cannot be stored"
    rows = {language: api(researcher, language).get(f"/api/jobs/{job.pk}/").json()["result"]["failed_lines"]
            for language in ("en", "zh-CN")}  # fmt: skip
    assert rows["en"][0]["reason"] == row["reason"]
    assert rows["zh-CN"][0]["reason"] == "text：第 2 个字符处有NUL 字符（\\u0000），无法存储"


def test_failures_stored_as_text_before_the_codes_still_show(researcher):
    from annotation.models import SourceDocument

    old = Job.objects.create(kind="pem.build_pebench", status=Job.Status.FAILED, error="PEBenchError: 旧的失败原因")
    for language in ("en", "zh-CN"):
        assert worded_error(researcher, old, language) == "PEBenchError: 旧的失败原因"
    document = SourceDocument(kind="jsonl", original_name="a.jsonl", sha256="", size=0, error="old words")
    assert document.error_message == "old words"
    unknown = Job(error="as stored", error_code="nobody.knows", error_params={})
    assert unknown.error_message == "as stored"


def test_refusals_said_at_once_read_in_the_active_language(researcher):
    from pem.build import build_pebench
    from pem.services import PEBenchError
    from review.sampling import SamplingPlanError, code_letter

    with translation.override("zh-hans"):
        with pytest.raises(SamplingPlanError, match=r"^批量至少为 2（表 I 从 2 开始），而不是 1。$"):
            code_letter(1)
        with pytest.raises(PEBenchError, match="^不能按 difficulty 分层"):
            build_pebench(target_size=5, min_steps=3, strata=["difficulty"], seed=0, user=researcher)
    with translation.override("en"), pytest.raises(SamplingPlanError, match="at least 2"):
        code_letter(1)
