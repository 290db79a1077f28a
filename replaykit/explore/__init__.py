"""``replaykit explore``: every fault a scenario's recording offers, not the ones someone thought of.

The parts, one concept a module: :mod:`~replaykit.explore.space` (the fault points of a fault-free run times
the fault kinds), :mod:`~replaykit.explore.schedule` (which trials run within the budget, by seed and shard),
:mod:`~replaykit.explore.oracle` (the invariants, as expectations), :mod:`~replaykit.explore.group`
(grouping and shrinking), :mod:`~replaykit.explore.output` (the scenarios and the summary written) and
:mod:`~replaykit.explore.exploration` (one exploration). docs/explore.md states the invariants in full.
"""

from __future__ import annotations

from replaykit.explore.exploration import Options, Report, explore
from replaykit.explore.oracle import INVARIANTS
from replaykit.explore.space import KINDS

__all__ = ["INVARIANTS", "KINDS", "Options", "Report", "explore"]
