"""The Celery app. Workers pick their queues on the command line:

celery -A k12vista worker -Q cpu   # imports, exports, statistics
celery -A k12vista worker -Q io    # calls to model servers
celery -A k12vista worker -Q gpu   # in-process vLLM (optional gpu extra)
"""

import logging
import os
import threading
from pathlib import Path

from celery import Celery, bootsteps
from celery.signals import worker_process_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")

app = Celery("k12vista")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
log = logging.getLogger(__name__)


@app.on_after_configure.connect
def ensure_broker_folders(sender: Celery, **kwargs) -> None:
    """The filesystem broker does not create its folders' parents. Runs when
    the configuration is first read, so importing this module reads no settings."""
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if key in options:
            Path(options[key]).mkdir(parents=True, exist_ok=True)


@worker_process_shutdown.connect
def forget_process_metrics(pid: int | None = None, **kwargs) -> None:
    """In Prometheus' multiprocess mode (PROMETHEUS_MULTIPROC_DIR set, k12vista.metrics) a
    pool process that ends must stop counting its calls in flight."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())


class JobSweeper(bootsteps.StartStopStep):
    """Every worker sweeps the Job table every JOB_SWEEP_INTERVAL_SECONDS (see
    jobs.sweep): no beat process to forget, and a sweep needs no broker message,
    so it also runs while the broker is down and sends once it is back.

    It runs in a thread of the worker's main process, started after the pool
    so no forked child inherits its database connection; the connection is
    closed after each sweep.
    """

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, **kwargs) -> None:
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, worker) -> None:
        self.thread = threading.Thread(target=self.run, name="job-sweeper", daemon=True)
        self.thread.start()

    def stop(self, worker) -> None:
        self.stopping.set()

    def run(self) -> None:
        from django.conf import settings
        from django.db import connections

        from k12vista import jobs  # Celery loads this module before Django's apps, which jobs needs

        interval = settings.JOB_SWEEP_INTERVAL_SECONDS
        while True:  # a first sweep at start-up, for a worker restarted after a crash
            try:
                jobs.sweep()
            except Exception:
                log.exception("job sweep failed; trying again in %ss", interval)
            finally:
                connections.close_all()
            if self.stopping.wait(interval):
                return


app.steps["worker"].add(JobSweeper)
