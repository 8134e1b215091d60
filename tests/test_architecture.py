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
    importer, public = ROOT / "annotation" / "jsonl_records.py", ROOT / "annotation" / "public_formats.py"
    assert not {"annotation.jsonl_import", "annotation.jsonl_records"} & set().union(*modules_imported(public))
    top, inner = modules_imported(importer)
    assert "annotation.public_formats" in top and "annotation.public_formats" not in inner
    assert "annotation.record_fields" in top and "annotation.record_fields" in modules_imported(public)[0]


# --- the module import graph ---------------------------------------------------------


def project_modules() -> dict[str, Path]:
    """Every module of the apps and the project package, by its dotted name."""
    found = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING")


def project_imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function) for each import a module runs. Imports under
    ``if TYPE_CHECKING:`` never run, so they are no edge; ``from a import b`` names module ``a.b`` when
    there is one (``from annotation import services``), else ``a``."""

    def known(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            targets: list[str | None] = []
            if isinstance(child, ast.Import):
                targets = [known(alias.name) for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                module = (f"{base}.{child.module}" if child.module else base) if child.level else child.module or ""
                targets = [known(f"{module}.{alias.name}") or known(module) for alias in child.names]
            found.extend((target, child.lineno, in_function) for target in targets if target and target != name)
            visit(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): each holds a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                connect(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return cycles


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: {target for target, _, _ in project_imports(name, path, modules)} for name, path in modules.items()}


def test_no_module_imports_itself_through_others():
    """A circle is held open only by an import placed inside a function, and asks a reader to hold both
    modules in their head at once: the lower module is the one the others build on."""
    assert import_cycles(import_graph()) == []


def test_the_cycle_finder_sees_a_circle_through_a_function_level_import(tmp_path):
    (tmp_path / "a.py").write_text("from pkg.b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from pkg import a\n")
    modules = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py", "pkg": tmp_path / "__init__.py"}
    graph = {name: {t for t, _, _ in project_imports(name, modules[name], modules)} for name in ("pkg.a", "pkg.b")}
    assert graph == {"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert import_cycles(graph) == [["pkg.a", "pkg.b"]]
    assert import_cycles({"pkg.a": {"pkg.b"}, "pkg.b": set()}) == []


def explained(lines: list[str], line: int) -> bool:
    """Whether the import on ``line`` (1-based) has a comment on its line or above its block of imports."""
    if "#" in lines[line - 1]:
        return True
    above = line - 2
    while above >= 0 and lines[above].lstrip().startswith(("from ", "import ")):
        above -= 1
    return above >= 0 and lines[above].lstrip().startswith("#")


def unexplained_function_imports(path: Path, name: str, modules: dict[str, Path]) -> list[int]:
    """Lines of project imports inside functions that say nothing about why they are there."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = project_imports(name, path, modules)
    return sorted({line for _, line, in_function in found if in_function and not explained(lines, line)})


def test_a_project_import_inside_a_function_says_why():
    """Django's app loading (AppConfig.ready, a module Celery or the settings load before the apps) is the
    reason to import inside a function; a comment on the line, or the line before, says so."""
    modules = project_modules()
    unexplained = {}
    for name, path in modules.items():
        if lines := unexplained_function_imports(path, name, modules):
            unexplained[str(path.relative_to(ROOT))] = lines
    assert unexplained == {}


def test_it_notices_an_unexplained_function_level_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    from k12vista import jobs\n\n\ndef g():\n    from k12vista import roles  # app loading\n\n\n"
        "def h():\n    # app loading\n    from k12vista import text\n    from k12vista import jobs\n\n"
        "    from k12vista import roles\n"
    )
    modules = {"k12vista.m": module, "k12vista.jobs": module, "k12vista.roles": module, "k12vista.text": module}
    assert unexplained_function_imports(module, "k12vista.m", modules) == [2, 14]
