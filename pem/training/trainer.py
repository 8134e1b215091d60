"""Fine-tunes a vision-language model on a TRL export with TRL's SFTTrainer (LoRA through peft on request).

Imports neither Django nor the studio: it runs as a script in the Python that
has torch, trl and peft (``TRANSFORMERS_PYTHON``, the ``ml`` environment),
reading one JSON request on stdin and writing one JSON answer on stdout:

    {"export_dir", "data_file", "base_model", "output_dir", "hyperparameters": {...}}
    -> {"checkpoint", "global_step", "train_loss", "runtime_s"} or {"error"}

The dataset is read by ``datasets`` (Arrow, memory-mapped) and images are
decoded when a batch needs them. Each conversation is split into TRL's
prompt-completion form (every turn before the last as the prompt, the
assistant's answer as the completion), so the loss is computed on the answer
only (``completion_only_loss``): the PEM learns to write the judgment, not
to write the system prompt and the question it is given. This works with TRL's
vision collator whatever the chat template (``assistant_only_loss`` would need
``{% generation %}`` markers in it). With LoRA, the adapter is merged into the
base model before saving, so the checkpoint loads like the base model (as a
transformers endpoint, or with ``vllm serve``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

DEFAULTS = {
    "max_steps": 100,
    "learning_rate": 1e-4,
    "per_device_train_batch_size": 1,
    "gradient_accumulation_steps": 1,
    "seed": 0,
    "lora": False,
    "lora_r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.0,
    # The loss on the assistant's answer only (the prompt's labels are masked); false trains on every token.
    "completion_only_loss": True,
    # Recomputes activations in the backward pass: less memory for a large model, slower (TRL's default).
    "gradient_checkpointing": True,
}


def missing_images(export_dir: Path, data_file: str) -> list[str]:
    """Every image the data file names that is not a file in the export (streamed)."""
    missing: list[str] = []
    with open(export_dir / data_file, encoding="utf-8") as lines:
        for line in lines:
            missing.extend(path for path in json.loads(line).get("images", []) if not (export_dir / path).is_file())
    return missing


def prompt_completion(row: dict, root: str) -> dict:
    """One TRL export line (conversational ``messages``) in TRL's conversational prompt-completion form:
    every turn before the last is the prompt, the last (the assistant's answer) the completion.
    Image paths become absolute."""
    messages = row["messages"]
    if not messages or messages[-1]["role"] != "assistant":
        raise ValueError("a training line must end with the assistant's answer")
    return {"prompt": messages[:-1], "completion": messages[-1:], "images": [f"{root}/{p}" for p in row["images"]]}


def build_trainer(request: dict):
    """The SFTTrainer for ``request`` (nothing trained yet), with its processor and hyper-parameters."""
    import torch
    from datasets import Image, Sequence, load_dataset
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from trl import SFTConfig, SFTTrainer

    export_dir = Path(request["export_dir"])
    params = {**DEFAULTS, **request.get("hyperparameters", {})}
    missing = missing_images(export_dir, request["data_file"])
    if missing:
        raise FileNotFoundError(f"{len(missing)} images of the export are missing, e.g. {missing[:5]}")
    torch.manual_seed(params["seed"])
    dataset = load_dataset("json", data_files=str(export_dir / request["data_file"]), split="train")
    root = str(export_dir)
    if params["completion_only_loss"]:
        dataset = dataset.map(prompt_completion, fn_kwargs={"root": root}, remove_columns=["messages"])
    else:
        dataset = dataset.map(lambda row: {"images": [f"{root}/{p}" for p in row["images"]]})
    dataset = dataset.cast_column("images", Sequence(Image()))
    processor = AutoProcessor.from_pretrained(request["base_model"])
    model = AutoModelForImageTextToText.from_pretrained(request["base_model"], dtype="float32")
    peft_config = None
    if params["lora"]:
        from peft import LoraConfig

        peft_config = LoraConfig(r=params["lora_r"], lora_alpha=params["lora_alpha"],
                                 lora_dropout=params["lora_dropout"], target_modules="all-linear")  # fmt: skip
    use_cpu = not torch.cuda.is_available()
    args = SFTConfig(
        output_dir=str(Path(request["output_dir"]) / "trainer"),
        max_steps=params["max_steps"],
        learning_rate=params["learning_rate"],
        per_device_train_batch_size=params["per_device_train_batch_size"],
        gradient_accumulation_steps=params["gradient_accumulation_steps"],
        seed=params["seed"],
        use_cpu=use_cpu,
        bf16=not use_cpu,
        max_length=None,  # cutting a vision prompt would cut image tokens
        completion_only_loss=params["completion_only_loss"],
        gradient_checkpointing=params["gradient_checkpointing"],
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor,
                         peft_config=peft_config)  # fmt: skip
    return trainer, processor, params


def train(request: dict) -> dict:
    started = time.perf_counter()
    trainer, processor, params = build_trainer(request)
    result = trainer.train()
    trained = trainer.model
    if params["lora"]:
        trained = trained.merge_and_unload()
    out = Path(request["output_dir"]) / "model"
    trained.save_pretrained(out)
    processor.save_pretrained(out)
    return {
        "checkpoint": str(out),
        "global_step": int(result.global_step),
        "train_loss": float(result.training_loss),
        "runtime_s": round(time.perf_counter() - started, 3),
    }


def main() -> int:
    request = json.loads(sys.stdin.read())
    try:
        answer = train(request)
    except Exception as exc:  # noqa: BLE001 - the caller records any failure as the run's error
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
