"""Naming Python code on a command line: ``module:function`` (the function may be a dotted attribute path).

One loader for every option that takes a callable (``replaykit properties --estimator``, a scenario target
``python:module:function``); a bad name is a :class:`~replaykit.errors.UsageError` naming the option.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from replaykit.errors import UsageError

__all__ = ["load_callable"]


def load_callable(spec: str, option: str = "--estimator",
                  example: str = "replaykit.estimate:estimate_tokens") -> Callable[..., Any]:
    """The callable named by ``module:function``; errors name ``option`` and show ``example``."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"{option} {spec!r} must be module:function, e.g. {example}")
    try:
        found: object = importlib.import_module(module_name)
    except Exception as exc:  # any failure of the user's module at import (SyntaxError too)
        raise UsageError(f"{option} {spec!r}: cannot import module {module_name!r} "
                         f"({type(exc).__name__}: {exc}); fix the module or name another") from exc
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise UsageError(f"{option} {spec!r}: {module_name!r} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise UsageError(f"{option} {spec!r}: {attribute!r} is a {type(found).__name__}, not a function")
    return found
