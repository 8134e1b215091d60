"""Skips that CI turns into failures.

A test that needs a part of the machine (.venv-ml, redis-server, Node.js,
../shared/realdata) skips on a developer's machine without it, but under CI
(``CI=true``, set by .ci/run) the part is expected: a missing one fails the run
instead of passing it quietly with the real-model tests left out."""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing(reason: str) -> None:
    """Skips the test, or fails it under CI."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: a missing part fails the run)", pytrace=False)
    pytest.skip(reason)


def needs(present: bool, reason: str) -> pytest.MarkDecorator:
    """A skipif mark that never skips under CI: the test runs and fails there."""
    return pytest.mark.skipif(not present and not IN_CI, reason=reason)
