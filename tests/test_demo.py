import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from annotation.models import Question
from k12vista.management.commands.load_demo import DEMO_ACCOUNTS, DEMO_PASSWORD
from k12vista.roles import roles_of


@pytest.mark.django_db
def test_it_loads_one_account_per_role_once(settings):
    settings.DEMO_MODE = True
    call_command("load_demo")
    call_command("load_demo")
    User = get_user_model()
    assert User.objects.count() == len(DEMO_ACCOUNTS)
    assert Question.objects.count() == 30  # fixtures/demo_questions.jsonl, once
    for username, role in DEMO_ACCOUNTS:
        user = User.objects.get(username=username)
        assert roles_of(user) == [role] and user.check_password(DEMO_PASSWORD)


@pytest.mark.django_db
def test_it_refuses_demo_data_outside_demo_mode(settings):
    settings.DEMO_MODE = False
    with pytest.raises(CommandError, match="DEMO_MODE"):
        call_command("load_demo")
    assert not get_user_model().objects.exists()
