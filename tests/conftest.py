"""Personas: one user per role, created through the same service the admin screen uses."""

import pytest

from k12vista import services
from k12vista.roles import Role

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _imports_in_the_test_thread(settings):
    """Import threads open their own database connections, which cannot see a
    test's uncommitted transaction; tests of the threads themselves say so."""
    settings.IMPORT_WORKERS = 1


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
