"""What ``replaykit --version`` prints: light enough for the command line's fastest path."""

from __future__ import annotations

from replaykit import DISTRIBUTION, __version__

__all__ = ["version_line"]


def version_line() -> str:
    """The version, and the distribution it comes from (another project on the package index also installs a
    ``replaykit`` command)."""
    return f"replaykit {__version__} ({DISTRIBUTION})"
