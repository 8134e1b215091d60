"""Personas: one user per role, created through the same service the admin
screen uses; and a real Celery worker for tests that need jobs to run."""

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from django.conf import settings
from django.core.signals import setting_changed
from django.db import connection
from django.dispatch import receiver
from rest_framework.test import APIClient

from k12vista import services
from k12vista.roles import Role

# The model fixtures are session-scoped: defined here once, each is started once per run (a fixture
# imported into several modules would be one fixture per module, and one model server each).
from tests.model_server import tiny_model_dir, tiny_model_server  # noqa: F401

PASSWORD = "correct horse battery staple"


@receiver(setting_changed)
def _sendfile_follows_media_root(*, setting, value, **kwargs):
    """Tests keep their files in a MEDIA_ROOT of their own; the file sender must look there too
    (settings.py sets SENDFILE_ROOT = MEDIA_ROOT once, at start-up)."""
    if setting == "MEDIA_ROOT":
        settings.SENDFILE_ROOT = value


# Fixtures through which a test reaches the test database (pytest-django's, the live server's), or a
# database of its own on the test run's server (tests/test_bench_scripts.py).
DATABASE_FIXTURES = {
    "bench_database",
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "live_server",
}


def pytest_addoption(parser):
    parser.addoption(
        "--database-tests-only",
        action="store_true",
        help="run only the tests that use the test run's database: CI runs the suite on two databases, and a "
        "test that uses none (PDF reading, bench scripts with their own settings) gives the same result on both",
    )


def uses_the_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(DATABASE_FIXTURES & set(item.fixturenames))


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--database-tests-only"):
        return
    kept, free = [], []
    for item in items:
        (kept if uses_the_database(item) else free).append(item)
    if free:
        config.hook.pytest_deselected(items=free)
        items[:] = kept


@pytest.fixture(autouse=True)
def _imports_in_the_test_thread(settings):
    """Import threads open their own database connections, which cannot see a
    test's uncommitted transaction; tests of the threads themselves say so."""
    settings.IMPORT_WORKERS = 1


@pytest.fixture(autouse=True)
def _model_servers_on_free_ports(settings):
    """The tests' model servers (scripted fakes, transformers serve) listen on free
    ports picked at random, so any local port is allowed here; production's default
    names only the ports of local model servers (tests/test_model_calls.py checks it)."""
    settings.MODEL_URL_ALLOWLIST = ["http://127.0.0.1:*", "http://localhost:*"]
    # ... and the tests' key variables may go to them (and to the lab host the URL tests name);
    # production binds only OPENAI_API_KEY, to OpenAI (tests/test_key_binding.py checks the binding).
    settings.MODEL_API_KEY_URLS = {
        **settings.MODEL_API_KEY_URLS,
        "K12VISTA_KEY_*": ["http://127.0.0.1:*", "http://localhost:*", "https://gpu01.lab:8000"],
    }


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Production hashes passwords with PBKDF2 at over a million iterations (the
    point of it); tests create hundreds of users, so they use a fast hasher."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_throttle_history_from_earlier_tests():
    """The API throttle counts each user's calls in the cache. On SQLite a rolled-back test gives its
    users' ids to the next test, and the in-process cache outlives the test: without this, the calls of
    earlier tests in the same minute count against a later test's user, which then gets a 429."""
    from django.core.cache import caches
    from django.core.cache.backends.locmem import LocMemCache

    for cache in caches.all():
        if isinstance(cache, LocMemCache):  # the test process's own; a shared Redis is never flushed
            cache.clear()


@pytest.fixture
def english(settings):
    """Service messages come in the team's language (Chinese unless chosen
    otherwise); tests that read them ask for English."""
    from django.utils import translation

    settings.LANGUAGE_CODE = "en"
    with translation.override("en"):
        yield


@pytest.fixture
def tmp_media(settings, tmp_path):
    """The files a test writes (uploads, figures, release files) go under its own tmp_path,
    not the shared DATA_DIR; a module asks for it with ``pytest.mark.usefixtures("tmp_media")``."""
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def no_broker():
    """Started jobs send no message (there is no broker in the tests); the mock says what was sent."""
    with mock.patch("k12vista.tasks.run_job.apply_async") as apply_async:
        yield apply_async


@pytest.fixture
def api():
    """API clients: ``api(user)`` is signed in as the user (no CSRF, as a token would be), ``api()``
    is anonymous, ``api(csrf=True)`` checks CSRF on a session login as a browser's would be."""

    def _as(user=None, *, csrf=False):
        client = APIClient(enforce_csrf_checks=csrf)
        if user is not None:
            client.force_authenticate(user)
        return client

    return _as


def make_person(username: str, *roles: Role):
    return services.create_user(username=username, roles=list(roles), password=PASSWORD)


@pytest.fixture
def annotator(db):
    return make_person("alice", Role.ANNOTATOR)


@pytest.fixture
def other_annotator(db):
    return make_person("amy", Role.ANNOTATOR)


@pytest.fixture
def inspector(db):
    return make_person("ivan", Role.INSPECTOR)


@pytest.fixture
def researcher(db):
    return make_person("rita", Role.RESEARCHER)


@pytest.fixture
def administrator(db):
    return make_person("ada", Role.ADMIN)


@pytest.fixture
def no_role_user(db):
    return make_person("nobody")


@pytest.fixture
def personas(annotator, inspector, researcher, administrator):
    return {
        Role.ANNOTATOR: annotator,
        Role.INSPECTOR: inspector,
        Role.RESEARCHER: researcher,
        Role.ADMIN: administrator,
    }


@pytest.fixture
def login(client):
    def _login(user):
        client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
        return client

    return _login


ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}"


def start_worker(*, name: str = "w", queues: str = "cpu,io", **extra_env: str) -> subprocess.Popen:
    """A Celery worker process on the configured broker and the test database (a GPU worker: ``queues="gpu"``)."""
    env = {**os.environ, "DATABASE_URL": database_url(), "DEBUG": "1", "DATA_DIR": str(settings.DATA_DIR)}
    env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    # The worker checks model URLs and key variables again at call time: it gets the test's rules.
    env["MODEL_URL_ALLOWLIST"] = ",".join(settings.MODEL_URL_ALLOWLIST)
    env["MODEL_API_KEY_VARIABLES"] = ",".join(settings.MODEL_API_KEY_VARIABLES)
    env.update(extra_env)
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "k12vista", "worker", "-Q", queues, "--pool", "solo",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "WARNING",
         "--hostname", f"test-{name}-{os.getpid()}@%h"],
        cwd=ROOT, env=env,
    )  # fmt: skip


def stop_worker(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def worker(transactional_db):
    process = start_worker()
    yield process
    stop_worker(process)
