"""The question bank's job handlers live beside their services; importing
them here registers them when the job mechanism discovers each app's jobs.py."""

from annotation import draw, export, jsonl_import, knowledge, pdf, releases  # noqa: F401
