"""replaykit: offline replay and contract checks for LLM agent harnesses with provider-hosted web search.

The package root re-exports the everyday names. Heavier parts are imported from their modules:
``replaykit.server`` (the loopback fake provider, on aiohttp), ``replaykit.strategies`` and
``replaykit.properties`` (Hypothesis), ``replaykit.record`` (the recording proxy), so ``import replaykit``
and the pytest plugin stay cheap.
"""

from replaykit.cassette import Cassette, Interaction, Meta, Request, Response
from replaykit.citations import verify_transcript
from replaykit.contracts import Violation, check_interaction, validate
from replaykit.errors import (
    CassetteError,
    CitationError,
    ContractError,
    LocalRequestError,
    MatchError,
    NetworkBlockedError,
    ReplaykitError,
    ScenarioError,
    TargetError,
    UsageError,
    WebSearchError,
)
from replaykit.estimate import Budget, Estimate, budget, estimate_tokens
from replaykit.findings import Finding
from replaykit.provenance import ErrorInfo
from replaykit.redact import Rules, SecretFinding
from replaykit.replay import Target, project
from replaykit.transcript import ConversionError, Transcript, from_interaction, restore
from replaykit.vcrpy import vcr_config
from replaykit.verify import Report, verify_paths

__version__ = "0.1.0"

__all__ = [
    "Budget",
    "Cassette",
    "CassetteError",
    "CitationError",
    "ContractError",
    "ConversionError",
    "ErrorInfo",
    "Estimate",
    "Finding",
    "Interaction",
    "LocalRequestError",
    "MatchError",
    "Meta",
    "NetworkBlockedError",
    "ReplaykitError",
    "Report",
    "Request",
    "Response",
    "Rules",
    "ScenarioError",
    "SecretFinding",
    "Target",
    "TargetError",
    "Transcript",
    "UsageError",
    "Violation",
    "WebSearchError",
    "__version__",
    "budget",
    "check_interaction",
    "estimate_tokens",
    "from_interaction",
    "project",
    "restore",
    "validate",
    "vcr_config",
    "verify_paths",
    "verify_transcript",
]
