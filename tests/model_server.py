"""A local OpenAI-compatible model server for tests and development.

Two halves, one file:

* ``build_tiny_model(dest)`` runs inside ``.venv-ml`` (Python 3.11, torch, transformers):
  it builds a tiny, randomly initialised LLaVA model (a vision-language chat model: a CLIP
  vision tower of 2 layers, width 32, 28x28 images -> 4 image tokens; a Qwen2 language model
  of 2 layers, hidden size 64; 750 KB of weights) with a byte-level BPE tokenizer trained on
  the spot with the ``tokenizers`` library and a ChatML chat template. Nothing is downloaded.
  The model is laid out as a Hugging Face cache entry
  (``HF_HOME/hub/models--k12vista--tiny-llava``), so ``transformers serve`` lists it under
  ``/v1/models`` and loads it with ``HF_HUB_OFFLINE=1``. (Not Qwen2-VL: its processor needs a
  torchvision video processor, and no CPU torchvision for torch 2.13 is installable here.)
  Run it as ``.venv-ml/bin/python tests/model_server.py build HF_HOME``.

* ``model_server()`` (a context manager) and the session-scoped ``tiny_model_server`` fixture
  run anywhere (the project's Python 3.12 ``.venv`` has no torch): they build the model through
  a ``.venv-ml`` subprocess, start ``transformers serve`` from ``.venv-ml`` on 127.0.0.1 and a
  free port, wait until ``/v1/models`` answers, yield ``(base_url, model_name)`` and stop it.
  Without ``.venv-ml`` (``scripts/ml-venv.sh`` creates it) the fixture skips.

Also usable by hand: ``.venv/bin/python tests/model_server.py serve`` starts the server and
prints its base URL until Ctrl-C.

See docs/model-server.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ML_VENV = Path(os.environ.get("ML_VENV", ROOT / ".venv-ml"))
ML_PYTHON = ML_VENV / "bin" / "python"
TRANSFORMERS_CLI = ML_VENV / "bin" / "transformers"

MODEL_NAME = "k12vista/tiny-llava"
IMAGE_TOKEN = "<image>"
#: Fixed commit hash of the fake cache entry (any 40 hex digits do).
MODEL_REVISION = "0" * 40
SEED = 1234
#: Default reply length; requests may ask for fewer or more with max_tokens.
DEFAULT_MAX_NEW_TOKENS = 8
STARTUP_TIMEOUT_S = float(os.environ.get("MODEL_SERVER_STARTUP_TIMEOUT", 180))

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    IMAGE_TOKEN,
]

# A ChatML (Qwen2-VL style) chat template, trimmed (no tools). Content may be a string or a
# list of {"type": "text"|"image"} parts, which is what transformers serve passes on.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<image>\n"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Text the tokenizer is trained on: a few hundred merges are enough for a test model.
_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Solve for x: 2x + 3 = 7, so x = 2. The answer is 2.",
    "A triangle has three sides; the sum of its angles is 180 degrees.",
    "Step 1: read the question. Step 2: look at the image. Step 3: answer.",
    "Physics, chemistry, biology, geography and mathematics questions.",
    '{"answer": "B", "steps": ["first", "second"], "score": 1}',
    "已知函数 f(x) = x^2 + 1，求 f(2) 的值。答案是 5。",
    "选择题 填空题 问答题 步骤正确 图像认知错误 运算处理错误",
    "Hello! How can I help you today? Please describe the picture.",
    "0123456789 + - * / = ( ) [ ] { } < > , . ; : ? ! ' \" \\ $ ^ _",
]


# --------------------------------------------------------------------------------------
# Building the model (runs in .venv-ml)
# --------------------------------------------------------------------------------------


def _build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    return tok


def build_tiny_model(hf_home: str | os.PathLike) -> Path:
    """Write the tiny LLaVA model into ``hf_home`` as a Hugging Face cache entry.

    Returns the snapshot directory (a plain model directory that ``from_pretrained`` also takes).
    Needs torch and transformers: call it from ``.venv-ml``.
    """
    import torch
    from transformers import (
        CLIPImageProcessorPil,
        GenerationConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    repo_dir = Path(hf_home) / "hub" / ("models--" + MODEL_NAME.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / MODEL_REVISION
    if snapshot.exists():
        shutil.rmtree(snapshot)
    snapshot.mkdir(parents=True)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(MODEL_REVISION)

    torch.manual_seed(SEED)
    raw = _build_tokenizer()
    ids = {t: raw.token_to_id(t) for t in SPECIAL_TOKENS}
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=4096,
        extra_special_tokens={"image_token": IMAGE_TOKEN},
    )
    tokenizer.chat_template = CHAT_TEMPLATE

    # Every image is resized to 28x28: 2x2 patches of 14 pixels, so 4 image tokens.
    image_size, patch = 28, 14
    image_tokens = (image_size // patch) ** 2
    # The PIL image processor: torchvision is left out of .venv-ml (see scripts/ml-venv.sh).
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": image_size},
        crop_size={"height": image_size, "width": image_size},
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's class token, dropped by the "default" strategy
        image_token=IMAGE_TOKEN,
        chat_template=CHAT_TEMPLATE,
    )

    hidden = 64
    config = LlavaConfig(
        text_config={
            "model_type": "qwen2",
            "vocab_size": len(tokenizer),
            "hidden_size": hidden,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 4096,
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "tie_word_embeddings": False,
        },
        vision_config={
            "model_type": "clip_vision_model",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": image_size,
            "patch_size": patch,
            "projection_dim": 32,
        },
        image_token_index=ids[IMAGE_TOKEN],
        image_seq_length=image_tokens,
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        tie_word_embeddings=False,
    )
    config.architectures = ["LlavaForConditionalGeneration"]
    model = LlavaForConditionalGeneration(config).to(torch.float32).eval()
    # Greedy and short by default, so replies are deterministic and fast.
    model.generation_config = GenerationConfig(
        do_sample=False,
        max_new_tokens=DEFAULT_MAX_NEW_TOKENS,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
    )
    model.save_pretrained(snapshot)
    processor.save_pretrained(snapshot)
    return snapshot


# --------------------------------------------------------------------------------------
# Running the server (runs anywhere; the server itself runs in .venv-ml)
# --------------------------------------------------------------------------------------


def ml_venv_missing_reason() -> str | None:
    """Why the model server cannot run here, or None when it can."""
    if not ML_PYTHON.exists() or not TRANSFORMERS_CLI.exists():
        return f"{ML_VENV} does not exist or lacks transformers: run scripts/ml-venv.sh (or `make ml`) to create it"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _offline_env(hf_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "TRANSFORMERS_"))}
    env.pop("VIRTUAL_ENV", None)
    env.update(
        HF_HOME=str(hf_home),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_UPDATE_CHECK="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
        # Two cores on CI: keep torch from oversubscribing them.
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"),
    )
    return env


def build_model_subprocess(hf_home: Path) -> None:
    """Build the tiny model into ``hf_home`` using ``.venv-ml``'s Python."""
    subprocess.run(
        [str(ML_PYTHON), str(Path(__file__).resolve()), "build", str(hf_home)],
        check=True,
        env=_offline_env(hf_home),
        timeout=300,
    )


def _get_json(url: str, timeout: float = 2.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (local URL)
        return json.loads(response.read())


@contextlib.contextmanager
def model_server(
    hf_home: str | os.PathLike | None = None, log_path: str | os.PathLike | None = None
) -> Iterator[tuple[str, str]]:
    """Build the tiny model, start ``transformers serve`` on it, yield ``(base_url, model_name)``.

    ``base_url`` ends in ``/v1`` (what ``openai.OpenAI(base_url=...)`` takes). Raises
    RuntimeError when ``.venv-ml`` is missing or the server does not come up.
    """
    reason = ml_venv_missing_reason()
    if reason:
        raise RuntimeError(reason)
    with contextlib.ExitStack() as stack:
        if hf_home is None:
            hf_home = stack.enter_context(tempfile.TemporaryDirectory(prefix="k12vista-hf-"))
        hf_home = Path(hf_home)
        build_model_subprocess(hf_home)

        port = _free_port()
        if log_path is None:
            log_path = hf_home / "server.log"
        log = stack.enter_context(open(log_path, "wb"))
        command = [
            str(TRANSFORMERS_CLI),
            "serve",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--default-seed",
            str(SEED),
            "--log-level",
            "warning",
            "--no-continuous-batching",
        ]
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_offline_env(hf_home),
            start_new_session=True,  # its own process group, so stopping it stops its children
        )
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"transformers serve exited with {process.returncode}:\n{_tail(log_path)}")
                try:
                    _get_json(f"{base_url}/models")
                    break
                except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"transformers serve did not answer {base_url}/models within {STARTUP_TIMEOUT_S:.0f}s:\n"
                        f"{_tail(log_path)}"
                    )
                time.sleep(0.25)
            yield base_url, MODEL_NAME
        finally:
            _stop(process)


def _tail(log_path: str | os.PathLike, chars: int = 4000) -> str:
    return Path(log_path).read_text(errors="replace")[-chars:]


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


try:
    import pytest

    from tests.ci import missing
except ImportError:  # running as a script in .venv-ml, which has no pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="session")
    def tiny_model_server(tmp_path_factory) -> Iterator[tuple[str, str]]:
        """Session-scoped ``(base_url, model_name)`` of a running tiny model server; skips without .venv-ml."""
        reason = ml_venv_missing_reason()
        if reason:
            missing(reason)
        hf_home = tmp_path_factory.mktemp("hf-home")
        with model_server(hf_home) as served:
            yield served

    @pytest.fixture(scope="session")
    def tiny_model_dir(tmp_path_factory) -> Path:
        """The tiny model's snapshot folder, built once, for engines that load it themselves (no server)."""
        reason = ml_venv_missing_reason()
        if reason:
            missing(reason)
        hf_home = tmp_path_factory.mktemp("hf-local")
        build_model_subprocess(hf_home)
        return hf_home / "hub" / ("models--" + MODEL_NAME.replace("/", "--")) / "snapshots" / MODEL_REVISION


def _main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "build":
        started = time.monotonic()
        snapshot = build_tiny_model(argv[1])
        print(f"built {MODEL_NAME} in {time.monotonic() - started:.1f}s at {snapshot}", file=sys.stderr)
        return 0
    if argv[:1] == ["serve"]:
        started = time.monotonic()
        with model_server() as (base_url, name):
            print(
                f"serving {name} at {base_url} (up in {time.monotonic() - started:.1f}s); Ctrl-C stops it", flush=True
            )
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
        return 0
    print("usage: model_server.py build HF_HOME | serve", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
