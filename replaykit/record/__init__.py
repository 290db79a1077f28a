"""Recording new cassettes from live traffic: ``replaykit record``, a recording reverse proxy on loopback.

The parts: :mod:`~replaykit.record.capture` (a response captured and made safe to keep),
:mod:`~replaykit.record.tape` (the cassette written atomically), :mod:`~replaykit.record.recorder` (the checks
and writes in a process of their own) and :mod:`~replaykit.record.proxy` (the proxy and its modes; imported
when first named here). In-process recording with vcrpy is :func:`replaykit.vcr_config`
(:mod:`replaykit.vcrpy`). The reasoning is in docs/architecture/record.md.
"""

from typing import Any

from replaykit.record.capture import Capture, Checked, checked, violation_line
from replaykit.record.tape import WARNINGS, Tape, recorded_with

__all__ = ["MODES", "WARNINGS", "Capture", "Checked", "RecordingProxy", "Tally", "Tape", "checked",
           "recorded_with", "violation_line"]

_PROXY = ("MODES", "RecordingProxy", "Tally")


def __getattr__(name: str) -> Any:
    """The proxy's names, imported on first use (it loads aiohttp and the fake provider)."""
    if name in _PROXY:
        from replaykit.record import proxy

        return getattr(proxy, name)
    raise AttributeError(f"module 'replaykit.record' has no attribute {name!r}")
