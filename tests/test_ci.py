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
