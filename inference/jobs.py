"""Importing these registers the inference job handlers."""

from inference import scoring, services  # noqa: F401
