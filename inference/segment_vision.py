"""Cutting a PDF page into questions by a vision-language model behind an OpenAI-compatible endpoint.

Plugged into the PDF importer by ``SEGMENTATION_BACKEND = "inference.segment_vision.VisionSegmentBackend"``
(the question bank never imports this app; annotation.pdf.vision says when a page is sent and what is
done with the reply). The endpoint is the ``ModelEndpoint`` named by ``SEGMENTATION_ENDPOINT``, or by
``OCR_VISION_ENDPOINT`` when that is empty (one vision model usually does both), looked up on every
page. The call goes through the one model-call layer (``calls.complete_sync``, as OCR by a vision model
does), with the reply's JSON schema (annotation.pdf.vision.VisionPage) as ``response_format``, so a
server with guided decoding (vLLM) writes only what the schema allows; the importer checks it again.
"""

from __future__ import annotations

import copy
import io
from typing import Any

from django.conf import settings
from PIL import Image

from annotation.pdf.vision import SegmentationBackend, VisionPage, VisionServiceError, VisionUnavailable
from inference import calls, client, prompts
from inference.models import ModelEndpoint, PromptTemplate
from inference.parsing.formats import _inline
from inference.services import ALLOWED_PARAMS

SCHEMA = _inline(VisionPage.model_json_schema())
TEXT_LIMIT = 6000  # characters of a page's text layer sent with its image: a page is about 2,000


def response_format() -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "page_questions", "schema": copy.deepcopy(SCHEMA)}}


class VisionSegmentBackend(SegmentationBackend):
    name = "vision-model"
    backoff_seconds = 1.0  # before the first retry of a busy server; doubled each time

    def endpoint(self) -> ModelEndpoint:
        """The configured endpoint, or VisionUnavailable saying what to fix."""
        setting = "SEGMENTATION_ENDPOINT" if getattr(settings, "SEGMENTATION_ENDPOINT", "") else "OCR_VISION_ENDPOINT"
        name = getattr(settings, setting, "")
        if not name:
            raise VisionUnavailable(
                "The vision-model segmentation backend needs SEGMENTATION_ENDPOINT (or OCR_VISION_ENDPOINT): "
                "the name of a model endpoint that reads images.",
                cause="endpoint_unset",
            )
        # Each cause is a code worded where the note is shown (annotation.pdf.notes), in the reader's language.
        endpoint = ModelEndpoint.objects.filter(name=name).first()
        if endpoint is None:
            raise VisionUnavailable(f"{setting}={name!r}: no model endpoint has that name.",
                                    cause="endpoint_unknown", setting=setting, name=name)  # fmt: skip
        if not endpoint.active:
            raise VisionUnavailable(f"{setting}={name!r}: the endpoint is switched off.",
                                    cause="endpoint_off", setting=setting, name=name)  # fmt: skip
        if endpoint.kind != ModelEndpoint.Kind.OPENAI:
            raise VisionUnavailable(f"{setting}={name!r}: only OpenAI-compatible HTTP endpoints can read pages.",
                                    cause="endpoint_not_http", setting=setting, name=name)  # fmt: skip
        if not endpoint.accepts_images:
            raise VisionUnavailable(f"{setting}={name!r}: the endpoint does not accept images.",
                                    cause="endpoint_no_images", setting=setting, name=name)  # fmt: skip
        return endpoint

    def read_page(self, *, image: bytes, text: str, page: int) -> str:
        endpoint = self.endpoint()
        prompts.ensure_default_prompts()
        system, user = prompts.render(prompts.current(PromptTemplate.Kind.SEGMENT_PAGE),
                                      page_text=text[:TEXT_LIMIT])  # fmt: skip
        buffer = io.BytesIO()
        Image.open(io.BytesIO(image)).convert("RGB").save(buffer, "PNG")
        url = client.image_data_url(buffer.getvalue(), max_side=endpoint.max_image_side)
        messages = client.build_messages(system=system, user=user, image_urls=[url])
        params = {k: v for k, v in endpoint.default_params.items() if k in ALLOWED_PARAMS}
        params["response_format"] = response_format()
        try:
            completion = calls.complete_sync(endpoint, messages, params, backoff=self.backoff_seconds)
        except client.EndpointError as exc:  # outside the allowlist, or an undeclared key variable
            raise VisionUnavailable(f"endpoint {endpoint}: {exc}", cause="endpoint_not_allowed",
                                    name=endpoint.name) from exc  # fmt: skip
        except client.ModelCallError as exc:
            if not exc.transient:  # the server's own words, as it said them
                raise VisionUnavailable(f"endpoint {endpoint} refused the request: {exc}",
                                        cause="endpoint_refused", name=endpoint.name) from exc  # fmt: skip
            raise VisionServiceError(f"endpoint {endpoint} failed {exc.attempts} times: {exc}") from exc
        return completion.text
