"""The K12Vista reference code in ../shared/reference/K12Vista (test material, never copied into
the repository): where it is, and its modules loaded for tests to compare the studio with.

Its judge modules import openai and PIL at the top and read replies with ``eval``; they are
loaded here under sys.modules shims for what they import, and their ``eval`` only ever runs
on the replies a test hands them."""

from __future__ import annotations

import importlib.util
import random
import runpy
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.ci import IN_CI, needs

ROOT = Path(__file__).resolve().parent.parent
CHECKOUT = (ROOT.parent / "shared" / "reference" / "K12Vista").resolve()
PRESENT = (CHECKOUT / "K12_Vista" / "code" / "prompt.py").is_file()
needs_reference = needs(PRESENT, "../shared/reference/K12Vista is not here")
VISTA_CODE = CHECKOUT / "K12_Vista" / "code"
PEMBENCH_CODE = CHECKOUT / "K12_PEMBench" / "code"


def prompt_tables() -> tuple[dict, dict, dict]:
    """(infer_prompt, eval_prompt, prompt_dict) as Python itself reads the reference's files."""
    vista = runpy.run_path(str(CHECKOUT / "K12_Vista" / "code" / "prompt.py"))
    pembench = runpy.run_path(str(CHECKOUT / "K12_PEMBench" / "code" / "prompt.py"))
    return vista["infer_prompt"], vista["eval_prompt"], pembench["prompt_dict"]


def _load(relative: str, name: str, **shims: object) -> types.ModuleType:
    """A module of the reference, its imports of openai and PIL (and ``shims``) served by stand-ins."""
    shims = {
        "openai": types.SimpleNamespace(OpenAI=object),
        "PIL": types.SimpleNamespace(Image=None, ImageDraw=None, ImageOps=None),
        **shims,
    }
    saved = {key: sys.modules.get(key) for key in shims}
    try:
        sys.modules.update(shims)  # type: ignore[arg-type]
        spec = importlib.util.spec_from_file_location(name, CHECKOUT / relative)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for key, old in saved.items():
            if old is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = old
    return module


def judge_class():
    """The reference's K12-PEM judge class (its directly_eval / step_by_step_eval)."""
    return _load("K12_Vista/code/models/K12_PEM_judgemodel.py", "reference_k12_pem_judgemodel").K12_PEM_judgemodel


def pebench_step_check():
    """PEBench's reply reader, ``vllminfer.step_check(response, step_labels)``: published without
    ``self``, it is called here as the plain function it was written as."""
    return _load("K12_PEMBench/code/models/vllminfer.py", "reference_pebench_vllminfer").vllminfer.step_check


def pebench_evaluate():
    """PEBench's metric, ``K12_PEMBench.evaluate(self, input_path, out_path)`` of infer.py; its
    imports of the model table, prompts and models are stand-ins (the metric uses none)."""
    module = _load(
        "K12_PEMBench/code/infer.py", "reference_pebench_infer",
        models=types.ModuleType("models"), model_dict=types.SimpleNamespace(model_dict={}),
        prompt=types.SimpleNamespace(prompt_dict={}), tqdm=types.SimpleNamespace(tqdm=lambda x, **_: x),
    )  # fmt: skip
    return module.K12_PEMBench.evaluate


def reference_judge():
    """An instance without __init__ (which would open an OpenAI client): the reply readers need no state."""
    cls = judge_class()
    return cls.__new__(cls)


# --- the scripts, for the record format and aggregation tests ---------------------------------
#
# Its scripts import sibling modules by bare names (``models``, ``model_dict``, ``prompt``) and one is
# called ``inference``, like our app; each is loaded from its file under a private name, with the
# bare names it imports put in ``sys.modules`` only while it loads.


def require_reference() -> None:
    """Skips where the reference is absent, except under CI (there the test fails, as ``needs``)."""
    if not PRESENT and not IN_CI:
        pytest.skip("../shared/reference/K12Vista is not here")


def _load_file(path: Path, name: str, shims: dict[str, types.ModuleType]) -> types.ModuleType:
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
    return _load_file(VISTA_CODE / "prompt.py", "k12vista_reference_prompt", {})


def _script_shims() -> dict[str, types.ModuleType]:
    return {"models": _module("models"), "model_dict": _module("model_dict", model_dict={}), "prompt": prompt_module()}


def inference_script() -> types.ModuleType:
    """``K12_Vista/code/inference.py`` (class ``K12_Vista``)."""
    return _load_file(VISTA_CODE / "inference.py", "k12vista_reference_inference", _script_shims())


def evaluate_script() -> types.ModuleType:
    """``K12_Vista/code/evalaute.py`` (class ``Evaluation``)."""
    return _load_file(VISTA_CODE / "evalaute.py", "k12vista_reference_evaluate", _script_shims())


def vllminfer_module() -> types.ModuleType:
    require_reference()
    return _load_file(VISTA_CODE / "models" / "vllminfer.py", "k12vista_reference_vllminfer", {})


def judge_module() -> types.ModuleType:
    require_reference()
    return _load_file(VISTA_CODE / "models" / "K12_PEM_judgemodel.py", "k12vista_reference_judge", {})


def pebench_script() -> types.ModuleType:
    """``K12_PEMBench/code/infer.py`` (class ``K12_PEMBench``)."""
    require_reference()
    shims = {
        "models": _module("models"),
        "model_dict": _module("model_dict", model_dict={}),
        "prompt": _load_file(PEMBENCH_CODE / "prompt.py", "k12vista_reference_pebench_prompt", {}),
    }
    return _load_file(PEMBENCH_CODE / "infer.py", "k12vista_reference_pebench", shims)


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
