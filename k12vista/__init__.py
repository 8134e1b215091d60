# The Celery app is loaded with Django so that tasks' delay() finds its broker.
from k12vista.celery import app as celery_app

__all__ = ["celery_app"]
