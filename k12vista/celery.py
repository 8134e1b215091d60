"""The Celery app. Workers pick their queues on the command line:

celery -A k12vista worker -Q cpu   # imports, exports, statistics
celery -A k12vista worker -Q io    # calls to model servers
celery -A k12vista worker -Q gpu   # in-process vLLM (optional gpu extra)
"""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "k12vista.settings")

app = Celery("k12vista")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def ensure_broker_folders(sender: Celery, **kwargs) -> None:
    """The filesystem broker does not create its folders' parents. Runs when
    the configuration is first read, so importing this module reads no settings."""
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if key in options:
            Path(options[key]).mkdir(parents=True, exist_ok=True)
