"""Start-up configuration, checked in fresh interpreters as a deployment would run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "t9#Vq2@Lm8$Zr4^Wx6&Kp1*Nb7(Hs3)Jd5-Fg0+Cy2=Ue8_Ao4",
    "ALLOWED_HOSTS": "studio.example.org",
    "BEHIND_TLS": "1",
}


def run_django(env_overrides: dict, *args: str) -> subprocess.CompletedProcess:
    # A deployment has none of the test run's own settings (the browser tests allow async-unsafe ORM calls).
    unset = ("DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "BEHIND_TLS", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"DEBUG": "0"}, "SECRET_KEY"),
        ({"DEBUG": "maybe"}, "DEBUG"),
        ({**PRODUCTION, "ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS"),
        ({"DEBUG": "1", "DATABASE_URL": "nosuchdb://x"}, "DATABASE_URL"),
        ({"DEBUG": "1", "CELERY_BROKER_URL": "kafka://x"}, "CELERY_BROKER_URL"),
        ({"DEBUG": "1", "JOB_STALE_AFTER_SECONDS": "soon"}, "JOB_STALE_AFTER_SECONDS"),
    ],
)
def test_it_refuses_to_start_naming_the_bad_variable(overrides, named):
    result = run_django(overrides, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert named in result.stderr.strip().splitlines()[-1]


def test_it_passes_the_deployment_checklist_with_production_settings():
    result = run_django(PRODUCTION, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_it_is_not_in_debug_unless_asked():
    result = run_django(
        {k: v for k, v in PRODUCTION.items() if k != "DEBUG"},
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.DEBUG, settings.SESSION_COOKIE_SECURE)",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]


def test_it_ties_the_redis_visibility_timeout_to_job_takeover():
    """Redis' default (an hour) left a killed worker's job running that long."""
    result = run_django(
        {"DEBUG": "1", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/3", "JOB_STALE_AFTER_SECONDS": "120",
         "JOB_SWEEP_INTERVAL_SECONDS": "10"},
        "shell", "--no-imports", "-c",
        "from k12vista.celery import app; app.loader.import_default_modules(); "
        "print(app.conf.broker_transport_options['visibility_timeout'], app.conf.task_acks_late)",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["130", "True"]


def test_the_gunicorn_config_preloads_and_reads_its_sizes_from_the_environment():
    env = {**os.environ, **PRODUCTION, "GUNICORN_WORKERS": "3", "GUNICORN_THREADS": "6"}
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--print-config", "-c", "python:k12vista.gunicorn_conf", "k12vista.wsgi"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    printed = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    values = {key.strip(): value.strip() for key, value in printed.items()}
    assert (values["preload_app"], values["workers"], values["threads"]) == ("True", "3", "6")
    assert values["graceful_timeout"] == "30"
