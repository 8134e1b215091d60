"""Importing these registers the inference job handlers."""

from inference import assist, difficulty, engine_runs, scoring, services  # noqa: F401
from inference.reference import results  # noqa: F401
