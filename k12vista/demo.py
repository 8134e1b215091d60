"""Demo data for `make run`. Each app adds its own in a ``demo.py`` module
(found at start-up like jobs.py), so this base package imports no app."""

from __future__ import annotations

from collections.abc import Callable

_loaders: list[tuple[int, str, Callable[[], str]]] = []


def demo_loader(order: int) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Registers a loader; lower orders run first. A loader returns a line to print
    and must be idempotent: ``make run`` calls it every time."""

    def register(loader: Callable[[], str]) -> Callable[[], str]:
        _loaders.append((order, f"{loader.__module__}.{loader.__name__}", loader))
        return loader

    return register


def loaders() -> list[Callable[[], str]]:
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("demo")
    return [loader for _order, _name, loader in sorted(_loaders, key=lambda entry: entry[:2])]
