"""Recording new cassettes from live traffic: ``replaykit record``, a recording reverse proxy on loopback.

The parts: :mod:`~replaykit.record.capture` (a response captured as it is forwarded, SSE events timed; the
interaction redacted, scanned and checked), :mod:`~replaykit.record.tape` (the cassette written atomically,
``origin: recorded``, refused when a key survives redaction) and :mod:`~replaykit.record.proxy` (the proxy:
modes ``once``, ``new``, ``all``, ``none``, and ``check``). In-process recording with vcrpy is
:func:`replaykit.vcr_config` (:mod:`replaykit.vcrpy`).
"""

from replaykit.record.capture import Capture, Checked, checked
from replaykit.record.proxy import MODES, RecordingProxy, Tally
from replaykit.record.tape import WARNINGS, Tape, recorded_with

__all__ = ["MODES", "WARNINGS", "Capture", "Checked", "RecordingProxy", "Tally", "Tape", "checked",
           "recorded_with"]
