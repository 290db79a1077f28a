"""``replaykit.qualify`` without running the checks: the environment's identity, the baseline diff (versions,
hashes, verdicts, flipped first), report.md, writing the reports, and the baseline report's usage errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from replaykit import contracts
from replaykit.cli import EXIT_USAGE, main
from replaykit.errors import UsageError
from replaykit.findings import Finding
from replaykit.qualify import Qualification, baseline, identity, markdown, write
from replaykit.qualify.stages import Section, failed_section, skipped
from replaykit.scenario.target import Target

JSON = dict[str, Any]
DIGEST = "sha256:" + "a" * 64


def _section(status: str, verdicts: dict[str, str], failures: int = 0) -> JSON:
    found = [
        Finding("error", "scenario", "outcome: expected ok, got error", f"s{n}", f"scenarios/s{n}.yaml")
        for n in range(failures)
    ]
    section = (
        failed_section(found, f"{len(verdicts)} checked", verdicts=verdicts)
        if status != "skipped"
        else skipped("no baseline target")
    )
    return section.to_json()


def report(anthropic: str = "2.16.0", retry: str = "pass", hashes: dict[str, str] | None = None) -> JSON:
    """A report as qualify writes it: anthropic at ``anthropic``, scenario retry-529 ``retry``."""
    sections = {name: _section("pass", {}) for name in ("verify", "contracts", "mutants", "properties")}
    sections["scenarios"] = _section(
        "fail" if retry == "fail" else "pass",
        {"retry-529": retry, "no-retry-400": "pass"},
        int(retry == "fail"),
    )
    sections["drift"] = _section("pass", {"anthropic/usage.schema.json sdk-required: x": "info"})
    sections["redgreen"] = _section("skipped", {})
    target = {
        "label": "python:replaykit.reference:run",
        "command": ["python"],
        "revision": None,
        "files": {"replaykit/reference": DIGEST},
    }
    return {
        "version": 1,
        "verdict": "fail" if retry == "fail" else "pass",
        "generatedAt": "2026-12-01T10:00:00Z",
        "replaykitVersion": "0.1.0",
        "subject": {"baseline": None, "candidate": target},
        "environment": {
            "python": "3.11.7 CPython",
            "platform": "Linux",
            "packages": {"anthropic": anthropic, "openai": "3.57.0", "distro": None},
        },
        "dependencies": [],
        "hashes": {
            "cassettes": hashes or {"cassettes/anthropic/web_search.yaml": DIGEST},
            "contracts": {"contracts/replaykit/scenario.schema.json": DIGEST},
            "scenarios": {},
        },
        "sections": sections,
        "changes": None,
    }


def errors(doc: JSON) -> list[str]:
    """The contract's errors on a report, as ``pointer: message``."""
    found = contracts.validate("replaykit.qualification-report", doc)
    return [f"{v.pointer}: {v.message}" for v in found if v.severity == "error"]


def test_the_example_reports_are_valid_by_the_contract() -> None:
    for doc in (report(), report(retry="fail")):
        assert [
            v for v in contracts.validate("replaykit.qualification-report", doc) if v.severity == "error"
        ] == []


# ---------------------------------------------------------------- the baseline diff


def test_a_version_change_and_a_flipped_verdict_are_listed_flipped_first() -> None:
    before = report(anthropic="0.70.0")
    after = report(
        anthropic="2.16.0",
        retry="fail",
        hashes={"cassettes/anthropic/web_search.yaml": "sha256:" + "b" * 64, "cassettes/new.yaml": DIGEST},
    )
    after["sections"]["drift"]["verdicts"] = {"anthropic/usage.schema.json sdk-required: y": "info"}
    dependencies, changes = baseline.compare(before, after, "old/report.json")
    assert dependencies == [{"name": "anthropic", "from": "0.70.0", "to": "2.16.0"}]
    assert changes["verdicts"][:2] == [
        {"section": "scenarios", "name": "scenarios", "from": "pass", "to": "fail", "flipped": True},
        {"section": "scenarios", "name": "retry-529", "from": "pass", "to": "fail", "flipped": True},
    ]
    assert {(c["name"], c["from"], c["to"]) for c in changes["verdicts"][2:]} == {
        ("anthropic/usage.schema.json sdk-required: x", "info", None),
        ("anthropic/usage.schema.json sdk-required: y", None, "info"),
    }
    assert not any(c["flipped"] for c in changes["verdicts"][2:])
    assert changes["hashes"] == [
        {
            "group": "cassettes",
            "path": "cassettes/anthropic/web_search.yaml",
            "from": DIGEST,
            "to": "sha256:" + "b" * 64,
        },
        {"group": "cassettes", "path": "cassettes/new.yaml", "from": None, "to": DIGEST},
    ]
    assert changes["baseline"] == {
        "file": "old/report.json",
        "generatedAt": "2026-12-01T10:00:00Z",
        "verdict": "pass",
    }
    after.update(dependencies=dependencies, changes=changes)
    assert [
        v for v in contracts.validate("replaykit.qualification-report", after) if v.severity == "error"
    ] == []


def test_the_same_report_twice_has_no_change() -> None:
    dependencies, changes = baseline.compare(report(), report(), "r.json")
    assert dependencies == [] and changes["verdicts"] == [] and changes["hashes"] == []


def test_the_target_files_are_compared_too() -> None:
    after = report()
    after["subject"]["candidate"]["files"] = {"replaykit/reference": "sha256:" + "c" * 64}
    assert baseline.compare(report(), after, "r.json")[1]["hashes"] == [
        {"group": "target", "path": "replaykit/reference", "from": DIGEST, "to": "sha256:" + "c" * 64}
    ]


@pytest.mark.parametrize(
    ("was", "now", "flip"),
    [
        ("pass", "fail", True),
        ("fail", "pass", True),
        ("killed", "survived", True),
        ("info", "blocking", True),
        ("info", "explained", False),
        ("pass", None, False),
        (None, "fail", False),
        ("skipped", "fail", True),
    ],
)
def test_what_counts_as_flipped(was: str | None, now: str | None, flip: bool) -> None:
    assert baseline.flipped(was, now) is flip


def test_report_md_calls_out_the_flip_before_everything_else() -> None:
    before, after = report(anthropic="0.70.0"), report(retry="fail")
    after["dependencies"], after["changes"] = baseline.compare(before, after, "old/report.json")
    text = markdown.render(after)
    assert text.startswith("# replaykit qualify: FAIL\n")
    order = [
        text.index(part)
        for part in (
            "**Failed: scenarios.**",
            "### Verdicts that flipped",
            "| scenarios | `retry-529` | pass | fail |",
            "### Versions",
            "| `anthropic` | 0.70.0 | 2.16.0 |",
            "## Checks",
            "## Failures",
            "## Environment",
            "## Inputs",
        )
    ]
    assert order == sorted(order)


def test_report_md_without_a_baseline_has_no_changes_section() -> None:
    text = markdown.render(report())
    assert "Changes since" not in text
    assert "| scenarios | ✅ pass | 2 checked |" in text
    assert "| `distro` | not installed |" in text


def test_a_table_cell_never_breaks_the_table() -> None:
    doc = report(retry="fail")
    doc["sections"]["scenarios"]["failures"][0]["message"] = "a | b\nc" + "x" * 1000
    row = next(line for line in markdown.render(doc).splitlines() if line.startswith("| `s0` |"))
    assert row.count(" | ") == 2 and "a \\| b c" in row and len(row) < markdown.MAX_CELL + 80


# ---------------------------------------------------------------- the baseline report as input


@pytest.mark.parametrize(
    ("content", "where", "why"),
    [
        ("{not json", ":1:", "not JSON"),
        (json.dumps({**report(), "verdict": "maybe"}), ":/verdict:", "not a qualification report"),
        (
            json.dumps({k: v for k, v in report().items() if k != "environment"}),
            ":/environment:",
            "'environment' is required",
        ),
    ],
)
def test_a_bad_baseline_report_is_a_usage_error_naming_the_place(
    tmp_path: Path, content: str, where: str, why: str
) -> None:
    path = tmp_path / "report.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError) as raised:
        baseline.load_report(path)
    assert f"{path}{where}" in str(raised.value) and why in str(raised.value)
    assert "give the report.json an earlier `replaykit qualify` wrote" in str(raised.value)


def test_a_missing_baseline_report_exits_2_before_any_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["qualify", "--baseline-report", str(tmp_path / "nope.json"), "--out", str(tmp_path / "out")])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "nope.json" in err and "cannot read the baseline report" in err
    assert not (tmp_path / "out").exists()


def test_a_bad_target_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["qualify", "--target", "node 'unbalanced", "--out", str(tmp_path)]) == EXIT_USAGE
    assert "balance its quotes" in capsys.readouterr().err


# ---------------------------------------------------------------- writing


def test_write_is_atomic_and_appends_to_the_step_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    doc = report()
    md, js = write(Qualification(doc), tmp_path / "out" / "deeper")
    assert json.loads(js.read_text(encoding="utf-8")) == doc
    assert summary.read_text(encoding="utf-8") == "earlier step\n" + md.read_text(encoding="utf-8") + "\n"
    assert sorted(p.name for p in md.parent.iterdir()) == ["report.json", "report.md"]  # no temp file left


def test_without_the_step_summary_nothing_else_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    write(Qualification(report()), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]


def test_failed_names_each_failed_section_and_its_first_failure() -> None:
    bad = failed_section([Finding("error", "scenario", "outcome: expected ok", "retry-529")], "1 failed")
    done = Qualification(
        report(retry="fail"),
        {"scenarios": bad, "verify": failed_section([], "ok"), "redgreen": skipped("why")},
    )
    assert done.failed() == ["scenarios (retry-529: outcome: expected ok)"]
    assert isinstance(done.sections["verify"], Section) and done.sections["verify"].status == "pass"


# ---------------------------------------------------------------- identity


def test_the_environment_names_the_sdks_and_replaykits_own_dependencies() -> None:
    env = identity.environment()
    packages = env["packages"]
    assert isinstance(packages, dict)
    assert {"anthropic", "openai", "replaykit"} <= set(packages)
    assert packages["anthropic"] == identity.installed_version("anthropic") is not None
    assert str(env["python"]).startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
    assert identity.installed_version("no-such-package-replaykit") is None


def test_a_manifest_keys_files_from_the_folders_parent_and_changes_with_a_byte(tmp_path: Path) -> None:
    root = tmp_path / "cassettes"
    (root / "a").mkdir(parents=True)
    (root / "a" / "one.yaml").write_text("x", encoding="utf-8")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "skip.pyc").write_bytes(b"")
    first = identity.manifest([root])
    assert list(first) == ["cassettes/a/one.yaml"]
    assert first["cassettes/a/one.yaml"] == identity.file_hash(root / "a" / "one.yaml")
    (root / "a" / "one.yaml").write_text("y", encoding="utf-8")
    assert identity.manifest([root]) != first


def test_a_command_target_is_hashed_by_the_files_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "harness.js").write_text("// v1", encoding="utf-8")
    target = Target.parse("node harness.js --fast")
    files = identity.command_files(target.argv)
    assert list(files) == ["harness.js"]
    (tmp_path / "harness.js").write_text("// v2", encoding="utf-8")
    assert identity.command_files(target.argv) != files


def test_a_python_module_is_hashed_by_its_file_or_folder() -> None:
    here = Path(__file__).resolve().parents[1]
    files = identity.command_files((), here=here, module="replaykit.reference")
    assert list(files) == ["replaykit/reference"]
    assert list(identity.command_files(["python", "-m", "replaykit.estimate"], here=here)) == [
        "replaykit/estimate.py"
    ]


@pytest.mark.parametrize("option", ["--scenarios", "--cassettes"])
def test_a_missing_input_exits_2_naming_it(
    tmp_path: Path, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["qualify", option, str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == EXIT_USAGE
    assert f"{tmp_path / 'nope'}: no such file or folder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_estimator_that_does_not_load_exits_2_before_any_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["qualify", "--estimator", "no_such_module_rk:f", "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == EXIT_USAGE and "no_such_module_rk" in captured.err
    assert captured.out == "" and not (tmp_path / "out").exists()
