"""The K12Vista reference code in ../shared/reference/K12Vista (test material, never copied into
the repository): where it is, and its modules loaded for tests to compare the studio with.

Its judge modules import openai and PIL at the top and read replies with ``eval``; they are
loaded here under sys.modules shims for what they import, and their ``eval`` only ever runs
on the replies a test hands them."""

from __future__ import annotations

import importlib.util
import runpy
import sys
import types
from pathlib import Path

from tests.ci import needs

ROOT = Path(__file__).resolve().parent.parent
CHECKOUT = (ROOT.parent / "shared" / "reference" / "K12Vista").resolve()
PRESENT = (CHECKOUT / "K12_Vista" / "code" / "prompt.py").is_file()
needs_reference = needs(PRESENT, "../shared/reference/K12Vista is not here")


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
