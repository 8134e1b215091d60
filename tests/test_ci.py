"""Under CI a missing part fails the run; elsewhere it skips."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ci
from tests import test_pipeline_example as pipeline_example
from tests.test_pipeline_example import training  # noqa: F401 (the fixture)


def test_a_missing_part_skips_on_a_developers_machine(monkeypatch):
    monkeypatch.setattr(ci, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="no .venv-ml"):
        ci.missing("no .venv-ml")


def test_a_missing_part_fails_under_ci(monkeypatch):
    monkeypatch.setattr(ci, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        ci.missing("no .venv-ml")


def test_the_pipeline_example_fails_under_ci_without_ml_venv(monkeypatch, request):
    monkeypatch.setattr(pipeline_example, "ml_venv_missing_reason", lambda: "no .venv-ml")
    monkeypatch.setattr(ci, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="no .venv-ml.*CI=true"):
        request.getfixturevalue("training")


def test_the_pipeline_example_runs_without_training_and_says_so_elsewhere(monkeypatch, request):
    monkeypatch.setattr(pipeline_example, "ml_venv_missing_reason", lambda: "no .venv-ml")
    monkeypatch.setattr(ci, "IN_CI", False)
    with pytest.warns(UserWarning, match="without training: no .venv-ml"):
        assert request.getfixturevalue("training") is None


def test_ci_is_read_from_the_environment(monkeypatch):
    import importlib

    for value, expected in (("true", True), ("1", True), ("", False), ("false", False)):
        monkeypatch.setenv("CI", value)
        assert importlib.reload(ci).IN_CI is expected
    monkeypatch.undo()
    importlib.reload(ci)


def test_the_postgresql_ci_run_leaves_out_only_the_tests_that_use_no_database():
    """.ci/run's PostgreSQL run passes --database-tests-only: a test with the db fixture, the django_db mark
    or a bench database stays; one that reaches no database of the run (the embedded default's run runs
    it) is left out."""
    repo = Path(__file__).resolve().parents[1]
    assert '"redis://127.0.0.1:6379/15" "--database-tests-only"' in (repo / ".ci" / "run").read_text()
    files = ["tests/test_ci.py", "tests/test_roles.py", "tests/test_query_numbers.py", "tests/test_bench_scripts.py"]
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--database-tests-only",
         *files],
        cwd=repo, capture_output=True, text=True, env={**os.environ, "DEBUG": "1"}, timeout=120,
    )  # fmt: skip
    kept = {line.split(" ")[0] for line in collected.stdout.splitlines() if "::" in line}
    assert {name.split("::")[0] for name in kept} == {"tests/test_roles.py", "tests/test_query_numbers.py",
                                                      "tests/test_bench_scripts.py"}, collected.stdout  # fmt: skip
    bench = {name.split("::")[1] for name in kept if "bench_scripts" in name}
    assert "test_cluster_postgresql" in bench and "test_cluster" not in bench
    assert "deselected" in collected.stdout
