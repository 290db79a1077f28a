"""A target in another language: the Node target of tests/fixtures/targets/js/ speaks the target protocol.

The target (``node target.mjs``, no npm packages) reads ``REPLAYKIT_INPUT``, restores the transcript (or its
store), estimates, sends Anthropic Messages requests (SSE streams parsed by hand; ``REPLAYKIT_JS_STREAM=0``
for plain JSON) to the fake provider, persists atomically and writes its outcome to ``REPLAYKIT_OUTCOME``.
``REPLAYKIT_JS_DEFECT=assume-name`` gives it a real defect: its estimator reads ``block.name.length`` on every
block that is not text, which throws on a ``web_search_tool_result`` (reported as INTERNAL_ERROR).

:func:`run_target` drives it as ``replaykit run --target "node tests/fixtures/targets/js/target.mjs"`` does:
one fake provider per run, the protocol's environment, a fresh work folder and a state folder.
"""

from __future__ import annotations

import copy
import functools
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from replaykit import cassette, contracts
from replaykit.assertions import (
    assert_no_provider_request,
    assert_provenance,
    assert_requests,
    assert_retries,
)
from replaykit.cassette import Cassette
from replaykit.resources import data_dir
from replaykit.scenario import Target, load, run_scenario
from replaykit.server import FakeProvider

pytestmark = pytest.mark.slow

Json = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "tests" / "fixtures" / "targets" / "js" / "target.mjs"
SCENARIOS = data_dir("scenarios")
EXAMPLE = yaml.safe_load((SCENARIOS / "example-nameless-search-block.yaml").read_text(encoding="utf-8"))
EXAMPLE_CASSETTE = SCENARIOS / "cassettes" / "example-nameless-search-block.yaml"
FOLLOW_UP = data_dir("cassettes") / "anthropic" / "web_search_follow_up.yaml"
ROUTE = "anthropic.messages"
TIMEOUT = 60  # seconds: a bound on a hang, not a speed check


@pytest.fixture(autouse=True)
def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not installed: the JavaScript target needs Node 20 or later")
    return found


# ---------------------------------------------------------------- the driver


@dataclass
class Ran:
    """What one run of the target left: its outcome, the provider requests' bodies and its store."""

    outcome: Json
    bodies: list[Json]
    state: Path
    stderr: str

    @property
    def stored(self) -> Json | None:
        store = self.state / "transcript.json"
        return json.loads(store.read_text(encoding="utf-8")) if store.exists() else None


def run_target(fake: FakeProvider, given: Json, work: Path, env: dict[str, str] | None = None,
               script: Path = TARGET) -> Ran:
    """Run the JS target on ``given`` (the input JSON) against ``fake``, as the scenario runner will.

    ``script`` is the target's file (default: ``TARGET``); ``work`` holds the run's folders: ``cwd/`` (fresh
    per call), ``state/`` (kept across calls: a restart is a second call with ``transcript: null``), the input
    and the outcome. The lead can swap this function for ``replaykit run --target "node
    tests/fixtures/targets/js/target.mjs"`` once the runner is merged.
    """
    cwd, state = work / f"cwd{len(list(work.glob('cwd*')))}", work / "state"
    cwd.mkdir(parents=True)
    state.mkdir(exist_ok=True)
    (work / "input.json").write_text(json.dumps(given), encoding="utf-8")
    outcome = work / "outcome.json"
    outcome.unlink(missing_ok=True)
    seen = len(fake.journal)
    environ = {key: value for key, value in os.environ.items() if not key.endswith("_API_KEY")}
    environ |= fake.env() | {"REPLAYKIT_INPUT": str(work / "input.json"), "REPLAYKIT_OUTCOME": str(outcome),
                             "REPLAYKIT_STATE_DIR": str(state)} | (env or {})
    done = subprocess.run(["node", str(script)], cwd=cwd, env=environ, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    written = json.loads(outcome.read_text(encoding="utf-8"))
    assert contracts.validate("replaykit.target-outcome", written) == [], written
    bodies = [entry.body for entry in fake.journal[seen:] if entry.route == ROUTE]
    return Ran(written, bodies, state, done.stderr)


def example_input(transcript: Json | None = None, **extra: Any) -> Json:
    """The input the runner writes for the example scenario (its transcript unless another is given)."""
    stored = json.loads((SCENARIOS / EXAMPLE["transcript"]).read_text(encoding="utf-8"))
    given = {key: EXAMPLE[key] for key in ("steps", "tools", "contextWindow", "reserve")}
    return {"scenario": EXAMPLE["name"], "transcript": stored if transcript is None else transcript,
            "idleTimeoutMs": 30000, "maxRetries": 2, "system": None, **given, **extra}


# ---------------------------------------------------------------- streaming twins of plain cassettes


@functools.cache
def _generator() -> Any:
    """scripts/synthesize_cassettes, the one synthesizer: it turns a message into its SSE stream."""
    path = ROOT / "scripts" / "synthesize_cassettes"
    loader = importlib.machinery.SourceFileLoader("synthesize_cassettes", str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    sys.modules[loader.name] = module  # its dataclasses look their module up while being defined
    loader.exec_module(module)
    return module


def streamed(source: Path) -> Cassette:
    """The streaming twin of a plain Anthropic cassette: each request with ``stream: true``, each answer
    the SSE stream of the same message."""
    generator = _generator()
    exchanges = []
    for number, interaction in enumerate(cassette.load(source).interactions):
        request, message = interaction.request.json(), interaction.response.json()
        events = generator.a_stream_events(message, message["usage"]["input_tokens"])
        exchanges.append(generator.a_streamed(f"{source.stem}-{number}", {**request, "stream": True}, events))
    return generator.cassette(f"anthropic/{source.stem}_stream.yaml", f"Streaming twin of {source.name}.",
                              [str(source)], exchanges).cassette


def provider(source: Path, stream: bool) -> FakeProvider:
    return FakeProvider([streamed(source) if stream else source], journal_bodies="full")


MODES = [pytest.param(True, id="stream"), pytest.param(False, id="plain")]


def mode_env(stream: bool) -> dict[str, str]:
    return {} if stream else {"REPLAYKIT_JS_STREAM": "0"}


# ---------------------------------------------------------------- the nameless search block (the example)


@pytest.mark.parametrize("stream", MODES)
def test_the_example_scenario_passes(stream: bool, tmp_path: Path) -> None:
    given = example_input()
    assert contracts.validate("replaykit.target-input", given) == []
    with provider(EXAMPLE_CASSETTE, stream) as fake:
        ran = run_target(fake, given, tmp_path, mode_env(stream))
        assert_requests(fake.journal, EXAMPLE["expectations"]["providerRequests"], route=ROUTE)
        assert fake.unmatched() == [] and fake.unused() == []
        assert all(entry.request_violations == [] for entry in fake.journal)
    assert ran.outcome["status"] == EXAMPLE["expectations"]["outcome"] == "ok"
    [bound] = EXAMPLE["expectations"]["estimates"]
    [estimate] = ran.outcome["estimates"]
    assert estimate["step"] == bound["step"] and bound["min"] <= estimate["tokens"] <= bound["max"]
    assert ran.outcome["persistWrites"] == 1 and ran.stored == ran.outcome["transcript"]
    assert ran.outcome["transcript"]["messages"][-1]["content"][0]["text"].startswith("No. In Python 3.13")


def test_the_search_blocks_reach_the_provider_verbatim(tmp_path: Path) -> None:
    given = example_input()
    stored = given["transcript"]["messages"][1]["content"]
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        ran = run_target(fake, given, tmp_path)
    [body] = ran.bodies
    sent = body["messages"][1]["content"]
    assert [block["type"] for block in sent[:3]] == ["text", "server_tool_use", "web_search_tool_result"]
    assert sent[1] == stored[1]["raw"] and sent[2] == stored[2]["raw"]  # encrypted_content intact
    assert "name" not in sent[2] and body["stream"] is True
    prompt = {"type": "text", "text": EXAMPLE["steps"][0]["prompt"]}
    assert body["messages"][-1] == {"role": "user", "content": [prompt]}


def test_the_estimate_is_the_usage_anchor_plus_the_new_prompt(tmp_path: Path) -> None:
    """Anchored on the stored turn's 10,051 tokens; the new message ("user", "text", the prompt) is
    47 characters: 12 tokens. An estimator that ignores the anchor gets about 1,330."""
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        ran = run_target(fake, example_input(), tmp_path)
    assert ran.outcome["estimates"] == [{"step": 0, "tokens": 10051 + 12}]


def test_an_instruction_change_drops_the_anchor(tmp_path: Path) -> None:
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        ran = run_target(fake, example_input(system="You are terse."), tmp_path)
    [estimate] = ran.outcome["estimates"]
    assert ran.outcome["status"] == "ok" and estimate["tokens"] < 10051  # counted from text: no anchor
    assert ran.bodies[0]["system"] == "You are terse."


# ---------------------------------------------------------------- the defect: block.name on every block


def test_the_assume_name_defect_fails_the_example_on_the_estimate(tmp_path: Path) -> None:
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        ran = run_target(fake, example_input(), tmp_path, {"REPLAYKIT_JS_DEFECT": "assume-name"})
        assert_no_provider_request(fake.journal)
    assert_provenance(ran.outcome, outcome="error", code="INTERNAL_ERROR", provenance="local",
                      retryable=False)
    assert ran.outcome["error"]["message"].startswith("TypeError: ")
    assert ran.outcome["estimates"] == [] and ran.outcome["persistWrites"] == 0  # no estimate for step 0


def test_the_defect_strikes_only_once_a_search_result_is_in_the_history(tmp_path: Path) -> None:
    """From a new conversation the first turn (a search) passes; the follow-up, which must estimate the
    web_search_tool_result it replays, crashes. Without the defect both turns pass."""
    given = example_input(transcript=None) | {"transcript": None, "steps": [
        {"prompt": "When was Python 3.13 released, and what are its headline features?",
         "provider": "anthropic", "model": "claude-sonnet-4-6"}, EXAMPLE["steps"][0]]}
    with provider(FOLLOW_UP, stream=True) as fake:
        broken = run_target(fake, given, tmp_path / "defect", {"REPLAYKIT_JS_DEFECT": "assume-name"})
        assert_requests(fake.journal, 1, route=ROUTE)
    with provider(FOLLOW_UP, stream=True) as fake:
        fine = run_target(fake, given, tmp_path / "fixed")
        assert_requests(fake.journal, 2, route=ROUTE)
        assert fake.unused() == []
    assert [e["step"] for e in broken.outcome["estimates"]] == [0] and broken.outcome["persistWrites"] == 1
    assert_provenance(broken.outcome, outcome="error", code="INTERNAL_ERROR")
    assert fine.outcome["status"] == "ok" and [e["step"] for e in fine.outcome["estimates"]] == [0, 1]
    searched = fine.outcome["transcript"]["messages"][1]["content"]
    assert [block.get("phase") for block in searched if block["type"] == "hostedSearch"] == ["call", "result"]
    assert fine.bodies[1]["messages"][1]["content"] == [
        block["raw"] if block["type"] == "hostedSearch" else _wire_text(block) for block in searched]


def _wire_text(block: Json) -> Json:
    return {key: block[key] for key in ("type", "text", "citations") if key in block}


# ---------------------------------------------------------------- local validation, display-only records


def test_a_corrupt_container_is_refused_locally(tmp_path: Path) -> None:
    transcript = example_input()["transcript"]
    blocks = transcript["messages"][1]["content"]
    transcript["messages"][1]["content"] = {"type": "hostedSearch", "blocks": blocks}  # not a block list
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        ran = run_target(fake, example_input(transcript), tmp_path)
        assert_no_provider_request(fake.journal)
    assert_provenance(ran.outcome, outcome="error", code="LOCAL_REQUEST_ERROR", phase="validation",
                      provenance="local", retryable=False)
    assert "/messages/1/content" in ran.outcome["error"]["message"]
    assert ran.outcome["persistWrites"] == 0 and ran.stored is None and ran.outcome["transcript"] is None


def test_a_display_only_search_record_is_not_replayed(tmp_path: Path) -> None:
    transcript = example_input()["transcript"]
    for block in transcript["messages"][1]["content"]:
        block.pop("raw", None)
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        ran = run_target(fake, example_input(transcript), tmp_path)
        assert_requests(fake.journal, 1, route=ROUTE)
    assert ran.outcome["status"] == "ok"
    sent = [block["type"] for block in ran.bodies[0]["messages"][1]["content"]]
    assert "server_tool_use" not in sent and "web_search_tool_result" not in sent and sent[0] == "text"


# ---------------------------------------------------------------- retries, timeouts, cancellation


def test_a_529_is_retried_then_succeeds(tmp_path: Path) -> None:
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        fake.inject("route=anthropic,nth=1,status=529,retry_after_ms=1")
        ran = run_target(fake, example_input(maxRetries=2), tmp_path)
        assert_retries(fake.journal, ROUTE, 1)
    assert ran.outcome["status"] == "ok"


def test_a_400_is_never_retried(tmp_path: Path) -> None:
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        fake.inject("route=anthropic,nth=1,status=400")
        ran = run_target(fake, example_input(maxRetries=2), tmp_path)
        assert_requests(fake.journal, 1, route=ROUTE)
    assert_provenance(ran.outcome, outcome="error", code="PROVIDER_ERROR", provenance="provider", status=400,
                      retryable=False)


def test_retries_are_bounded_by_max_retries(tmp_path: Path) -> None:
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        fake.inject({"kind": "status", "route": "anthropic", "status": 529, "retry_after_ms": 1})
        ran = run_target(fake, example_input(maxRetries=1), tmp_path)
        assert_retries(fake.journal, ROUTE, 1)
    assert_provenance(ran.outcome, outcome="error", code="PROVIDER_ERROR", status=529, retryable=False)
    assert ran.outcome["persistWrites"] == 0


def test_a_mid_stream_disconnect_is_a_transport_error_and_retried(tmp_path: Path) -> None:
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        fake.inject("kind=disconnect,route=anthropic,nth=1,after=2")
        ran = run_target(fake, example_input(maxRetries=1), tmp_path)
        assert_retries(fake.journal, ROUTE, 1)
    assert ran.outcome["status"] == "ok"


def test_a_stall_past_the_idle_timeout_is_a_deadline(tmp_path: Path) -> None:
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        fake.inject("kind=stall,route=anthropic,after=2")
        ran = run_target(fake, example_input(maxRetries=0, idleTimeoutMs=300), tmp_path)
        assert_requests(fake.journal, 1, route=ROUTE)
    assert_provenance(ran.outcome, outcome="error", code="DEADLINE_EXCEEDED", provenance="deadline",
                      retryable=False)


def test_a_cancel_during_a_stall_aborts_the_run(tmp_path: Path) -> None:
    given = example_input(idleTimeoutMs=30000)
    given["steps"] = [{**given["steps"][0], "cancelAfterMs": 300}]
    with provider(EXAMPLE_CASSETTE, stream=True) as fake:
        fake.inject("kind=stall,route=anthropic,after=2")
        ran = run_target(fake, given, tmp_path)
        assert_requests(fake.journal, 1, route=ROUTE)
    assert_provenance(ran.outcome, outcome="aborted", code="CANCELLED", provenance="cancelled",
                      retryable=False)
    assert ran.outcome["persistWrites"] == 0


def test_a_sigint_once_the_request_has_arrived_aborts_the_run(node: str, tmp_path: Path) -> None:
    """cancelOn through the runner: its SIGINT aborts the held request; the outcome is still written."""
    step = {"prompt": "When was Python 3.13 released?", "provider": "anthropic", "model": "claude-sonnet-4-6",
            "cancelOn": {"route": "anthropic.messages", "nth": 1}}
    held = [{"kind": "status", "route": "anthropic", "nth": 1, "status": 503},
            {"kind": "delay_headers", "route": "anthropic", "nth": 1, "ms": 60000}]
    doc = {"name": "interrupted", "kind": "contract", "description": "A SIGINT cancels the run.",
           "steps": [step], "faults": held, "maxRetries": 0, "requires": ["stream"],
           "expectations": {"outcome": "aborted", "error": {"code": "CANCELLED", "provenance": "cancelled"},
                            "providerRequests": 1, "persistWrites": 0}}
    path = tmp_path / "interrupted.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    target = Target.parse(f"{node} {TARGET}")
    assert target.manifest.declares("cancel-signal")
    result = run_scenario(load(path), target)
    assert result.passed, result.failure_text()


# ---------------------------------------------------------------- persist, then restore in a new process


def test_persist_then_restore_in_a_new_process(tmp_path: Path) -> None:
    first, second = copy.deepcopy(example_input(transcript=None)), example_input()
    first["transcript"] = None
    first["steps"] = [{"prompt": "When was Python 3.13 released, and what are its headline features?",
                       "provider": "anthropic", "model": "claude-sonnet-4-6"}]
    second["transcript"] = None  # restore from the store
    with provider(FOLLOW_UP, stream=True) as fake:
        before = run_target(fake, first, tmp_path)
        after = run_target(fake, second, tmp_path)
        assert_requests(fake.journal, 2, route=ROUTE)
        assert fake.unused() == [] and fake.unmatched() == []
    assert before.outcome["status"] == after.outcome["status"] == "ok"
    assert before.outcome["persistWrites"] == after.outcome["persistWrites"] == 1
    assert after.stored == after.outcome["transcript"] and len(after.stored["messages"]) == 4
    replayed = after.bodies[0]["messages"][1]["content"]
    assert [block["type"] for block in replayed][1:3] == ["server_tool_use", "web_search_tool_result"]
    assert replayed[2] == before.stored["messages"][1]["content"][2]["raw"]
    assert not list(after.state.glob("*.tmp"))  # atomic writes leave no temporary file


# ---------------------------------------------------------------- the docs' skeleton (the target protocol)


def docs_target() -> str:
    text = (ROOT / "docs" / "target-protocol.md").read_text(encoding="utf-8")
    [block] = re.findall(r"<!-- readme: target -->\n```js\n(.*?)```", text, flags=re.DOTALL)
    return str(block)


def test_the_docs_skeleton_is_a_target(tmp_path: Path) -> None:
    """The skeleton restores, replays the search blocks from raw and persists: the example's request and
    outcome, though without an estimate (it has none) the example's estimate expectation would fail."""
    script = tmp_path / "my_target.mjs"
    script.write_text(docs_target(), encoding="utf-8")
    given = example_input()
    with provider(EXAMPLE_CASSETTE, stream=False) as fake:
        ran = run_target(fake, given, tmp_path / "run", script=script)
        assert_requests(fake.journal, 1, route=ROUTE)
        assert fake.unused() == [] and all(entry.request_violations == [] for entry in fake.journal)
    assert ran.outcome["status"] == "ok" and ran.outcome["persistWrites"] == 1
    assert "estimates" not in ran.outcome
    stored = given["transcript"]["messages"][1]["content"]
    assert ran.bodies[0]["messages"][1]["content"][1:3] == [stored[1]["raw"], stored[2]["raw"]]
    assert ran.stored == ran.outcome["transcript"]
