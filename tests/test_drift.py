"""``replaykit drift``: the contracts against the installed SDKs, and each gap kind shown to be caught."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replaykit import contracts, drift
from replaykit.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, main
from replaykit.contracts import Contracts, registry
from replaykit.resources import data_dir


def test_installed_sdks_have_no_unexplained_blocking_gap() -> None:
    gaps = drift.compare()
    assert [g for g in gaps if drift.verdict(g) == "blocking"] == []
    assert all(g.note for g in gaps if drift.verdict(g) == "explained")


def test_every_mapping_names_an_existing_sdk_type_and_contract_entry() -> None:
    for entry in drift.MAPPING:
        module, _, name = entry.sdk.partition(":")
        assert hasattr(importlib.import_module(module), name.partition(".")[0]), entry.sdk
        schema = contracts.default().lookup(contracts.BASE_URI + entry.contract)
        assert {"properties", "enum", "allOf", "else"} & set(schema), entry.contract


def test_cli_table_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drift"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["verdict", "sdk", "sdk", "type", "contract", "gap", "detail"]
    last = out.splitlines()[-1]
    assert last.startswith(f"anthropic {importlib.metadata.version('anthropic')}, openai ")
    assert f"google-genai {importlib.metadata.version('google-genai')}" in last
    assert "(0 blocking" in last and last.endswith(": OK")


def test_cli_json_for_one_sdk(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drift", "--sdk", "openai", "--json"]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    assert list(document["sdks"]) == ["openai"]
    assert {gap["place"].partition(":")[0] for gap in document["gaps"]} <= {"openai"}
    assert document["summary"]["ok"] is True
    assert document["summary"]["entries"] == sum(e.package == "openai" for e in drift.MAPPING)


def test_a_missing_sdk_is_a_usage_error(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert main(["drift", "--sdk", "anthropic"]) == EXIT_USAGE
    assert "the anthropic SDK is not installed; pip install anthropic" in capsys.readouterr().err


# ---------------------------------------------------------------- each gap kind, on an edited copy


def _edited(tmp_path: Path, relative: str, edit: Callable[[dict[str, Any]], None]) -> Contracts:
    root = tmp_path / "contracts"
    shutil.copytree(data_dir("contracts"), root)
    path = root / relative
    schema = json.loads(path.read_text(encoding="utf-8"))
    edit(schema["$defs"])
    path.write_text(json.dumps(schema), encoding="utf-8")
    return Contracts(root)


def _remove_error_code(defs: dict[str, Any]) -> None:
    defs["web_search_tool_result_error"]["properties"]["error_code"]["enum"].remove("max_uses_exceeded")


def _remove_item_type(defs: dict[str, Any]) -> None:
    defs["call_type"]["enum"].remove("web_search_call")  # the item types ending in _call


def _remove_message_type(defs: dict[str, Any]) -> None:
    defs["output_item"]["properties"]["type"]["else"]["enum"].remove("message")  # the others


def _require_page_age(defs: dict[str, Any]) -> None:
    defs["web_search_result"]["required"].append("page_age")


def _drop_page_age(defs: dict[str, Any]) -> None:
    del defs["web_search_result"]["properties"]["page_age"]


def _remove_find_action(defs: dict[str, Any]) -> None:
    defs["action"]["properties"]["type"]["enum"].remove("find_in_page")


def _remove_content_filter(defs: dict[str, Any]) -> None:
    defs["finish_reason"]["enum"].remove("content_filter")


def _require_refusal(defs: dict[str, Any]) -> None:
    defs["message"]["required"].append("refusal")


def _remove_search_context_size(defs: dict[str, Any]) -> None:
    defs["web_search_options"]["properties"]["search_context_size"]["enum"].remove("high")
def _remove_finish_reason(defs: dict[str, Any]) -> None:
    defs["candidate"]["properties"]["finishReason"]["enum"].remove("MALFORMED_FUNCTION_CALL")  # an Enum's


def _unexplain_uri(defs: dict[str, Any]) -> None:
    del defs["web"]["x-drift-ignore"]


CASES = [
    ("openai/chat-completion.schema.json", _remove_content_filter, "Choice", "enum",
     "finish_reason: 'content_filter' is allowed by the SDK, not by the contract"),
    ("openai/chat-completion.schema.json", _require_refusal, "ChatCompletionMessage", "required",
     "refusal: the contract requires it, the SDK marks it optional"),
    ("openai/chat-request.schema.json", _remove_search_context_size, "WebSearchOptions", "enum",
     "search_context_size: 'high' is allowed by the SDK, not by the contract"),
    ("anthropic/content-blocks.schema.json", _remove_error_code, "WebSearchToolResultErrorObject", "enum",
     "error_code: 'max_uses_exceeded' is allowed by the SDK, not by the contract"),
    ("openai/output-items.schema.json", _remove_item_type, "ResponseFunctionWebSearch", "discriminator",
     "type 'web_search_call' (ResponseFunctionWebSearch) is missing from the contract"),
    ("openai/output-items.schema.json", _remove_message_type, "ResponseOutputMessage", "discriminator",
     "type 'message' (ResponseOutputMessage) is missing from the contract"),
    ("anthropic/content-blocks.schema.json", _require_page_age, "WebSearchResultBlock", "required",
     "page_age: the contract requires it, the SDK marks it optional"),
    ("anthropic/content-blocks.schema.json", _drop_page_age, "WebSearchResultBlockParam", "closed",
     "page_age: the SDK sends it, the closed contract object rejects it"),
    ("openai/output-items.schema.json", _remove_find_action, "ActionFind", "discriminator",
     "type 'find_in_page' (ActionFind) is missing from the contract"),
    ("gemini/response.schema.json", _remove_finish_reason, "Candidate", "enum",
     "finishReason: 'MALFORMED_FUNCTION_CALL' is allowed by the SDK, not by the contract"),
    ("gemini/response.schema.json", _unexplain_uri, "GroundingChunkWeb", "required",
     "uri: the contract requires it, the SDK marks it optional"),
]


@pytest.mark.parametrize(("relative", "edit", "sdk_type", "gap", "detail"), CASES, ids=[c[3] + ":" + c[2]
                                                                                      for c in CASES])
def test_each_blocking_gap_is_found(tmp_path: Path, relative: str, edit: Callable[[dict[str, Any]], None],
                                    sdk_type: str, gap: str, detail: str) -> None:
    found = drift.compare(contracts=_edited(tmp_path, relative, edit))
    blocking = [(g.place.rpartition(":")[2], g.code, g.message) for g in found
                if drift.verdict(g) == "blocking"]
    assert (sdk_type, gap, detail) in blocking, blocking


def test_a_blocking_gap_fails_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    edited = _edited(tmp_path, "anthropic/content-blocks.schema.json", _remove_error_code)
    monkeypatch.setattr(registry, "_DEFAULT", [edited])
    assert main(["drift", "--sdk", "anthropic"]) == EXIT_FINDINGS
    out = capsys.readouterr().out
    assert "BLOCKING  anthropic  WebSearchToolResultErrorObject" in out
    assert out.rstrip().endswith("FAILED (a payload the SDK accepts would fail a contract)")


def test_an_explained_gap_does_not_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    def explain(defs: dict[str, Any]) -> None:
        _remove_error_code(defs)
        defs["web_search_tool_result_error"]["x-drift-ignore"] = {
            "enum:error_code:max_uses_exceeded": "never sent on this route (test)"}

    edited = _edited(tmp_path, "anthropic/content-blocks.schema.json", explain)
    monkeypatch.setattr(registry, "_DEFAULT", [edited])
    assert main(["drift", "--sdk", "anthropic"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "EXPLAINED  anthropic  WebSearchToolResultErrorObject" in out
    assert "enum: never sent on this route (test)" in out


def test_cli_run_as_a_program_never_prints_a_traceback() -> None:
    import subprocess
    import sys

    command = [sys.executable, "-m", "replaykit", "drift", "--sdk", "openai"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == EXIT_OK, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.rstrip().endswith(": OK")


def test_the_action_the_wire_omits_is_explained_not_blocking() -> None:
    gaps = [gap for gap in drift.compare(("openai",))
            if gap.code == "sdk-required" and "action:" in gap.message]
    assert {gap.place for gap in gaps} == {"openai:ResponseFunctionWebSearch",
                                           "openai:ResponseFunctionWebSearchParam"}
    assert all(drift.verdict(gap) == "explained" and "the wire" in gap.note for gap in gaps)


def test_a_type_the_installed_sdk_lacks_is_an_info_gap_not_a_crash() -> None:
    # An older (or newer) SDK release may not have a type of the mapping: nothing to compare, said so.
    text = "anthropic/content-blocks.schema.json#/$defs/text"
    entry = drift.Entry("anthropic.types:NoSuchBlockParam", text)
    found = drift.compare(("anthropic",), mapping=(entry,))
    assert [(g.code, drift.verdict(g), g.place) for g in found] == [
        ("sdk-missing", "info", "anthropic:anthropic.types:NoSuchBlockParam")]
    assert "has no anthropic.types:NoSuchBlockParam" in found[0].message


# ---------------------------------------------------------------- an SDK that cannot parse what is sent


def _old_content_block() -> Any:
    """The content block union of an SDK release before server tools (anthropic 0.49 has no
    ``server_tool_use`` nor ``web_search_tool_result`` model): text, thinking and client tool blocks only."""
    import typing

    from anthropic.types import RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock

    return typing.Union[TextBlock, ThinkingBlock, RedactedThinkingBlock, ToolUseBlock]  # noqa: UP007


def test_a_block_the_sdk_cannot_parse_is_blocking_named_with_the_sdk_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    old = types.ModuleType("anthropic._replaykit_old_types")
    old.ContentBlock = _old_content_block()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, old.__name__, old)
    blocks = "anthropic/content-blocks.schema.json#/$defs/content_block"
    entry = drift.Entry(f"{old.__name__}:ContentBlock", blocks, parsed=True)
    found = drift.compare(("anthropic",), mapping=(entry,))
    version = importlib.metadata.version("anthropic")
    blocking = {g.message for g in found if drift.verdict(g) == "blocking"}
    assert all(g.code == "unparsed" for g in found if drift.verdict(g) == "blocking")
    for block in ("server_tool_use", "web_search_tool_result"):
        said = f"type {block!r}: the provider sends it and anthropic {version} has no model for it"
        assert f"{said} (the SDK cannot parse it); upgrade the SDK" in blocking


def test_the_same_member_missing_from_an_unparsed_union_is_only_information() -> None:
    # Without ``parsed`` (a union the SDK does not parse from responses) it stays contract-only.
    entry = drift.Entry("anthropic.types:RawMessageStreamEvent", "anthropic/stream-event.schema.json#")
    found = drift.compare(("anthropic",), mapping=(entry,))
    assert {g.code for g in found if "'ping'" in g.message} == {"contract-only"}
