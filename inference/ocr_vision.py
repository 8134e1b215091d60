"""OCR of PDF pages by a vision-language model behind an OpenAI-compatible endpoint.

Plugged into the PDF importer by ``OCR_BACKEND = "inference.ocr_vision.VisionOCRBackend"``
(the question bank never imports this app). The endpoint is the ``ModelEndpoint``
named by the setting ``OCR_VISION_ENDPOINT``; it is looked up on every page, so
switching it off or pointing it elsewhere takes effect without a restart.

The model returns Markdown (the ``ocr_page`` prompt), which has no positions.
The importer needs a box per line to find columns, running headers and figure
labels, so each Markdown line gets a made-up box: a full-width band, in order
top to bottom, inside the page's body (clear of the top and bottom tenth,
where the layout code looks for running headers; the prompt already asks the
model to leave headers, footers and page numbers out). The layout then sees
one column in the model's reading order. ``OCRLine.score`` is None: the model
gives no confidence. The limit: a page that is a scan of text but also has
figures as separate images may lose lines whose made-up box falls on a figure
(the importer drops text inside figures as labels); whole-page scans, the case
OCR is for, have no such figures.
"""

from __future__ import annotations

import io
import logging
from typing import Any

from django.conf import settings
from PIL import Image

from annotation.ocr import OCRBackend, OCRLine, OCRResult, OCRServiceError, OCRUnavailable
from inference import calls, client, prompts
from inference.models import ModelEndpoint, PromptTemplate
from inference.parsing import answer_after_reasoning
from inference.services import ALLOWED_PARAMS

log = logging.getLogger(__name__)

# Body of the page, as shares of its height: inside annotation.pdf.layout.MARGIN (0.1).
BODY_TOP, BODY_BOTTOM = 0.12, 0.88
# Height of a made-up line, as a share of the page's (about one line of 10.5 pt text on A4);
# smaller when the page has more lines than fit.
LINE_SHARE = 0.03


class VisionOCRBackend(OCRBackend):
    name = "vision-model"
    reads_formulas = True  # the model writes formulas in LaTeX (the ocr_page prompt asks it to)
    # Seconds before the first retry of a busy or restarting server; doubled each time.
    backoff_seconds = 1.0

    def endpoint(self) -> ModelEndpoint:
        """The configured endpoint, or OCRUnavailable saying what to fix."""
        name = getattr(settings, "OCR_VISION_ENDPOINT", "")
        if not name:
            raise OCRUnavailable(
                "The vision-model OCR backend needs OCR_VISION_ENDPOINT: the name of a model endpoint "
                "that reads images."
            )
        endpoint = ModelEndpoint.objects.filter(name=name).first()
        if endpoint is None:
            raise OCRUnavailable(f"OCR_VISION_ENDPOINT={name!r}: no model endpoint has that name.")
        if not endpoint.active:
            raise OCRUnavailable(f"OCR_VISION_ENDPOINT={name!r}: the endpoint is switched off.")
        if endpoint.kind != ModelEndpoint.Kind.OPENAI:
            raise OCRUnavailable(f"OCR_VISION_ENDPOINT={name!r}: only OpenAI-compatible HTTP endpoints can OCR.")
        if not endpoint.accepts_images:
            raise OCRUnavailable(f"OCR_VISION_ENDPOINT={name!r}: the endpoint does not accept images.")
        return endpoint

    def recognize(self, image: Image.Image) -> OCRResult:
        endpoint = self.endpoint()
        prompts.ensure_default_prompts()
        system, user = prompts.render(prompts.current(PromptTemplate.Kind.OCR_PAGE))
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, "PNG")
        url = client.image_data_url(buffer.getvalue(), max_side=endpoint.max_image_side)
        messages = client.build_messages(system=system, user=user, image_urls=[url])
        params = {k: v for k, v in endpoint.default_params.items() if k in ALLOWED_PARAMS}
        text, finish_reason = self._complete(endpoint, messages, params)
        if finish_reason == "length":
            log.warning("OCR by %s was cut off at max_tokens; the page's text is incomplete", endpoint)
        return markdown_result(text, width=image.width, height=image.height)

    def _complete(self, endpoint: ModelEndpoint, messages: list[dict], params: dict[str, Any]) -> tuple[str, str]:
        """One synchronous call (the importer is synchronous) through the model-call
        layer: transient failures are retried there, then raised as OCRServiceError
        so that the import job retries later; anything else is a configuration
        problem (a wrong key, an unknown model) and raises OCRUnavailable."""
        try:
            completion = calls.complete_sync(endpoint, messages, params, backoff=self.backoff_seconds)
        except client.EndpointError as exc:  # outside the allowlist, or an undeclared key variable
            raise OCRUnavailable(f"OCR endpoint {endpoint}: {exc}") from exc
        except client.ModelCallError as exc:
            if not exc.transient:
                raise OCRUnavailable(f"OCR endpoint {endpoint} refused the request: {exc}") from exc
            raise OCRServiceError(f"OCR endpoint {endpoint} failed {exc.attempts} times: {exc}") from exc
        return completion.text, completion.finish_reason


def clean_markdown(text: str) -> str:
    """The model's Markdown without reasoning before </think> or a code fence
    wrapped around all of it (models add one although the prompt says not to)."""
    lines = answer_after_reasoning(text).splitlines()
    if lines and lines[0].lstrip().startswith("```"):
        lines = lines[1:]
        if lines and lines[-1].strip() == "```":
            lines = lines[:-1]
    return "\n".join(lines).strip()


def markdown_result(text: str, *, width: int, height: int) -> OCRResult:
    """Lines with made-up boxes (see the module docstring) and the Markdown as given."""
    markdown = clean_markdown(text)
    lines = [line.strip() for line in markdown.splitlines() if line.strip()]
    if not lines:
        return OCRResult()
    top, bottom = height * BODY_TOP, height * BODY_BOTTOM
    band = min((bottom - top) / len(lines), height * LINE_SHARE)
    boxes = [(0.0, top + i * band, float(width), top + (i + 1) * band) for i in range(len(lines))]
    return OCRResult(lines=[OCRLine(text=line, box=box) for line, box in zip(lines, boxes, strict=True)],
                     markdown=markdown)  # fmt: skip
