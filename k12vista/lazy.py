"""Modules loaded on first use: a process that never reads a PDF never pays for PyMuPDF.

Every worker and command runs ``django.setup()``, which imports every app's jobs.py, which
import the modules holding the job handlers, which import their libraries. PyMuPDF (with its
layout package's ONNX runtime) is about 130 MiB of a process's memory; a PEM import, an
export or a web worker that never opens a PDF should not carry it.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """``name`` as a module object whose code runs at the first attribute read."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
