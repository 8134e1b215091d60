"""Under CI a missing part fails the run; elsewhere it skips."""

import pytest

from tests import ci


def test_a_missing_part_skips_on_a_developers_machine(monkeypatch):
    monkeypatch.setattr(ci, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="no .venv-ml"):
        ci.missing("no .venv-ml")


def test_a_missing_part_fails_under_ci(monkeypatch):
    monkeypatch.setattr(ci, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        ci.missing("no .venv-ml")


def test_ci_is_read_from_the_environment(monkeypatch):
    import importlib

    for value, expected in (("true", True), ("1", True), ("", False), ("false", False)):
        monkeypatch.setenv("CI", value)
        assert importlib.reload(ci).IN_CI is expected
    monkeypatch.undo()
    importlib.reload(ci)


def test_the_second_ci_run_leaves_out_only_the_tests_that_use_no_database():
    """.ci/run's embedded-default run passes --database-tests-only: a test with the db fixture or the
    django_db mark stays, one that reaches no test database (it ran in the PostgreSQL run) is left out."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    assert '"--database-tests-only"' in (repo / ".ci" / "run").read_text()
    files = ["tests/test_ci.py", "tests/test_roles.py", "tests/test_query_numbers.py"]
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--database-tests-only",
         *files],
        cwd=repo, capture_output=True, text=True, env={**os.environ, "DEBUG": "1"}, timeout=120,
    )  # fmt: skip
    kept = {line.split("::")[0] for line in collected.stdout.splitlines() if "::" in line}
    assert kept == {"tests/test_roles.py", "tests/test_query_numbers.py"}, collected.stdout + collected.stderr
    assert "deselected" in collected.stdout
