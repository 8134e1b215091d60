"""Importing these registers the inference job handlers."""

from inference import assist, difficulty, scoring, services  # noqa: F401
from inference.reference import results  # noqa: F401
