"""The dependency rule: inference -> annotation; pem -> inference, annotation;
review -> annotation, pem. The project package k12vista is below all of them."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ["k12vista", "annotation", "inference", "pem", "review"]
ALLOWED = {
    "k12vista": set(),
    "annotation": {"k12vista"},
    "inference": {"k12vista", "annotation"},
    "pem": {"k12vista", "annotation", "inference"},
    "review": {"k12vista", "annotation", "pem"},
}
# The project package's URL conf mounts every app, and nothing else in it may.
URLCONF = ROOT / "k12vista" / "urls.py"


def imported_apps(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "include" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names = [arg.value]
        found |= {name.split(".")[0] for name in names if name.split(".")[0] in APPS}
    return found


@pytest.mark.parametrize("app", APPS)
def test_it_keeps_dependencies_pointing_one_way(app):
    offending = {}
    for path in (ROOT / app).rglob("*.py"):
        if path == URLCONF:
            continue
        bad = imported_apps(path) - ALLOWED[app] - {app}
        if bad:
            offending[str(path.relative_to(ROOT))] = sorted(bad)
    assert offending == {}


def test_it_notices_a_forbidden_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from inference.models import Run\nimport review.services\n")
    assert imported_apps(module) == {"inference", "review"}


def modules_imported(path: Path) -> tuple[set[str], set[str]]:
    """The modules a file imports at its top, and those it imports inside functions (a cycle's mark)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    inner = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} - top
    return top, inner


def test_the_import_and_the_public_formats_share_their_field_readers_without_a_cycle():
    importer, public = ROOT / "annotation" / "jsonl_import.py", ROOT / "annotation" / "public_formats.py"
    assert "annotation.jsonl_import" not in set().union(*modules_imported(public))
    top, inner = modules_imported(importer)
    assert "annotation.public_formats" in top and "annotation.public_formats" not in inner
    assert "annotation.record_fields" in top and "annotation.record_fields" in modules_imported(public)[0]
