"""Calling a model through the OpenAI-compatible API (vllm serve, closed APIs,
transformers serve): the one client construction, what a call returns, and how
failures are classified. The calls themselves (retries, the shared limit per
endpoint, fan-out) are inference.calls."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Any

import openai
from PIL import Image

# Worth another try after a pause: the server is busy, restarting or slow.
TRANSIENT_STATUS = {408, 409, 429, 500, 502, 503, 504}


class ModelCallError(Exception):
    """A call that failed for good; ``transient`` says whether retrying later may help."""

    def __init__(self, message: str, *, transient: bool, attempts: int) -> None:
        super().__init__(message)
        self.transient = transient
        self.attempts = attempts


@dataclass(frozen=True)
class Completion:
    text: str
    latency_ms: int
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str
    attempts: int


def make_client(endpoint: Any, *, sync: bool = False) -> openai.AsyncOpenAI | openai.OpenAI:
    """The one place a client for an endpoint is built (runs, scoring, assist, OCR).

    ``max_retries=0``: inference.calls retries, so that every attempt is counted."""
    factory = openai.OpenAI if sync else openai.AsyncOpenAI
    return factory(base_url=endpoint.base_url, api_key=endpoint.api_key() or "missing",
                   timeout=endpoint.timeout_seconds, max_retries=0)  # fmt: skip


def image_data_url(content: bytes, *, max_side: int) -> str:
    """A figure as a JPEG data URL, shrunk on our side to the endpoint's largest side."""
    image = Image.open(io.BytesIO(content))
    image = image.convert("RGB")
    if max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def build_messages(*, system: str, user: str, image_urls: list[str] = ()) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    if image_urls:
        parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": url}} for url in image_urls]
        parts.append({"type": "text", "text": user})
        messages.append({"role": "user", "content": parts})
    else:
        messages.append({"role": "user", "content": user})
    return messages


def is_transient(exc: Exception) -> bool:
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code in TRANSIENT_STATUS


def describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, str | dict) else ""
        return f"HTTP {exc.status_code}: {body or exc.message}"[:2000]
    return f"{type(exc).__name__}: {exc}"[:2000]
