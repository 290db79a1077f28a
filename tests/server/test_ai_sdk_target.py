"""The AI SDK target (``examples/targets/ai-sdk/``): a replaykit target on the Vercel AI SDK, installed at its
lockfile by :func:`node_support.installed_project` (Node 22 from the ``node`` package it pins), run on every
bundled scenario: each passes, is n/a (a capability its manifest lacks) or fails on a defect of the library
named in the example's README (when one stops failing, the library changed and the table is out of date);
then on plain (non-stream) requests to each provider and API and on a cancellation.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from node_support import installed_project, node_of

from replaykit.resources import data_dir
from replaykit.scenario.model import load_all
from replaykit.scenario.runner import Result, run_many
from replaykit.scenario.target import Target

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "targets" / "ai-sdk"
SCENARIOS = data_dir("scenarios")
CASSETTES = data_dir("cassettes")
DEFECTS = {  # scenario: the check the library's defect fails (examples/targets/ai-sdk/README.md)
    "midstream-disconnect": "providerRequests",
    "stall-idle-timeout": "providerRequests",
    "model-switch-search-history": "reaches[0]",
    "search-read-tool": "persistedSnapshot",
    "gemini-grounding-bad-support": "outcomeLacks[0]",
    "chat-annotations-provider-switch": "reaches[1]",
    "model-switch-gemini-history": "reaches[1]",
    "model-switch-gemini-to-openai": "reaches[0]",
}
VOCABULARY = {"anthropic-messages", "openai-responses", "azure-responses", "openai-chat", "azure-chat",
              "gemini-generate", "vertex-generate", "stream", "non-stream",
              "hosted-search", "tool:read", "tool:task", "tool:web_search", "research", "durable", "restart",
              "persisted-transcript", "cancel", "cancel-signal", "estimates"}
LACKS = {"estimates", "durable", "research", "tool:task", "tool:web_search", "vertex-generate"}
SEARCH = {"type": "hostedSearch", "maxUses": 5}
ROUTE = {"anthropic": "messages", "openai": "responses", "azure": "responses", "gemini": "generate"}


@pytest.fixture(scope="module")
def command() -> str:
    return f"{node_of(installed_project(EXAMPLE))} {EXAMPLE / 'target.mjs'}"


def _run(paths: list[Path], command: str) -> dict[str, Result]:
    results = run_many(load_all(paths), Target.parse(command), jobs=2)
    return {result.scenario.name: result for result in results}


def _route_of(provider: str, api: str | None) -> str:
    """The fake provider's route a plain request of ``provider`` on ``api`` (None: its default) lands on."""
    return f"{provider}.{'chat' if api == 'openai-chat' else ROUTE[provider]}"


def _scenario(folder: Path, name: str, cassette: str, step: dict[str, Any], **rest: Any) -> Path:
    shutil.copy(CASSETTES / cassette, folder / f"{name}-cassette.yaml")
    doc = {"name": name, "kind": "contract", "description": f"The AI SDK target: {name}.",
           "cassettes": [f"{name}-cassette.yaml"], "steps": [step], "tools": [SEARCH], **rest}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def test_every_bundled_scenario_passes_is_na_or_fails_on_a_named_library_defect(command: str) -> None:
    results = _run([SCENARIOS], command)
    failed = {name: [check.name for check in r.checks if not check.ok]
              for name, r in results.items() if r.failed}
    assert sorted(failed) == sorted(DEFECTS), {name: results[name].failure_text() for name in failed}
    assert {name: check in failed[name] for name, check in DEFECTS.items()} == dict.fromkeys(DEFECTS, True)
    assert {need for r in results.values() for need in r.missing} <= LACKS
    assert sum(r.passed for r in results.values()) >= 11
    table = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    assert [name for name in DEFECTS if f"| `{name}` |" not in table] == []


@pytest.mark.parametrize(("provider", "api", "model", "cassette", "prompt"), [
    ("anthropic", None, "claude-sonnet-4-6", "anthropic/web_search.yaml",
     "When was Python 3.13 released, and what are its headline features?"),
    ("openai", None, "gpt-5", "openai/web_search.yaml",
     "What does PEP 8 recommend for the maximum line length?"),
    ("azure", None, "gpt-5-web-search", "azure/web_search.yaml",
     "At what temperature does water boil on the summit of Mount Everest?"),
    ("openai", "openai-chat", "gpt-4o-search-preview", "openai/chat_web_search.yaml",
     "What does PEP 8 recommend for the maximum line length?"),
    ("azure", "openai-chat", "gpt-4o-search", "azure/chat_web_search.yaml",
     "What does PEP 8 recommend for the maximum line length?"),
    ("gemini", None, "gemini-2.5-flash", "gemini/grounding.yaml",
     "When was Python 3.13.0 released, and what does it add?"),
])
def test_plain_requests_reach_each_provider(command: str, tmp_path: Path, provider: str, api: str | None,
                                            model: str, cassette: str, prompt: str) -> None:
    step = {"prompt": prompt, "provider": provider, "model": model, **({"api": api} if api else {})}
    name = f"plain-{provider}-{api or 'default'}"
    path = _scenario(tmp_path, name, cassette, step,
                     expectations={"outcome": "ok", "providerRequests": 1, "requestContractsHold": True,
                                   "persistWrites": 1, "requests": {_route_of(provider, api): 1}})
    result = _run([path], f"env REPLAYKIT_AI_SDK_STREAM=0 {command}")[name]
    assert result.passed, result.failure_text()
    assert result.journal[0].body.get("stream") in (None, False)


def test_a_cancelled_run_is_aborted_and_persists_nothing(command: str, tmp_path: Path) -> None:
    step = {"prompt": "When was Python 3.13 released, and what are its headline features?",
            "provider": "anthropic", "model": "claude-sonnet-4-6", "cancelAfterMs": 1000}
    path = _scenario(tmp_path, "cancelled", "anthropic/web_search_stream.yaml", step, idleTimeoutMs=60000,
                     faults=[{"kind": "stall", "route": "anthropic", "nth": 1, "after": 2, "ms": 20000}],
                     expectations={"outcome": "aborted",
                                   "error": {"code": "CANCELLED", "provenance": "cancelled"},
                                   "providerRequests": 1, "persistWrites": 0, "unused": True})
    result = _run([path], command)["cancelled"]
    assert result.passed, result.failure_text()


def test_a_run_cancelled_by_sigint_once_its_request_arrived_is_aborted(command: str, tmp_path: Path) -> None:
    """cancelOn: the runner's SIGINT, once the stalled request has arrived, aborts the library's request."""
    step = {"prompt": "When was Python 3.13 released, and what are its headline features?",
            "provider": "anthropic", "model": "claude-sonnet-4-6",
            "cancelOn": {"route": "anthropic", "nth": 1}}
    path = _scenario(tmp_path, "interrupted", "anthropic/web_search_stream.yaml", step, idleTimeoutMs=60000,
                     faults=[{"kind": "stall", "route": "anthropic", "nth": 1, "after": 2, "ms": 20000}],
                     expectations={"outcome": "aborted",
                                   "error": {"code": "CANCELLED", "provenance": "cancelled"},
                                   "providerRequests": 1, "persistWrites": 0, "unused": True})
    result = _run([path], command)["interrupted"]
    assert result.passed, result.failure_text()


def test_the_manifest_declares_capabilities_of_the_vocabulary_only() -> None:
    manifest = yaml.safe_load((EXAMPLE / "replaykit-target.yaml").read_text(encoding="utf-8"))
    assert manifest["name"] == "ai-sdk"
    assert set(manifest["capabilities"]) <= VOCABULARY
    assert not LACKS & set(manifest["capabilities"])
    assert manifest["mutants"] == {}
