"""replaykit: offline replay and contract checks for LLM agent harnesses with provider-hosted web search.

The package root re-exports the everyday names, each imported on first use: ``import replaykit`` loads no
module of replaykit's, so the command line (``replaykit --version``) and a target run by a scenario
(``python -m replaykit.scenario.call``) pay only for what they use. Heavier parts are imported from their
modules: ``replaykit.server`` (the loopback fake provider, on aiohttp), ``replaykit.strategies`` and
``replaykit.properties`` (Hypothesis), ``replaykit.record`` (the recording proxy).
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; type checkers take it as true
if TYPE_CHECKING:
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
    from replaykit.replay import ProviderModel, project
    from replaykit.transcript import ConversionError, Transcript, from_interaction, restore
    from replaykit.vcrpy import vcr_config
    from replaykit.verify import Report, verify_paths

    Target = ProviderModel  # the deprecated name of ProviderModel (CHANGELOG.md)

__version__ = "0.1.0"
#: replaykit's name on the package index (``replaykit`` there is an unrelated project); the module and the
#: command are ``replaykit``.
DISTRIBUTION = "replaykit-llm"

# Each exported name -> the module that defines it, imported on first use (the imports above are for type
# checkers only).
_HOMES = {
    "Cassette": "cassette", "Interaction": "cassette", "Meta": "cassette", "Request": "cassette",
    "Response": "cassette",
    "verify_transcript": "citations",
    "Violation": "contracts", "check_interaction": "contracts", "validate": "contracts",
    "CassetteError": "errors", "CitationError": "errors", "ContractError": "errors",
    "LocalRequestError": "errors", "MatchError": "errors", "NetworkBlockedError": "errors",
    "ReplaykitError": "errors", "ScenarioError": "errors", "TargetError": "errors", "UsageError": "errors",
    "WebSearchError": "errors",
    "Budget": "estimate", "Estimate": "estimate", "budget": "estimate", "estimate_tokens": "estimate",
    "Finding": "findings",
    "ErrorInfo": "provenance",
    "Rules": "redact", "SecretFinding": "redact",
    "ProviderModel": "replay", "project": "replay",
    "ConversionError": "transcript", "Transcript": "transcript", "from_interaction": "transcript",
    "restore": "transcript",
    "vcr_config": "vcrpy",
    "Report": "verify", "verify_paths": "verify",
}

__all__ = [
    "DISTRIBUTION",
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
    "ProviderModel",
    "ReplaykitError",
    "Report",
    "Request",
    "Response",
    "Rules",
    "ScenarioError",
    "SecretFinding",
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



# At run time only: for a type checker the imports above define these names, and a misspelt one is an error.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        from importlib import import_module

        if name == "Target":  # the deprecated name of ProviderModel (CHANGELOG.md): warns on every use
            import warnings

            warnings.warn("replaykit.Target is deprecated: use replaykit.ProviderModel (the name Target "
                          "means the harness under test, replaykit.scenario.Target)", DeprecationWarning,
                          stacklevel=2)
            return import_module("replaykit.replay").ProviderModel
        if name not in _HOMES:
            raise AttributeError(f"module 'replaykit' has no attribute {name!r}")
        value = getattr(import_module(f"replaykit.{_HOMES[name]}"), name)
        globals()[name] = value  # found once: the next use is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})

del TYPE_CHECKING  # not a name of the package
