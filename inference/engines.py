"""vLLM's offline engine, for GPU workers (the optional ``gpu`` extra).

vllm is imported only here and only when a run needs it, so web servers and CPU
or io workers never load it. The engine is built once per worker process (it
owns the GPU) and fed whole batches: ``LLM.chat`` takes a list of conversations
in the same OpenAI message format the HTTP path sends.
"""

from __future__ import annotations

import time
from typing import Any

from inference.client import Completion
from inference.models import ModelEndpoint

# One engine per model per worker process; loading one takes minutes and the GPU.
_engines: dict[str, Any] = {}


class EngineUnavailable(RuntimeError):
    """vLLM is not installed on this worker, or the model cannot be loaded."""


def load_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise EngineUnavailable(
            "vLLM is not installed on this worker: install the gpu extra (pip install '.[gpu]') on GPU machines "
            "and start their worker with -Q gpu."
        ) from exc
    return vllm


def engine_for(endpoint: ModelEndpoint, *, seed: int | None = None) -> Any:
    vllm = load_vllm()
    if endpoint.model_name not in _engines:
        options = dict(endpoint.default_params.get("engine", {}))  # tensor_parallel_size, max_model_len...
        if seed is not None:
            options.setdefault("seed", seed)
        _engines[endpoint.model_name] = vllm.LLM(model=endpoint.model_name, **options)
    return _engines[endpoint.model_name]


def chat_batch(
    endpoint: ModelEndpoint, conversations: list[list[dict]], params: dict, seed: int | None = None
) -> list[Completion]:
    """One Completion per conversation, in order."""
    vllm = load_vllm()
    llm = engine_for(endpoint, seed=seed)
    sampling = vllm.SamplingParams(
        temperature=params.get("temperature", 0.0),
        top_p=params.get("top_p", 1.0),
        max_tokens=params.get("max_tokens", 2048),
        seed=seed,
    )
    started = time.perf_counter()
    outputs = llm.chat(conversations, sampling_params=sampling, use_tqdm=False)
    # The engine batches internally; per-item latency is the batch's share.
    each_ms = round((time.perf_counter() - started) * 1000 / max(len(outputs), 1))
    results = []
    for output in outputs:
        best = output.outputs[0]
        results.append(
            Completion(
                text=best.text,
                latency_ms=each_ms,
                prompt_tokens=len(output.prompt_token_ids or []),
                completion_tokens=len(best.token_ids or []),
                finish_reason=best.finish_reason or "",
                attempts=1,
            )
        )
    return results
