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


# The studio's own cap for small CPU models (a run's max_tokens overrides it).
STUDIO_MAX_NEW_TOKENS = 512


def context_length(config: Any) -> int | None:
    """The model's context (its language model's, for a vision-language model), if it states one."""
    for source in (config, getattr(config, "text_config", None)):
        found = getattr(source, "max_position_embeddings", None) if source is not None else None
        if isinstance(found, int) and found > 0:
            return found
    return None


def generation_options(params: dict, *, engine_defaults: bool, context: int | None, prompt_len: int) -> dict:
    """``generate()``'s length and sampling arguments. The studio: greedy unless a temperature is
    set, at most STUDIO_MAX_NEW_TOKENS. ``engine_defaults`` (the reference protocol, which sends
    neither): what a run sets, the rest left as an OpenAI-compatible server leaves it, the length
    bounded by the context only and the sampling the model's own generation config."""
    options: dict[str, Any] = {}
    if "max_tokens" in params:
        options["max_new_tokens"] = int(params["max_tokens"])
    elif engine_defaults:
        options["max_new_tokens"] = max(context - prompt_len, 1) if context else None
    else:
        options["max_new_tokens"] = STUDIO_MAX_NEW_TOKENS
    if options["max_new_tokens"] is None:
        del options["max_new_tokens"]  # the generation config's own, when the model states no context
    if engine_defaults:
        if "temperature" in params:
            temperature = float(params["temperature"])
            options |= {"do_sample": temperature > 0} | ({"temperature": temperature} if temperature > 0 else {})
        if "top_p" in params:
            options["top_p"] = float(params["top_p"])
        return options
    temperature = float(params.get("temperature", 0.0))
    sampling = {"do_sample": True, "temperature": temperature, "top_p": float(params.get("top_p", 1.0))}
    return options | (sampling if temperature > 0 else {"do_sample": False})


def generate(
    model_path: str, conversations: list[list[dict]], params: dict, seed: int | None = None,
    engine_defaults: bool = False,
) -> list[dict]:  # fmt: skip
    """One completion dict per conversation, in order: text, token counts, finish reason, latency."""
    import torch

    processor, model = _load(model_path)
    if seed is not None:
        torch.manual_seed(seed)
    context = context_length(model.config)
    eos = getattr(model.generation_config, "eos_token_id", None)
    results = []
    # One conversation at a time: small CPU models gain little from padding
    # batches, and a bad item then fails alone.
    for conversation in conversations:
        started = time.perf_counter()
        inputs = processor.apply_chat_template(
            _messages(conversation), add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
        )
        prompt_len = inputs["input_ids"].shape[1]
        options = generation_options(params, engine_defaults=engine_defaults, context=context, prompt_len=prompt_len)
        with torch.no_grad():
            output = model.generate(**inputs, **options)
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
            request["model"], request["conversations"], request.get("params", {}), request.get("seed"),
            bool(request.get("engine_defaults")),
        )  # fmt: skip
    except Exception as exc:  # reported to the worker, which records it on the job
        json.dump({"error": f"{type(exc).__name__}: {exc}"}, sys.stdout)
        return 1
    json.dump({"completions": completions}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
