"""The paper's own code, loaded from ../shared/reference/ for conformance tests (never copied here).

Its scripts import sibling modules by bare names (``models``, ``model_dict``, ``prompt``) and one is
called ``inference``, like our app; each is loaded from its file under a private name, with the
bare names it imports put in ``sys.modules`` only while it loads. Its heavy or absent imports
(``model_dict`` holds endpoints and keys) are stand-ins.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import types
from pathlib import Path
from typing import Any

import pytest

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "K12Vista"
VISTA_CODE = REFERENCE / "K12_Vista" / "code"
PEMBENCH_CODE = REFERENCE / "K12_PEMBench" / "code"


def require_reference() -> None:
    if not VISTA_CODE.is_dir():
        pytest.skip("../shared/reference/K12Vista is not here")


def _load(path: Path, name: str, shims: dict[str, types.ModuleType]) -> types.ModuleType:
    saved = {key: sys.modules.get(key) for key in shims}
    state = random.getstate()  # evalaute.py seeds the global generator when imported
    sys.modules.update(shims)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        random.setstate(state)
        for key, value in saved.items():
            if value is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = value


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


def prompt_module() -> types.ModuleType:
    require_reference()
    return _load(VISTA_CODE / "prompt.py", "k12vista_reference_prompt", {})


def _script_shims() -> dict[str, types.ModuleType]:
    return {"models": _module("models"), "model_dict": _module("model_dict", model_dict={}), "prompt": prompt_module()}


def inference_script() -> types.ModuleType:
    """``K12_Vista/code/inference.py`` (class ``K12_Vista``)."""
    return _load(VISTA_CODE / "inference.py", "k12vista_reference_inference", _script_shims())


def evaluate_script() -> types.ModuleType:
    """``K12_Vista/code/evalaute.py`` (class ``Evaluation``)."""
    return _load(VISTA_CODE / "evalaute.py", "k12vista_reference_evaluate", _script_shims())


def vllminfer_module() -> types.ModuleType:
    require_reference()
    return _load(VISTA_CODE / "models" / "vllminfer.py", "k12vista_reference_vllminfer", {})


def judge_module() -> types.ModuleType:
    require_reference()
    return _load(VISTA_CODE / "models" / "K12_PEM_judgemodel.py", "k12vista_reference_judge", {})


def pebench_script() -> types.ModuleType:
    """``K12_PEMBench/code/infer.py`` (class ``K12_PEMBench``)."""
    require_reference()
    shims = {
        "models": _module("models"),
        "model_dict": _module("model_dict", model_dict={}),
        "prompt": _load(PEMBENCH_CODE / "prompt.py", "k12vista_reference_pebench_prompt", {}),
    }
    return _load(PEMBENCH_CODE / "infer.py", "k12vista_reference_pebench", shims)


class FakeChat:
    """Stands in for ``OpenAI().chat``: records each request and answers ``reply``."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.requests: list[dict] = []
        self.completions = self

    def create(self, **request: Any) -> Any:
        self.requests.append(request)
        message = types.SimpleNamespace(content=self.reply)
        return types.SimpleNamespace(choices=[types.SimpleNamespace(message=message)])


def with_fake_client(cls: type, reply: str, **attrs: Any) -> tuple[Any, FakeChat]:
    """An instance of a reference model class without its __init__ (which builds a real client)."""
    instance = object.__new__(cls)
    chat = FakeChat(reply)
    instance.__dict__.update(attrs, client=types.SimpleNamespace(chat=chat))
    return instance, chat
