"""transformers on CPU: small models run by the worker itself, a batch at a time.

This module imports neither Django nor the rest of the studio, so it runs in
two ways:

* in the worker's own Python, when that Python has torch and transformers
  (the ``ml`` extra);
* as a script in another Python (``TRANSFORMERS_PYTHON``): the worker writes the
  batch as JSON to its stdin and reads the completions from its stdout. Django
  6 needs Python 3.12 while a CPU torch build may exist only for another
  Python, as on our CI machine; this keeps the two apart.

Conversations come in the OpenAI message format the HTTP path sends (text
parts and ``image_url`` parts with data URLs), so prompts are built once.
"""

from __future__ import annotations

import base64
import io
import json
import sys
import time
from typing import Any

# One loaded model per process: loading costs far more than a small batch.
_loaded: dict[str, tuple[Any, Any]] = {}


def _load(model_path: str) -> tuple[Any, Any]:
    if model_path not in _loaded:
        import transformers

        # Vision-language models first (the benchmark has an image in every
        # question); plain causal LMs serve text-only runs with captions.
        try:
            processor = transformers.AutoProcessor.from_pretrained(model_path)
            model = transformers.AutoModelForImageTextToText.from_pretrained(model_path, dtype="float32")
        except (ValueError, KeyError, OSError):
            processor = transformers.AutoTokenizer.from_pretrained(model_path)
            model = transformers.AutoModelForCausalLM.from_pretrained(model_path, dtype="float32")
        model.eval()
        _loaded[model_path] = (processor, model)
    return _loaded[model_path]


def _image(url: str):
    from PIL import Image

    if not url.startswith("data:"):
        raise ValueError("the transformers engine takes images as data URLs only (it never fetches)")
    payload = url.split(",", 1)[1]
    return Image.open(io.BytesIO(base64.b64decode(payload))).convert("RGB")


def _messages(conversation: list[dict]) -> list[dict]:
    """OpenAI parts -> transformers chat parts (images as PIL images)."""
    converted = []
    for message in conversation:
        content = message["content"]
        if isinstance(content, str):
            converted.append({"role": message["role"], "content": [{"type": "text", "text": content}]})
            continue
        parts = []
        for part in content:
            if part.get("type") == "image_url":
                parts.append({"type": "image", "image": _image(part["image_url"]["url"])})
            elif part.get("type") == "text":
                parts.append({"type": "text", "text": part["text"]})
        converted.append({"role": message["role"], "content": parts})
    return converted


def generate(model_path: str, conversations: list[list[dict]], params: dict, seed: int | None = None) -> list[dict]:
    """One completion dict per conversation, in order: text, token counts, finish reason, latency."""
    import torch

    processor, model = _load(model_path)
    if seed is not None:
        torch.manual_seed(seed)
    max_new = int(params.get("max_tokens", 512))
    temperature = float(params.get("temperature", 0.0))
    sampling = {"do_sample": True, "temperature": temperature, "top_p": float(params.get("top_p", 1.0))}
    options = sampling if temperature > 0 else {"do_sample": False}
    eos = getattr(model.generation_config, "eos_token_id", None)
    results = []
    # One conversation at a time: small CPU models gain little from padding
    # batches, and a bad item then fails alone.
    for conversation in conversations:
        started = time.perf_counter()
        inputs = processor.apply_chat_template(
            _messages(conversation), add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
        )
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=max_new, **options)
        prompt_len = inputs["input_ids"].shape[1]
        new_tokens = output[0][prompt_len:]
        tokenizer = getattr(processor, "tokenizer", processor)
        stopped = (
            eos is not None and len(new_tokens) and int(new_tokens[-1]) in (eos if isinstance(eos, list) else [eos])
        )
        results.append(
            {
                "text": tokenizer.decode(new_tokens, skip_special_tokens=True),
                "prompt_tokens": int(prompt_len),
                "completion_tokens": len(new_tokens),
                "finish_reason": "stop" if stopped else "length",
                "latency_ms": round((time.perf_counter() - started) * 1000),
            }
        )
    return results


def main() -> int:
    """Script mode: {"model", "conversations", "params", "seed"} on stdin -> {"completions": [...]} on stdout."""
    request = json.load(sys.stdin)
    try:
        completions = generate(
            request["model"], request["conversations"], request.get("params", {}), request.get("seed")
        )
    except Exception as exc:  # reported to the worker, which records it on the job
        json.dump({"error": f"{type(exc).__name__}: {exc}"}, sys.stdout)
        return 1
    json.dump({"completions": completions}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
