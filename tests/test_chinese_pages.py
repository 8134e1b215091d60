"""Every page each role can reach, rendered in Chinese, carries no English UI words.

A populated studio is built through the services (demo questions and PEBench chains, flags, an import
with bad lines, an endpoint, runs, scoring, a leaderboard, an audit rated and decided, labelling tasks,
a release, knowledge units, failed and finished jobs, default prompts). Each role then visits its home and
every link the pages show, three levels deep (two pages per URL pattern), plus the named URL patterns with
ids filled in from the objects built, and the forms posted empty (validation errors); REQUIRED lists the
pages the crawl must reach. Visible text, the attributes people read (placeholder, title, aria-label, alt,
button values, data-*-text messages the scripts show) and chart specs are searched for English words.

What is not searched: <script>, <style>, <code>, <pre>, <kbd>, <textarea> contents and anything inside an
element marked ``translate="no"`` or with a ``lang`` other than the page's (user content, and the English
names the label reference shows on purpose); LaTeX between math delimiters; names in Chinese quotation
marks (“type”); tokens holding a digit, a slash or an @ (ids, hash ids, versions, paths, URLs). Inside an
element marked ``data-format-help`` (a file format's description) the format's field names are allowed.
"""

import json
import os
import re
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import Resolver404, resolve, reverse
from rest_framework.test import APIClient

from k12vista.roles import Role
from tests.conftest import make_person

pytestmark = pytest.mark.django_db

# Proper nouns and formats, written the same in Chinese text; each is justified by what it names.
ALLOWED = {
    # the product and the benchmark, datasets and models named in the paper
    "K12Vista", "PEBench", "PEM", "Studio",
    # formats and protocols people know by these names
    "API", "JSONL", "JSON", "CSV", "XLSX", "ZIP", "PDF", "PNG", "OCR", "KaTeX", "LaTeX", "TeX", "Parquet", "HTTP",
    "HTTPS", "URL", "SHA", "UTF", "Markdown", "YAML", "LoRA", "GPU", "CPU", "vLLM", "OpenAI", "TRL", "SFT", "ECharts",
    # the step label codes (CS, CE, ...) and the paper's score names
    "CS", "CE", "ICE", "KAE", "IAE", "VAE", "LE", "OE", "DE", "CoT", "ID", "MC", "FIB", "FR",
    # units and statistics written in Latin letters in Chinese texts
    "ms", "px", "KB", "MB", "GB", "GiB", "CI", "kappa", "Cohen", "Fleiss", "Krippendorff", "Wilson", "AQL", "SP",
    "MCC", "F1", "SE", "ISO", "II", "Ac", "Re", "Gwet", "Scott", "Pearson", "pi", "alpha", "Macro",
    # the nine step label codes and the paper's other error codes
    "QM", "LRK", "LRE", "HE",
    # keys on the keyboard, as printed on it
    "Ctrl", "Enter", "Esc", "Shift", "Alt", "Tab",
    # file extensions people type and see (.zip, .jsonl)
    "zip", "jsonl", "json", "csv", "pdf", "png", "parquet", "tex",
    # software and published datasets named as their makers write them
    "vllm", "transformers", "serve", "Hugging", "Face", "datasets", "ProcessBench", "LLaMA", "Factory",
    "llamafactory", "swift", "trl", "peft", "Qwen", "mhchem", "Celery", "Redis", "PostgreSQL", "SQLite",
    "TLS", "Schema", "Top", "token", "tokens", "Avg", "Expert", "Student",
    # the worker queues, named as `celery -Q` takes them
    "cpu", "io", "gpu",
    # names in the demo data (the import's rater name, the demo model): user content
    "demo", "student", "pebench",
}  # fmt: skip
# Inside an element marked data-format-help (the description of a file format or a download's grouping),
# the names of the format's fields and values are written as the files spell them.
FORMAT_WORDS = {
    "hash", "id", "question", "ground", "truth", "student", "infer", "step", "labels", "label", "explanation",
    "model", "mode", "group", "score", "source", "overall", "direct", "by", "stage", "primary", "subject", "math",
    "type", "multiple", "choice", "cell", "grid", "fill", "in", "blank", "free", "response", "steps", "error",
    "release", "false", "other", "set", "sqrt", "min", "max", "pixels",
}  # fmt: skip
# Whole tokens written as the software expects them: sampling parameters, environment variables.
ALLOWED_TOKENS = {
    "top_p", "max_tokens", "temperature", "min_pixels", "max_pixels", "OPENAI_API_KEY", "MODEL_URL_ALLOWLIST", "DEBUG",
}  # fmt: skip
# A word of at least two letters, within a token of letters, digits and the characters ids and codes use.
TOKEN = re.compile(r"[A-Za-z0-9_.\-/:@=#]+")
MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.S)
# Text in Chinese quotation marks names what a person typed or a file holds (“sideways” 不是合法选项, “type”：应为文本).
QUOTED = re.compile(r"“[^”]*”")
READ_ATTRIBUTES = ("placeholder", "title", "aria-label", "alt", "data-confirm")
SKIPPED_TAGS = {"script", "style", "code", "pre", "textarea", "kbd", "samp", "math"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def english_words(text: str) -> set[str]:
    words = set()
    for token in TOKEN.findall(QUOTED.sub(" ", MATH.sub(" ", text))):
        if any(c.isdigit() for c in token) or "/" in token or "@" in token or token.strip(".:=#") in ALLOWED_TOKENS:
            continue  # ids, hash ids, versions, paths, URLs
        for word in re.split(r"[._\-:=#]+", token):
            if len(word) >= 2 and word.isascii() and word.isalpha() and word not in ALLOWED:
                words.add(word)
    return words


class Reader(HTMLParser):
    """Visible text and read attributes, minus the skipped elements; also the links."""

    def __init__(self, page_lang: str):
        super().__init__(convert_charrefs=True)
        self.page_lang = page_lang
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, skipped, format help)
        self.found: list[str] = []
        self.links: list[str] = []
        self.chart_data = False

    def skipping(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    def format_help(self) -> bool:
        return bool(self.stack) and self.stack[-1][2]

    def words(self, text: str) -> set[str]:
        found = english_words(text)
        return found - FORMAT_WORDS if self.format_help() else found

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        lang = attrs.get("lang")
        skipped = (
            self.skipping()
            or tag in SKIPPED_TAGS
            or attrs.get("translate") == "no"
            or (lang is not None and lang != self.page_lang)
        )
        if not skipped:
            texts = [attrs.get(name) or "" for name in READ_ATTRIBUTES]
            texts += [
                value or "" for name, value in attrs.items() if name.startswith("data-") and name.endswith("-text")
            ]
            if tag == "input" and attrs.get("type") in ("submit", "button", "reset"):
                texts.append(attrs.get("value") or "")
            for text in texts:
                self.found += [f"{tag}[attr] {word}" for word in english_words(text)]
        self.chart_data = tag == "script" and attrs.get("type") == "application/json"
        if tag not in VOID:
            self.stack.append((tag, skipped, self.format_help() or "data-format-help" in attrs))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        if self.stack and self.stack[-1][0] == "script" and self.chart_data:
            # A chart's spec (json_script): its categories and series names are drawn as text.
            self.found += [f"chart {word}" for text in chart_texts(json.loads(data)) for word in english_words(text)]
            return
        if not self.skipping():
            tag = self.stack[-1][0] if self.stack else ""
            self.found += [f"{tag} {word}" for word in self.words(data)]


def chart_texts(spec) -> list[str]:
    """The strings a chart spec shows: category labels, series names, titles."""
    if isinstance(spec, list):
        return [text for value in spec for text in chart_texts(value)]
    if not isinstance(spec, dict):
        return []
    texts = [str(c) for c in spec.get("categories", []) if isinstance(c, str)]
    texts += [spec[key] for key in ("name", "title") if isinstance(spec.get(key), str)]
    return texts + [text for value in spec.values() if isinstance(value, dict | list) for text in chart_texts(value)]


def read(html: str) -> Reader:
    lang = re.search(r'<html lang="([^"]+)"', html)
    reader = Reader(lang.group(1) if lang else "zh-hans")
    reader.feed(html)
    # A page's text between math delimiters may span elements; re-read the text with math taken out.
    return reader


# --- the studio -------------------------------------------------------------------------------------------------


def jsonl(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def studio(settings, tmp_path):
    """A studio with work at every stage, made through the services; people with Chinese names."""
    from annotation import draw, knowledge, queues, releases
    from annotation import services as bank
    from annotation.demo import demo_questions
    from annotation.models import Assignment, KnowledgePoint, Question
    from inference import standings
    from inference.models import InferenceRun, ModelEndpoint, Response
    from k12vista.jobs import execute_job, start_job
    from k12vista.models import Job
    from pem import labelling
    from pem.demo import demo_pebench
    from review import decisions
    from review import services as review
    from review.models import Rating
    from tests.annotation_factories import make_question
    from tests.pem_factories import judge, make_scoring_run

    settings.MEDIA_ROOT = tmp_path / "media"
    people = {
        Role.ANNOTATOR: make_person("标注员小王", Role.ANNOTATOR),
        Role.INSPECTOR: make_person("质检员小李", Role.INSPECTOR),
        Role.RESEARCHER: make_person("研究员小陈", Role.RESEARCHER),
        Role.ADMIN: make_person("管理员老赵", Role.ADMIN),
    }
    annotator, inspector, researcher, admin = people.values()
    second = make_person("标注员小刘", Role.ANNOTATOR)
    demo_questions()
    demo_pebench()
    # Questions with rule flags: no figure where one is named, an answer missing.
    flagged = make_question(admin, text="如图所示，求 $AB$ 的长。", figures=[], answers=[])
    make_question(admin, text="计算 $\\frac{1}{2$ 的值。", subject="physics", qtype="fill_in_blank", options=[])
    # An annotator's open OCR review and step correction.
    queues.next_assignment(annotator=annotator, task=Assignment.Task.OCR_REVIEW)
    corrected = make_question(admin, solution_steps=[])
    corrected.accept_ocr(by=second)
    bank.add_step_proposal(question=corrected, steps=["由 $x^2=4$ 得 $x=2$。", "故选 B。"])
    # A model, its runs, judged, on the leaderboard.
    endpoint = ModelEndpoint.objects.create(name="学生模型", base_url="http://127.0.0.1:9/v1", model_name="qwen2-vl")
    judge_endpoint = ModelEndpoint.objects.create(name="评分模型", base_url="http://127.0.0.1:9/v1",
                                                  model_name="qwen2-judge")  # fmt: skip
    run = InferenceRun.objects.create(name="学生模型逐步作答", endpoint=endpoint, mode=InferenceRun.Mode.STEP_BY_STEP,
                                      created_by=researcher)  # fmt: skip
    run.job = start_job(kind="inference.run", user=researcher, params={"run_id": run.pk}, title=run.name)
    run.save()
    questions = list(Question.objects.order_by("pk")[:6])
    responses = [
        Response.objects.create(run=run, question=q, status=Response.Status.OK, raw_output="第一步。\n\n第二步。")
        for q in questions[:5]
    ]
    # The errors a call leaves are stored in English and worded for the reader (inference.call_errors).
    Response.objects.filter(pk=responses[0].pk).update(error="truncated: the answer reached max_tokens")
    Response.objects.create(run=run, question=questions[5], status=Response.Status.FAILED,
                            error="the model returned an empty answer")  # fmt: skip
    scoring = make_scoring_run(run, judge_endpoint)
    scoring.name = "评分模型评学生模型"
    scoring.save()
    for i, response in enumerate(responses):
        judge(scoring, response, [("第一步。", "CS", ""), ("第二步。", "CE" if i % 2 else "CS", "计算错误")])
    standings.take_snapshot(scoring)
    # An audit, rated with failures, closed and decided; the report has notes and decisions.
    for q in Question.objects.filter(status=Question.Status.IMPORTED)[:12]:
        Question.objects.filter(pk=q.pk).update(status=Question.Status.SOLUTION_CORRECTED)
    audit = review.create_audit(
        name="九月质检", population={"kind": "status", "status": "solution_corrected"}, strata=["subject"],
        aql=6.5, seed=1, inspectors=[inspector], inspectors_per_item=1, by=inspector,
    )  # fmt: skip
    for n, rating in enumerate(Rating.objects.filter(item__audit=audit).select_related("item", "inspector")):
        names = review.dimension_names(rating.item.kind)
        fail = names[:1] if n % 3 == 0 else []
        review.submit_rating(rating=rating, verdicts={name: name not in fail for name in names},
                             notes=dict.fromkeys(fail, "答案不对"), by=inspector)  # fmt: skip
    review.close_audit(audit=audit, by=inspector)
    decisions.apply_decision(audit=audit, by=inspector)
    open_audit = review.create_audit(
        name="十月质检", population={"kind": "status", "status": "imported"}, strata=["subject"], per_stratum=1,
        seed=2, inspectors=[inspector], inspectors_per_item=1, by=inspector,
    )  # fmt: skip
    # PEBench labelling: a task held by the annotator.
    labelling.next_task(annotator)
    # A release drawn from audited questions; knowledge units clustered.
    Question.objects.filter(pk__in=[q.pk for q in questions]).update(status=Question.Status.AUDITED)
    candidate = draw.start_draw(targets=draw.Targets.from_dict({"per_cell": 1}), by=researcher, name="抽样一")
    execute_job(candidate.job_id)
    candidate.questions.set(questions)
    release = releases.start_release(candidate_set=candidate, by=researcher, name="第一版")
    execute_job(release.job_id)
    for name in ("勾股定理", "勾股定理的应用", "一元二次方程"):
        KnowledgePoint.objects.get_or_create(subject="math", name=name)
    knowledge.cluster_subject("math", knowledge.ClusterParams(points_per_unit=2))
    # An import with bad lines: its report lists them.
    from annotation.jsonl_import import register_upload, start_import
    from inference import prompts

    bad = tmp_path / "坏行.jsonl"
    bad.write_bytes(jsonl('{"hash_id": "x1", "question": "题目", "subject": "math-g9"}', "not json", "[1, 2]"))
    document = register_upload(path=bad, user=admin)
    execute_job(start_import(document=document, user=admin).pk)
    prompts.ensure_default_prompts()
    # Jobs that failed and finished.
    failed = start_job(kind="k12vista.worker_check", user=admin, params={"queue": "cpu"}, title="")
    Job.objects.filter(pk=failed.pk).update(status=Job.Status.FAILED)
    return {
        "people": people, "flagged": flagged, "corrected": corrected, "endpoint": endpoint, "run": run,
        "scoring": scoring, "audit": audit, "open_audit": open_audit, "release": release, "candidate": candidate,
    }  # fmt: skip


# --- visiting ---------------------------------------------------------------------------------------------------

NOT_VISITED = ("/api/", "/admin/", "/media/", "/static/", "/logout/", "/i18n/")
DOWNLOADS = re.compile(r"/download/|/files/|/export/|report\.\w+$|\.(csv|json|jsonl|zip|tex|parquet)$")
PER_PATTERN = 2
DUMP = os.environ.get("CHINESE_PAGES_DUMP")


def pattern_of(path: str) -> str | None:
    try:
        match = resolve(urlsplit(path).path)
    except Resolver404:
        return None
    return match.view_name


class Visit:
    def __init__(self, client, role):
        self.client = client
        self.role = role
        self.seen: set[str] = set()
        self.per_pattern: dict[str, int] = defaultdict(int)
        self.problems: dict[str, list[str]] = {}
        self.visited: list[str] = []

    def wanted(self, href: str) -> str | None:
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or not parts.path.startswith("/"):
            return None
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if path in self.seen or parts.path.startswith(NOT_VISITED) or DOWNLOADS.search(parts.path):
            return None
        name = pattern_of(parts.path)
        if name is None or self.per_pattern[name] >= PER_PATTERN:
            return None
        return path

    def check(self, path: str, response) -> list[str]:
        if "html" not in response.get("Content-Type", ""):
            return []
        page = read(response.content.decode())
        words = sorted(set(page.found))
        if words and DUMP:  # CHINESE_PAGES_DUMP=dir keeps the failing pages to read
            name = re.sub(r"\W+", "_", f"{self.role}{path}")
            (Path(DUMP) / f"{name}.html").write_bytes(response.content)
        if words:
            self.problems[f"{self.role} {response.request['REQUEST_METHOD']} {path}"] = words
        return page.links

    def get(self, path: str) -> list[str]:
        self.seen.add(path)
        name = pattern_of(urlsplit(path).path)
        if name:
            self.per_pattern[name] += 1
        response = self.client.get(path)
        assert response.status_code < 500, path
        self.visited.append(path)
        return self.check(path, response)

    def crawl(self, start: list[str], depth: int = 2):
        level = [p for p in start if p not in self.seen]
        for _ in range(depth + 1):
            following = []
            for path in level:
                if path in self.seen:
                    continue
                for href in self.get(path):
                    if (wanted := self.wanted(href)) and wanted not in following:
                        following.append(wanted)
            level = following

    def post(self, path: str, data: dict | None = None):
        response = self.client.post(path, data or {}, follow=True)
        assert response.status_code < 500, path
        self.visited.append(f"POST {path}")
        self.check(path, response)


def named_pages(studio) -> list[str]:
    """Pages worth visiting whether or not a link leads there, with ids from the studio."""
    from pem.models import LabellingTask
    from review.models import AuditItem

    audit, release = studio["audit"], studio["release"]
    item = AuditItem.objects.filter(audit=audit).first()
    task = LabellingTask.objects.first()
    names = [
        ("home", []), ("k12vista:taxonomy", []), ("k12vista:preview", []), ("k12vista:account", []),
        ("k12vista:job_list", []), ("k12vista:users", []), ("k12vista:settings", []),
        ("k12vista:user_edit", [studio["people"][Role.ANNOTATOR].pk]),
        ("annotation:queue", []), ("annotation:team", []), ("annotation:imports", []), ("annotation:questions", []),
        ("annotation:question_detail", [studio["flagged"].hash_id]), ("annotation:steps", [studio["corrected"].pk]),
        ("annotation:benchmark", []), ("annotation:candidate_set", [studio["candidate"].pk]),
        ("annotation:release", [release.version]), ("annotation:units", []), ("annotation:release_compare", []),
        ("inference:home", []), ("inference:endpoints", []), ("inference:endpoint_create", []),
        ("inference:endpoint_edit", [studio["endpoint"].pk]), ("inference:prompts", []), ("inference:runs", []),
        ("inference:run_create", []), ("inference:run", [studio["run"].pk]), ("inference:campaigns", []),
        ("inference:campaign_create", []), ("inference:scoring", [studio["scoring"].pk]),
        ("inference:leaderboard", []), ("inference:published", []), ("inference:difficulty", []),
        ("pem:label_queue", []), ("pem:adjudication_queue", []), ("pem:expert_runs", []), ("pem:data_home", []),
        ("pem:data_import", []), ("pem:data_chains", []), ("pem:agreement", []), ("pem:training_home", []),
        ("review:home", []), ("review:audit_create", []), ("review:audit", [audit.pk]), ("review:report", [audit.pk]),
        ("review:audit", [studio["open_audit"].pk]),
    ]  # fmt: skip
    if item:
        names.append(("review:item", [item.pk]))
    if task:
        names.append(("pem:label_task", [task.pk]))
    paths = []
    for name, args in names:
        paths.append(reverse(name, args=args))
    return paths


FORMS = [
    "inference:endpoint_create", "inference:run_create", "inference:campaign_create", "review:audit_create",
    "annotation:imports", "pem:data_import", "inference:published", "annotation:draw_create", "k12vista:users",
    "pem:split_create", "pem:panel_create", "pem:training_filter", "pem:training_export", "pem:training_train",
]  # fmt: skip


# Pages the crawl must reach, so that a broken link or a fixture change cannot make the test pass by seeing less.
REQUIRED = {
    "annotation:queue", "annotation:review", "annotation:steps", "annotation:question_detail", "annotation:questions",
    "annotation:imports", "annotation:import_detail", "annotation:team", "annotation:benchmark",
    "annotation:candidate_set", "annotation:release", "annotation:units", "k12vista:job_list", "k12vista:job_detail",
    "k12vista:users", "k12vista:user_edit", "k12vista:settings", "k12vista:account", "k12vista:taxonomy",
    "inference:endpoints", "inference:endpoint_create", "inference:endpoint_edit", "inference:runs", "inference:run",
    "inference:run_create", "inference:scoring", "inference:leaderboard", "inference:published",
    "inference:campaign_create", "inference:prompts", "inference:prompt", "inference:difficulty",
    "pem:label_queue", "pem:label_task", "pem:adjudication_queue", "pem:expert_runs", "pem:data_home",
    "pem:data_chains", "pem:agreement", "pem:training_home", "review:home", "review:audit", "review:audit_create",
    "review:report", "review:item", "review:rate",
}  # fmt: skip


def test_every_page_of_every_role_reads_in_chinese(studio, client):
    problems: dict[str, list[str]] = {}
    visited: dict[str, int] = {}
    seen_names: set[str] = set()
    pages = named_pages(studio)
    for role, person in studio["people"].items():
        client.force_login(person, backend="django.contrib.auth.backends.ModelBackend")
        client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
        visit = Visit(client, role.value)
        visit.crawl([reverse("home"), *pages])
        for name in FORMS:
            visit.post(reverse(name))
        # A bad upload: the import's report lists the line in Chinese.
        if role in (Role.ANNOTATOR, Role.RESEARCHER):
            upload = SimpleUploadedFile("q.jsonl", jsonl('{"id": "x1"}', "not json"), "application/jsonl")
            visit.post(reverse("annotation:imports"), {"file": upload})
        problems.update(visit.problems)
        visited[role.value] = len(visit.visited)
        seen_names |= {name for path in visit.visited if (name := pattern_of(path.removeprefix("POST ")))}
        client.logout()
    assert all(n >= 20 for n in visited.values()), visited
    missing = REQUIRED - seen_names
    assert not missing, f"pages the test should have reached: {sorted(missing)}"
    report = "\n".join(f"{page}: {', '.join(words)}" for page, words in sorted(problems.items()))
    assert not problems, f"English UI words on {len(problems)} pages:\n{report}"


@pytest.mark.parametrize(
    ("method", "path", "data"),
    [
        ("post", "/api/runs/", {"endpoint": 999999, "mode": "斜着"}),
        ("post", "/api/inspect/audits/", {"name": ""}),
        ("get", "/api/questions/?cursor=forged", None),
        ("post", "/api/leaderboard/pins/", {}),
        ("post", "/api/pem/splits/", {}),
        ("get", "/api/jobs/999999/", None),  # Django's own "No Job matches the given query." is English only
    ],
)
def test_api_errors_speak_chinese_to_a_chinese_client(studio, method, path, data):
    api = APIClient()
    api.force_authenticate(studio["people"][Role.ADMIN])
    response = getattr(api, method)(path, data, format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert 400 <= response.status_code < 500, response.content
    words = english_words(re.sub(r'"[a-z_]+":', " ", response.content.decode("unicode_escape")))
    assert not words, (path, response.content.decode())


def test_the_reader_finds_english_and_ignores_what_it_should():
    html = (
        '<html lang="zh-hans"><body><h1>题目 Questions</h1><p translate="no">张三 typed this</p>'
        '<span lang="en">Correct step</span><code>kind=status</code><p>$\\frac{a}{b}$ q000123 v2 /x/y</p>'
        '<input type="submit" value="Save"><input placeholder="Search"><p>annotation.export_questions</p>'
        "<p data-format-help>hash_id, question</p><p>question</p>"
        '<script type="application/json" id="c">'
        '{"categories": ["biology", "数学"], "series": [{"name": "Rate"}]}</script>'
        "</body></html>"
    )
    found = {entry.split()[-1] for entry in read(html).found}
    assert found == {"Questions", "Save", "Search", "annotation", "export", "questions", "question", "biology", "Rate"}
