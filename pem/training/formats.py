"""The four fine-tuning formats a PEM training export writes, and a checker for each.

One training example (a chain of thought with its question, reference answer,
steps and their labels) becomes one line per format:

- ``llamafactory.jsonl``: LLaMA-Factory's sharegpt format with role/content
  tags, ``messages`` and ``images``, described by ``dataset_info.json``;
- ``swift.jsonl``: ms-swift's standard ``messages`` + ``images``;
- ``trl.jsonl``: TRL's conversational format for ``SFTTrainer`` (content as
  typed parts, ``{"type": "image"}`` placeholders, ``images``);
- ``qwen.jsonl``: Qwen2.5-VL's own fine-tuning format (``conversations`` with
  ``from``/``value``, ``human``/``gpt``, and ``image``).

In the three text formats every image is an ``<image>`` token in the user
turn, as many as there are images, in order. Image paths are relative to the
export's directory. The checkers state each format's rules (from their
documentation) and are what the tests and ``verify_export`` run.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any

from inference.reference import prompts as reference_prompts
from k12vista.vocabulary import LABELS_BY_CODE

IMAGE_TOKEN = "<image>"  # noqa: S105 (the trainers' image placeholder, not a secret)
FORMATS = ("llamafactory", "swift", "trl", "qwen")
FILE_NAMES = {name: f"{name}.jsonl" for name in FORMATS}
DATASET_NAME = "pem800k"
NUMBERED_STEP = re.compile(r"步骤\d+[：:]")  # a step that starts with its own number

SYSTEM_PROMPT = (
    "你是一个过程评估模型。给定题目、参考答案和学生的分步解答，逐步判断每一步是否正确；"
    "错误的步骤给出错误类型（ICE、QM、LRK、KAE、LRE、HE、CE、IAE 之一）和简短理由，正确的步骤标为 CS。"
    '以 JSON 作答：{"steps": [{"step": "该步原文", "label": "CS", "reason": "..."}]}。'
)


class FormatError(ValueError):
    """A line that breaks its format's rules."""


def _user_layout(question: str, reference_answer: str, steps: str) -> str:
    parts = [f"题目：\n{question}"]
    if reference_answer:
        parts.append(f"参考答案：\n{reference_answer}")
    parts.append(f"学生解答：\n{steps}")
    return "\n\n".join(parts)


def numbered(position: int, text: str) -> str:
    """``步骤N：text``; a step a model split keeps its own number, which is not written twice."""
    return text if NUMBERED_STEP.match(text) else f"步骤{position}：{text}"


def user_text(example: dict) -> str:
    """The question, the reference answer and the numbered steps, without image tokens."""
    steps = "\n".join(numbered(n, text) for n, text in enumerate(example["steps"], 1))
    # A literal <image> in the text would be counted as an image by every trainer.
    return _user_layout(example["question"], example["reference_answer"], steps).replace(IMAGE_TOKEN, "[image]")


# The judge prompt a trained PEM is scored with (train.register_endpoint stores it): user_text's layout
# with the scoring run's values. A chain's question text is the question and then its options, one a
# line (pem.services.question_text_of), its reference answer the sub-answers one a line, and the
# answer is shown as written, its steps numbered.
JUDGE_USER_TEMPLATE = _user_layout("${question_with_options}", "${reference_answer_lines}", "${model_answer}")


def assistant_text(example: dict) -> str:
    """The judge's structured output (inference.parsing's ``step_judgment``): a trained PEM then
    answers exactly what a step-by-step scoring run reads and aligns onto the chain's steps."""
    steps = [{"step": text, "label": label, "reason": why}
             for text, (label, why) in zip(example["steps"], example["labels"], strict=True)]  # fmt: skip
    return json.dumps({"steps": steps}, ensure_ascii=False)


# --- K12-PEM's style: the reference step-judge prompt in, the reference's list out ---------------


def reference_user_text(example: dict, template: str) -> str:
    """The reference's step-judge prompt (a registered ``eval_prompt`` text) filled as its evaluate
    script fills it: the question, the reference answer as the list of sub-answers, the reference
    solution, and the student's answer (the steps, one a line). No system message goes with it."""
    answers = [line for line in example["reference_answer"].splitlines() if line.strip()]
    text = reference_prompts.render(
        template, question=example["question"], answer=answers, solution=example.get("reference_solution", ""),
        student_answer="\n".join(example["steps"]),
    )  # fmt: skip
    return text.replace(IMAGE_TOKEN, "[image]")


def _reference_string(text: str) -> str:
    """A string as the reference's reader takes it back (every backslash is doubled before reading,
    so LaTeX is written as is): on one line, quoted with a quote it does not contain."""
    text = " ".join(text.splitlines())
    if "'" not in text:
        return f"'{text}'"
    return '"' + text.replace('"', "”") + '"'


def reference_target(example: dict) -> str:
    """K12-PEM's answer: ``[[step, 中文标签, 解释], ...]`` with the nine Chinese names."""
    items = [
        f"[{_reference_string(step)}, '{LABELS_BY_CODE[label].chinese}', {_reference_string(why)}]"
        for step, (label, why) in zip(example["steps"], example["labels"], strict=True)
    ]
    return "[" + ", ".join(items) + "]"


def render(
    name: str, example: dict, *, text: str | None = None, answer: str | None = None, system: str = SYSTEM_PROMPT,
    images_first: bool = False,
) -> dict:  # fmt: skip
    """One example as a line of format ``name``; ``example["images"]`` are relative paths. An export
    writing several formats passes the example's ``user_text`` and ``assistant_text``, made once.
    ``system`` "" writes no system turn (K12-PEM's style: the reference judge sends none).

    The images go where the PEM will see them when it judges: after the text, as the studio sends a
    judge its figures (``client.build_messages``, text first for prefix caching), or, with
    ``images_first``, before it (K12-PEM's style, whose lines the studio's layout leaves as they were).
    A model trained with its image before the text and asked with it after does not read the prompt
    it learnt: the tiny PEM of test_pem800k_end_to_end then writes noise."""
    images = list(example["images"])
    text = user_text(example) if text is None else text
    answer = assistant_text(example) if answer is None else answer
    tokens = IMAGE_TOKEN * len(images)
    if name in ("llamafactory", "swift"):
        line: dict[str, Any] = {"messages": [
            *([{"role": "system", "content": system}] if system else []),
            {"role": "user", "content": tokens + text if images_first else text + tokens},
            {"role": "assistant", "content": answer},
        ]}  # fmt: skip
        line["images"] = images
        return line
    if name == "trl":
        image_parts = [{"type": "image"} for _ in images]
        text_part = [{"type": "text", "text": text}]
        return {
            "messages": [
                *([{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []),
                {"role": "user", "content": image_parts + text_part if images_first else text_part + image_parts},
                {"role": "assistant", "content": [{"type": "text", "text": answer}]},
            ],
            "images": images,
        }
    if name == "qwen":
        preface = system + "\n\n" if system else ""
        human = (tokens + "\n" if images else "") + preface + text if images_first else preface + text + tokens
        line = {"conversations": [
            {"from": "human", "value": human},
            {"from": "gpt", "value": answer},
        ]}  # fmt: skip
        if images:
            line["image"] = images[0] if len(images) == 1 else images
        return line
    raise ValueError(f"unknown format {name!r}")


def dataset_info() -> dict:
    """LLaMA-Factory's dataset_info.json entry for llamafactory.jsonl."""
    return {
        DATASET_NAME: {
            "file_name": FILE_NAMES["llamafactory"],
            "formatting": "sharegpt",
            "columns": {"messages": "messages", "images": "images"},
            "tags": {
                "role_tag": "role",
                "content_tag": "content",
                "user_tag": "user",
                "assistant_tag": "assistant",
                "system_tag": "system",
            },  # fmt: skip
        }
    }


def llamafactory_yaml(*, min_pixels: int, max_pixels: int, base_model: str = "Qwen/Qwen2.5-VL-7B-Instruct") -> str:
    """An example LoRA SFT recipe for Qwen2.5-VL on this export (run from the export's directory)."""
    return f"""### model
model_name_or_path: {base_model}
image_max_pixels: {max_pixels}
image_min_pixels: {min_pixels}
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all

### dataset
dataset: {DATASET_NAME}
dataset_dir: .
template: qwen2_vl
cutoff_len: 4096
overwrite_cache: true
preprocessing_num_workers: 8

### output
output_dir: saves/qwen2_5vl-7b/lora/{DATASET_NAME}
logging_steps: 10
save_steps: 500
plot_loss: true
overwrite_output_dir: true

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
"""


# --- checkers --------------------------------------------------------------------------------


def _require(condition: object, message: str) -> None:  # anything with a truth value
    if not condition:
        raise FormatError(message)


def _check_paths(paths: Any, exists) -> list[str]:
    _require(isinstance(paths, list) and all(isinstance(p, str) and p for p in paths), "images: a list of paths")
    for path in paths:
        pure = PurePosixPath(path)
        _require(not pure.is_absolute() and ".." not in pure.parts, f"image path {path!r} is not relative")
        _require(exists(path), f"image {path!r} is missing")
    return paths


def _check_messages(messages: Any, tags: tuple[str, str], roles: dict[str, str], *, typed: bool) -> list[dict]:
    role_tag, content_tag = tags
    _require(isinstance(messages, list) and messages, "messages: a non-empty list")
    turns = [m for m in messages if m.get(role_tag) != roles["system"]]
    _require(all(isinstance(m, dict) and set(m) == {role_tag, content_tag} for m in messages),
             f"each message has exactly {role_tag!r} and {content_tag!r}")  # fmt: skip
    _require(messages[0][role_tag] != roles["system"] or len(messages) > 1, "a system turn alone")
    _require(all(m[role_tag] != roles["system"] for m in messages[1:]), "the system turn comes first, once")
    # sharegpt rule: user and assistant alternate, starting with the user, ending with the assistant.
    expected = [roles["user"], roles["assistant"]] * (len(turns) // 2)
    _require([m[role_tag] for m in turns] == expected and turns, "user and assistant turns must alternate")
    for m in messages:
        if typed:
            parts = m[content_tag]
            _require(isinstance(parts, list) and parts, "content: a list of typed parts")
            for part in parts:
                _require(part.get("type") in ("text", "image"), f"unknown content part {part!r}")
                _require(part["type"] != "text" or isinstance(part.get("text"), str), "a text part without text")
        else:
            _require(isinstance(m[content_tag], str), "content: a string")
    return messages


def check_line(name: str, line: dict, exists) -> None:
    """Raises FormatError where ``line`` breaks format ``name``'s rules; ``exists(path)`` checks an image."""
    if name in ("llamafactory", "swift"):
        _require(set(line) <= {"messages", "images"}, f"unexpected keys {sorted(set(line) - {'messages', 'images'})}")
        roles = {"system": "system", "user": "user", "assistant": "assistant"}
        messages = _check_messages(line.get("messages"), ("role", "content"), roles, typed=False)
        images = _check_paths(line.get("images", []), exists)
        tokens = sum(m["content"].count(IMAGE_TOKEN) for m in messages)
        _require(tokens == len(images), f"{tokens} <image> tokens for {len(images)} images")
        _require(all(IMAGE_TOKEN not in m["content"] for m in messages if m["role"] != "user"),
                 "<image> only in user turns")  # fmt: skip
    elif name == "trl":
        roles = {"system": "system", "user": "user", "assistant": "assistant"}
        messages = _check_messages(line.get("messages"), ("role", "content"), roles, typed=True)
        images = _check_paths(line.get("images", []), exists)
        placeholders = sum(part["type"] == "image" for m in messages for part in m["content"])
        _require(placeholders == len(images), f"{placeholders} image parts for {len(images)} images")
        _require(all(IMAGE_TOKEN not in p.get("text", "") for m in messages for p in m["content"]),
                 "no <image> token in typed text parts")  # fmt: skip
    elif name == "qwen":
        _require(set(line) <= {"conversations", "image"}, "qwen lines hold conversations and image only")
        roles = {"system": "system", "user": "human", "assistant": "gpt"}
        messages = _check_messages(line.get("conversations"), ("from", "value"), roles, typed=False)
        image = line.get("image", [])
        images = _check_paths([image] if isinstance(image, str) else image, exists)
        tokens = sum(m["value"].count(IMAGE_TOKEN) for m in messages)
        _require(tokens == len(images), f"{tokens} <image> tokens for {len(images)} images")
    else:
        raise FormatError(f"unknown format {name!r}")


def check_dataset_info(info: Any, files: set[str]) -> None:
    _require(isinstance(info, dict) and info, "dataset_info.json: an object of datasets")
    for name, entry in info.items():
        _require(entry.get("file_name") in files, f"{name}: file_name names no exported file")
        _require(entry.get("formatting") == "sharegpt", f"{name}: formatting must be sharegpt")
        columns, tags = entry.get("columns", {}), entry.get("tags", {})
        _require(set(columns) <= {"messages", "images", "system", "tools"}, f"{name}: unknown columns")
        _require({"role_tag", "content_tag", "user_tag", "assistant_tag"} <= set(tags), f"{name}: missing tags")
