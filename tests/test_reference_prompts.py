"""Prompts from the reference repository, never copied: read from a checkout with ast and
registered as a prompt set named for its commit (inference.reference)."""

import json
import shutil
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from inference import prompts as studio_prompts
from inference.models import PromptTemplate
from inference.reference import prompts as reader
from inference.reference import register
from tests.reference_code import CHECKOUT, needs_reference, prompt_tables

MODES = {"directly": "direct", "step_by_step": "step_by_step"}
TYPES = {"选择题": "multiple_choice", "填空题": "fill_in_blank", "问答题": "free_response"}


@needs_reference
def test_the_reader_returns_the_reference_strings_exactly():
    infer, judge, pembench = prompt_tables()
    found = reader.read_checkout(CHECKOUT)
    for ref_mode, mode in MODES.items():
        for zh, qtype in TYPES.items():
            assert found.infer[mode][qtype] == infer[f"{ref_mode}_infer_prompt"][zh]
            assert found.judge[mode][qtype] == judge[f"{ref_mode}_eval_prompt"][zh]
    assert found.pebench == pembench["step_by_step_infer"]
    # No .git in the test copy: the set is named for the content hash of its two prompt files.
    assert found.revision.startswith("sha256:") and found.set_name.startswith("K12Vista@sha256-")


@needs_reference
def test_rendering_equals_the_references_own_format_call():
    _infer, judge, _pembench = prompt_tables()
    found = reader.read_checkout(CHECKOUT)
    values = {"question": "若 $\\frac{1}{2}x=1$ {x}<image>", "answer": ["2", "B"], "solution": "Step1:…",
              "student_answer": "x=2"}  # fmt: skip
    for ref_mode, mode in MODES.items():
        for zh, qtype in TYPES.items():
            expected = judge[f"{ref_mode}_eval_prompt"][zh].format(**values)
            assert reader.render(found.judge[mode][qtype], **values) == expected


def test_a_template_field_with_attribute_access_is_refused():
    with pytest.raises(reader.CheckoutError):
        reader.template_fields("{question.__class__}")
    with pytest.raises(reader.CheckoutError):
        reader.template_fields("{question!r}")
    assert reader.render("a {{b}} {question}", question="{answer}") == "a {b} {answer}"


def _copy_checkout(tmp_path):
    target = tmp_path / "K12Vista"
    shutil.copytree(CHECKOUT, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


@needs_reference
def test_the_commit_is_read_from_git_without_running_git(tmp_path):
    target = _copy_checkout(tmp_path)
    commit = "d83cf2a94ddd6768adecdf8d09897ce72f1ddd4f"
    (target / ".git" / "refs" / "heads").mkdir(parents=True)
    (target / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (target / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled\n{commit} refs/heads/main\n")
    assert reader.read_checkout(target).set_name == "K12Vista@d83cf2a94ddd"
    (target / ".git" / "refs" / "heads" / "main").write_text("a" * 40 + "\n")  # a loose ref wins
    assert reader.read_checkout(target).revision == "a" * 40


@needs_reference
def test_the_checkout_is_never_executed(tmp_path):
    target = _copy_checkout(tmp_path)
    prompt = target / "K12_Vista" / "code" / "prompt.py"
    marker = tmp_path / "ran"
    prompt.write_text(f"open({str(marker)!r}, 'w').close()\n" + prompt.read_text(encoding="utf-8"))
    reader.read_checkout(target)  # the statement is skipped, the assignments still read
    assert not marker.exists()
    prompt.write_text("infer_prompt = __import__('os').getcwd()\neval_prompt = {}\n")
    with pytest.raises(reader.CheckoutError, match="not a literal"):
        reader.read_checkout(target)


def test_a_folder_that_is_no_checkout_is_reported(tmp_path):
    with pytest.raises(reader.CheckoutError, match="missing"):
        reader.read_checkout(tmp_path)


@needs_reference
@pytest.mark.django_db
def test_registering_stores_the_reference_prompts_as_a_set_apart_from_the_studios():
    studio_prompts.ensure_default_prompts()
    studio_judge = studio_prompts.current(PromptTemplate.Kind.JUDGE_DIRECT, "multiple_choice")
    infer, judge, pembench = prompt_tables()
    out = StringIO()
    call_command("register_reference_prompts", str(CHECKOUT), stdout=out)
    report = json.loads(out.getvalue())
    assert report["created"] == 13 and report["prompt_set"].startswith("K12Vista@sha256-")
    name = report["prompt_set"]
    for ref_mode, mode in MODES.items():
        answer_kind = PromptTemplate.Kind.ANSWER_DIRECT if mode == "direct" else PromptTemplate.Kind.ANSWER_STEPS
        judge_kind = PromptTemplate.Kind.JUDGE_DIRECT if mode == "direct" else PromptTemplate.Kind.JUDGE_STEPS
        for zh, qtype in TYPES.items():
            row = register.reference_prompt(answer_kind, qtype)
            assert row.prompt_set == name and row.system == ""
            assert row.user_template == infer[f"{ref_mode}_infer_prompt"][zh]
            assert register.reference_prompt(judge_kind, qtype).user_template == judge[f"{ref_mode}_eval_prompt"][zh]
    given = register.reference_prompt(PromptTemplate.Kind.JUDGE_GIVEN_STEPS)
    assert given.user_template == pembench["step_by_step_infer"]
    # The studio's own prompts are unchanged and stay current.
    assert studio_prompts.current(PromptTemplate.Kind.JUDGE_DIRECT, "multiple_choice") == studio_judge
    # Registering again adds nothing.
    out = StringIO()
    call_command("register_reference_prompts", str(CHECKOUT), stdout=out)
    assert json.loads(out.getvalue())["created"] == 0
    assert PromptTemplate.objects.filter(prompt_set=name).count() == 13


@pytest.mark.django_db
def test_the_command_reports_a_bad_folder(tmp_path):
    with pytest.raises(CommandError, match="missing"):
        call_command("register_reference_prompts", str(tmp_path))


@needs_reference
@pytest.mark.django_db
def test_a_researcher_registers_them_on_the_prompts_page(client, login, researcher, annotator, settings):
    settings.REFERENCE_CHECKOUTS_DIR = CHECKOUT.parent
    login(annotator)
    assert client.post(reverse("inference:reference_prompts"), {"path": str(CHECKOUT)}).status_code == 403
    assert not PromptTemplate.objects.exclude(prompt_set="").exists()
    login(researcher)
    response = client.post(reverse("inference:reference_prompts"), {"path": str(CHECKOUT)}, follow=True)
    assert response.status_code == 200
    name = register.latest_set()
    assert name and PromptTemplate.objects.filter(prompt_set=name, created_by=researcher).count() == 13
    assert name in response.content.decode()
    missing = CHECKOUT.parent / "nonexistent"
    response = client.post(reverse("inference:reference_prompts"), {"path": str(missing)}, follow=True)
    assert response.status_code == 200 and str(missing) in response.content.decode()  # inside: said
    # The studio's table lists no row of the set.
    page = client.get(reverse("inference:prompts")).content.decode()
    studio_table, reference_card = page.split('id="reference-prompts"')
    assert name not in studio_table and name in reference_card


OUTSIDE = "Only checkouts inside the reference folder (REFERENCE_CHECKOUTS_DIR) are read from here."


def _page_messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@needs_reference
@pytest.mark.django_db
def test_the_page_reads_only_inside_the_reference_folder(client, login, researcher, settings, english, tmp_path):
    """Every path outside REFERENCE_CHECKOUTS_DIR, there or not, gets the one same message and is
    never read; inside, a relative or an absolute name registers the checkout."""
    folder = tmp_path / "reference"
    folder.mkdir()
    settings.REFERENCE_CHECKOUTS_DIR = folder
    elsewhere = _copy_checkout(tmp_path)  # a real checkout, beside the folder
    (folder / "link").symlink_to(elsewhere)  # a link inside leading out
    (folder / "loop").symlink_to(folder / "loop")
    login(researcher)
    outside = [
        str(elsewhere), str(CHECKOUT), "/etc", "/nonexistent/x", str(tmp_path), "../K12Vista", "link",
        f"{folder}/../K12Vista", str(tmp_path / "ghost"), "K12Vista\x00", "", " ",
    ]  # fmt: skip
    for path in outside:
        response = client.post(reverse("inference:reference_prompts"), {"path": path}, follow=True)
        assert response.status_code == 200
        said = _page_messages(response)
        assert said in ([OUTSIDE], ["Give the folder of the reference checkout."]), (path, said)
        assert path.strip() in ("", "K12Vista\x00") or said == [OUTSIDE], path  # a blank or NUL: the form's word
    assert not PromptTemplate.objects.exclude(prompt_set="").exists()

    # Inside: an absolute name, then a relative one (the same checkout: nothing new).
    shutil.copytree(elsewhere, folder / "K12Vista")
    response = client.post(reverse("inference:reference_prompts"), {"path": str(folder / "K12Vista")}, follow=True)
    assert _page_messages(response) == [f"Registered {register.latest_set()}: 13 new prompt versions."]
    response = client.post(reverse("inference:reference_prompts"), {"path": "K12Vista"}, follow=True)
    assert _page_messages(response) == [f"Registered {register.latest_set()}: 0 new prompt versions."]
    response = client.post(reverse("inference:reference_prompts"), {"path": "missing"}, follow=True)
    assert "is not a folder" in _page_messages(response)[0]  # inside the folder, what is wrong is said
    response = client.post(reverse("inference:reference_prompts"), {"path": "loop/x"}, follow=True)
    assert response.status_code == 200 and "is not a folder" in _page_messages(response)[0]  # a link loop


@needs_reference
@pytest.mark.django_db
def test_the_command_still_reads_any_path(settings, tmp_path):
    settings.REFERENCE_CHECKOUTS_DIR = tmp_path / "reference"
    assert register.checkout_in_reference_folder(str(CHECKOUT)) is None
    assert register.checkout_in_reference_folder("a\x00b") is None  # no file system takes it: no error either
    out = StringIO()
    call_command("register_reference_prompts", str(CHECKOUT), stdout=out)
    assert json.loads(out.getvalue())["created"] == 13
