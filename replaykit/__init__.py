"""replaykit: offline replay and contract checks for LLM agent harnesses with provider-hosted web search."""

from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.errors import (
    CassetteError,
    ContractError,
    MatchError,
    ReplaykitError,
    ScenarioError,
    TargetError,
    UsageError,
)

__version__ = "0.1.0"

__all__ = [
    "Cassette",
    "CassetteError",
    "ContractError",
    "Interaction",
    "MatchError",
    "Meta",
    "ReplaykitError",
    "Request",
    "Response",
    "ScenarioError",
    "TargetError",
    "UsageError",
    "__version__",
]
