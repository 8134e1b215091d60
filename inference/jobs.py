"""Importing these registers the inference job handlers."""

from inference import assist, scoring, services  # noqa: F401
