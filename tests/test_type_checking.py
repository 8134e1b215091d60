"""mypy checks every module of the studio (issue 27 item 5): no module is let off its errors, and an error
silenced on one line names its code, so that a new kind of error on that line is still reported."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ["k12vista", "annotation", "inference", "pem", "review"]


def test_no_module_is_let_off_its_errors():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["files"] == APPS
    let_off = [override["module"] for override in config.get("overrides", []) if override.get("ignore_errors")]
    assert let_off == []


def test_every_silenced_line_names_its_error_code():
    bare = re.compile(r"#\s*type:\s*ignore(?!\[[a-z-]+(,\s*[a-z-]+)*\])")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if bare.search(line)
    ]
    assert found == []
