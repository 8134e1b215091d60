"""Engines that run models inside a worker instead of behind an HTTP server.

vLLM's offline engine, for GPU workers (the optional ``gpu`` extra), and
transformers on CPU for small models (inference.local_engine).

vllm is imported only here and only when a run needs it, so web servers and CPU
or io workers never load it. The engine is built once per model per worker process
(it owns the GPU) and fed whole batches: ``LLM.chat`` takes a list of conversations
in the same OpenAI message format the HTTP path sends. A worker keeps at most
OFFLINE_ENGINES_PER_WORKER engines live: one for another model first releases the
least recently used, since two large models do not fit on one GPU together.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings

from inference import local_engine
from inference.client import Completion
from inference.models import ModelEndpoint
from k12vista import metrics

logger = logging.getLogger(__name__)

# Live engines of this worker process by model, least recently used first; loading
# one takes minutes and the GPU's memory.
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
    model = endpoint.model_name
    if model in _engines:
        _engines[model] = _engines.pop(model)  # now the most recently used
        return _engines[model]
    # Free the GPU before loading: the new engine sizes its KV cache from the memory it finds free.
    while _engines and len(_engines) >= settings.OFFLINE_ENGINES_PER_WORKER:
        oldest = next(iter(_engines))
        _release(oldest, _engines.pop(oldest))
    options = dict(endpoint.default_params.get("engine", {}))  # tensor_parallel_size, max_model_len...
    if seed is not None:
        options.setdefault("seed", seed)
    _engines[model] = vllm.LLM(model=model, **options)
    return _engines[model]


def release_engines() -> None:
    """Shuts down every engine this worker process holds."""
    while _engines:
        model = next(iter(_engines))
        _release(model, _engines.pop(model))


def _release(model: str, llm: Any) -> None:
    """Gives an engine's GPU memory back. Dropping the last reference is not enough:
    vLLM's V1 engine core runs in its own process (or threads) until shut down, and
    PyTorch's caching allocator keeps freed blocks until emptied."""
    logger.info("releasing the offline engine for %s", model)
    shutdown = getattr(getattr(getattr(llm, "llm_engine", None), "engine_core", None), "shutdown", None)
    if callable(shutdown):
        try:
            shutdown()
        except Exception:  # a dead engine: still drop it and free what this process holds
            logger.exception("shutting down the engine for %s failed", model)
    del llm, shutdown
    try:  # process groups of a tensor-parallel engine; it also collects and empties the CUDA cache
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    except ImportError:
        cleanup_dist_env_and_memory = None
    if cleanup_dist_env_and_memory is not None:
        with contextlib.suppress(Exception):
            cleanup_dist_env_and_memory()
    gc.collect()
    torch = sys.modules.get("torch")  # loaded by vllm when there is one; never imported just for this
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def chat_batch(
    endpoint: ModelEndpoint,
    conversations: list[list[dict]],
    params: dict,
    seed: int | None = None,
    *,
    engine_defaults: bool = False,
) -> list[Completion]:
    """One Completion per conversation, in order.

    Output length is bounded by the model's context only, unless ``max_tokens`` is set: a fixed
    cap cut long chains of thought. ``engine_defaults`` (the reference protocol) leaves temperature
    and top p to vLLM too, where the studio asks for greedy decoding."""
    vllm = load_vllm()
    llm = engine_for(endpoint, seed=seed)
    chosen = {} if engine_defaults else {"temperature": 0.0, "top_p": 1.0}
    chosen |= {k: params[k] for k in ("temperature", "top_p") if k in params}
    sampling = vllm.SamplingParams(**chosen, max_tokens=params.get("max_tokens"), seed=seed)
    started = time.perf_counter()
    with counted(endpoint, conversations) as call:
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
            call.used(results[-1])
    return results


def counted(endpoint: ModelEndpoint, conversations: list) -> contextlib.AbstractContextManager[metrics.CallRecord]:
    """A batch on an engine in this worker, counted for Prometheus as one call per conversation."""
    return metrics.model_call(endpoint=endpoint.name, replica=OFFLINE_REPLICA, calls=len(conversations))


OFFLINE_REPLICA = "offline"  # the replica label of calls to an engine inside the worker


def local_chat_batch(
    endpoint: ModelEndpoint,
    conversations: list[list[dict]],
    params: dict,
    seed: int | None = None,
    *,
    engine_defaults: bool = False,  # as chat_batch: length and sampling left to the model (local_engine)
) -> list[Completion]:
    """A batch on a small model with transformers on this worker's CPU.

    With TRANSFORMERS_PYTHON set, the batch runs in that Python (one that has
    torch) as a subprocess; otherwise in this process, which then needs torch.
    """
    with counted(endpoint, conversations) as call:
        if settings.TRANSFORMERS_PYTHON:
            completions = _local_batch_in_subprocess(endpoint, conversations, params, seed, engine_defaults)
        else:
            try:
                completions = local_engine.generate(endpoint.model_name, conversations, params, seed, engine_defaults)
            except ImportError as exc:
                raise EngineUnavailable(
                    f"transformers and torch are not installed in this worker's Python ({exc}): install the ml "
                    "extra (pip install '.[ml]'), or set TRANSFORMERS_PYTHON to a Python that has them."
                ) from exc
        results = [Completion(attempts=1, **completion) for completion in completions]
        for completion in results:
            call.used(completion)
    return results


def _local_batch_in_subprocess(endpoint, conversations, params, seed, engine_defaults=False) -> list[dict]:
    python = settings.TRANSFORMERS_PYTHON
    if not Path(python).exists():
        raise EngineUnavailable(f"TRANSFORMERS_PYTHON is {python}, which does not exist on this worker")
    script = Path(__file__).with_name("local_engine.py")
    request = {"model": endpoint.model_name, "conversations": conversations, "params": params, "seed": seed,
               "engine_defaults": engine_defaults}  # fmt: skip
    finished = subprocess.run(  # noqa: S603 (our own script, a configured interpreter)
        [python, str(script)], input=json.dumps(request), capture_output=True, text=True, timeout=max(
            endpoint.timeout_seconds * max(len(conversations), 1), 60)
    )  # fmt: skip
    try:
        answer = json.loads(finished.stdout or "{}")
    except json.JSONDecodeError:
        answer = {}
    if finished.returncode != 0 or "completions" not in answer:
        detail = answer.get("error") or finished.stderr.strip()[-2000:] or f"exit status {finished.returncode}"
        raise EngineUnavailable(f"the transformers engine failed on {endpoint.model_name}: {detail}")
    return answer["completions"]
