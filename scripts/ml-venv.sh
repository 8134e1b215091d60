#!/usr/bin/env bash
# Creates .venv-ml: a Python 3.11 environment with CPU torch and transformers, which runs
# a local OpenAI-compatible model server (`transformers serve`) on a tiny model for tests
# and development. See docs/model-server.md.
#
# Usage: scripts/ml-venv.sh [VENV_DIR]     (default: .venv-ml at the repository root)
# Idempotent: exits at once when VENV_DIR already holds exactly these pins.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-${ML_VENV:-$ROOT/.venv-ml}}"

# The direct requirements. torch 2.13.0 is the CPU build in /opt/wheels (cp311 only, found
# through pip's configured find-links): any other torch spec downloads gigabytes.
# transformers 5.18.0 is on this machine's local index too; its `serve` command has
# /v1/chat/completions with images, streaming and /v1/models.
# torchvision is deliberately left out: PyPI's torchvision 0.28.0 (the one for torch 2.13)
# is a CUDA build that cannot load against CPU torch, so transformers uses its PIL image
# processors instead; that is why the test model is LLaVA (Qwen2-VL's processor needs a
# torchvision video processor).
REQUIREMENTS=(
  "torch==2.13.0"
  "transformers[serving]==5.18.0"
  "pillow==12.3.0"
  "requests==2.34.2"  # the transformers CLI imports it; the serving extra does not pull it in
  # PEM training (pem/training/trainer.py): SFTTrainer, LoRA, Arrow datasets.
  "trl==1.16.0"
  "peft==0.21.2"
  "datasets==5.2.0"
)
# Everything else, as resolved on 2026-11-29, so a fresh machine gets the same set.
CONSTRAINTS="
accelerate==1.15.0
annotated-doc==0.0.7
annotated-types==0.8.0
anyio==4.16.0
certifi==2026.10.19.post1
charset-normalizer==3.5.3
click==8.5.1
dill==0.4.1
fastapi==0.165.0
filelock==4.3.1
fsspec==2026.9.0
h11==0.16.0
hf-xet==1.8.0
httpcore2==2.16.2
httpx2==2.16.2
huggingface_hub==2.4.0
idna==3.20
Jinja2==3.1.6
jiter==0.19.0
markdown-it-py==4.3.0
MarkupSafe==3.0.4
mdurl==0.1.2
mpmath==1.3.0
multiprocess==0.70.19
networkx==3.6.1
numpy==2.4.6
openai==3.57.0
opentelemetry-api==1.45.2
packaging==26.4
pandas==3.1.1
psutil==7.2.2
pyarrow==26.0.1
pydantic==2.14.4
pydantic_core==2.50.5
Pygments==2.21.0
python-dateutil==4.0.0
PyYAML==6.0.4
regex==2026.11.19
rich==15.0.0
safetensors==0.8.0
shellingham==1.5.4
sniffio==1.3.1
starlette==1.10.0
sympy==1.14.0
tokenizers==0.23.3
tqdm==4.70.1
truststore==0.10.5
typer==0.29.2
typing-inspection==0.4.5
typing_extensions==4.16.0
tzdata==2026.6
urllib3==2.8.0
uvicorn==0.54.0
xxhash==4.1.0
"
STAMP="$VENV/.ml-installed"
WANT="$(printf '%s\n' "${REQUIREMENTS[@]}" "$CONSTRAINTS")"

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
  echo "$VENV is up to date"
  exit 0
fi

PYTHON="${ML_PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for p in python3.11 /usr/bin/python3.11 /root/.pyenv/versions/3.11*/bin/python; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      PYTHON="$p"
      break
    fi
  done
fi
if [ -z "$PYTHON" ]; then
  echo "Python 3.11 is needed for $VENV (torch 2.13.0's CPU wheel is cp311 only)" >&2
  exit 1
fi

start=$(date +%s)
echo "creating $VENV with $PYTHON (about a minute and a half on a fresh machine)"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
rm -f "$STAMP"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
printf '%s\n' "$CONSTRAINTS" >"$constraints"
# pip warns about local index folders that lack some packages; those warnings are noise here.
pip_install() { "$VENV/bin/python" -m pip install --quiet "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
pip_install --upgrade pip
pip_install -c "$constraints" "${REQUIREMENTS[@]}"
# PyPI's CUDA torchvision must not sneak in (see above): it breaks transformers' imports.
"$VENV/bin/python" -m pip uninstall --quiet --yes torchvision 2>/dev/null || true
HF_HUB_DISABLE_UPDATE_CHECK=1 "$VENV/bin/transformers" serve --help >/dev/null
"$VENV/bin/python" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")'
printf '%s\n' "$WANT" >"$STAMP"
echo "$VENV ready in $(($(date +%s) - start))s ($(du -sh "$VENV" | cut -f1))"
