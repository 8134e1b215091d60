"""gunicorn settings for the studio: ``gunicorn -c python:k12vista.gunicorn_conf k12vista.wsgi``.

Every value comes from the environment (the names below), with defaults for a
small lab server. Why these:

- ``preload_app``: Django is loaded once in the master and workers are forked
  from it. Without it a reload (HUP) imports Django in every worker at once,
  which on two cores stalled pages for 2-4 s. With it, HUP forks fresh workers
  in milliseconds but does not load new code: to deploy new code, send USR2
  (a new master with the new code starts beside the old one), then WINCH and
  QUIT to the old master once the new one answers (see README, Production).
- ``graceful_timeout``: a worker told to stop finishes its requests first;
  uploads and exports may take a while.
- ``threads``: requests wait mostly on PostgreSQL; a few threads per process
  serve more people in the same memory.
"""

import multiprocessing
import os


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, "") or default)


bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = _int("GUNICORN_WORKERS", min(4, multiprocessing.cpu_count() + 1))
threads = _int("GUNICORN_THREADS", 4)
worker_class = "gthread"
preload_app = True
timeout = _int("GUNICORN_TIMEOUT", 60)
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = 5
# The TLS proxy in front sets X-Forwarded-Proto; trust it only from itself.
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
errorlog = "-"


def when_ready(server) -> None:
    """Warms what Django otherwise loads on each worker's first request (every
    view module, both translation catalogs, the shared templates), so forked
    workers start warm; then closes anything the master opened, since a
    database connection must never be shared by forked workers."""
    from django.conf import settings
    from django.db import connections
    from django.template.loader import get_template
    from django.urls import get_resolver
    from django.utils import translation

    get_resolver().url_patterns  # noqa: B018 (imports every view module)
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            translation.gettext("Cancel")
    for name in ("base.html", "registration/login.html", "k12vista/_job_progress.html"):
        get_template(name)
    connections.close_all()


def child_exit(server, worker) -> None:
    """In Prometheus' multiprocess mode (PROMETHEUS_MULTIPROC_DIR set), a worker that
    exits leaves its files behind: its calls in flight must stop counting."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
