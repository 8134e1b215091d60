"""Importing the services registers the inference job handlers."""

from inference import services  # noqa: F401
