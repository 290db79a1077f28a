"""The examples under ``examples/``: the GitHub Actions workflow is valid YAML, runs ``replaykit qualify``
with options the command accepts, and uploads report.md whatever the verdict."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from replaykit.cli import build_parser
from replaykit.cli.qualify import run as qualify_run

WORKFLOW = Path(__file__).resolve().parents[1] / "examples" / "github-actions" / "qualify.yml"


def _workflow() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _steps() -> list[dict[str, Any]]:
    jobs = _workflow()["jobs"]
    assert list(jobs) == ["qualify"]
    steps: list[dict[str, Any]] = jobs["qualify"]["steps"]
    return steps


def test_the_workflow_runs_on_pull_requests_and_on_main() -> None:
    triggers = _workflow()[True]  # PyYAML (YAML 1.1) reads the key `on` as true
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    assert _workflow()["jobs"]["qualify"]["timeout-minutes"] <= 20


def test_the_workflow_runs_replaykit_qualify_with_options_it_accepts() -> None:
    runs = [step for step in _steps() if "replaykit qualify" in step.get("run", "")]
    assert len(runs) == 1
    line = next(line for line in runs[0]["run"].splitlines() if line.strip().startswith("replaykit qualify"))
    words = [word for word in shlex.split(line) if word != "$@"]
    args = build_parser().parse_args(words[1:])
    assert args.func is qualify_run and str(args.out) == "qualify-report" and args.jobs == 2
    with_baseline = build_parser().parse_args([*words[1:], "--baseline-report", "baseline/report.json"])
    assert str(with_baseline.baseline_report) == "baseline/report.json"
    assert "--baseline-report baseline/report.json" in runs[0]["run"]


def test_the_workflow_uploads_report_md_whatever_the_verdict() -> None:
    steps = _steps()
    upload = next(step for step in steps if str(step.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    assert "qualify-report/report.md" in upload["with"]["path"].split()
    qualify = next(index for index, step in enumerate(steps) if "replaykit qualify" in step.get("run", ""))
    assert steps.index(upload) > qualify


def test_the_baseline_is_restored_for_pull_requests_and_saved_from_main() -> None:
    steps = _steps()
    restore = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache/restore@"))
    save = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache/save@"))
    assert restore["with"]["path"] == save["with"]["path"] == "baseline"
    assert save["with"]["key"].startswith(restore["with"]["restore-keys"])
    assert "pull_request" in restore["if"] and "refs/heads/main" in save["if"]


SHARDED = WORKFLOW.with_name("qualify-sharded.yml")


def _command(steps: list[dict[str, Any]], command: str, shard: int = 0) -> tuple[dict[str, Any], list[str]]:
    """The step that runs ``replaykit COMMAND`` and that line's words (``$@`` left out; the matrix's shard
    number put in)."""
    step = next(step for step in steps if f"replaykit {command}" in step.get("run", ""))
    line = next(line for line in step["run"].splitlines() if line.strip().startswith(f"replaykit {command}"))
    line = line.replace("${{ matrix.shard }}", str(shard))
    return step, [word for word in shlex.split(line) if word != "$@"]


def test_the_sharded_workflow_runs_each_shard_with_options_qualify_accepts() -> None:
    from replaykit.scenario.shard import Shard

    doc = yaml.safe_load(SHARDED.read_text(encoding="utf-8"))
    assert list(doc["jobs"]) == ["shard", "merge"] and doc["env"] == _workflow()["env"]
    job = doc["jobs"]["shard"]
    shards = job["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1)) and job["strategy"]["fail-fast"] is False
    for k in shards:
        args = build_parser().parse_args(_command(job["steps"], "qualify", k)[1][1:])
        assert args.func is qualify_run and args.shard == Shard(k, len(shards)) and str(args.out) == "shard"
        assert str(args.durations) == ".replaykit-durations.json"
    upload = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "shard/report.json"


def test_the_merge_job_joins_every_shard_whatever_their_verdicts() -> None:
    from replaykit.cli.merge import run as merge_run

    doc = yaml.safe_load(SHARDED.read_text(encoding="utf-8"))
    job = doc["jobs"]["merge"]
    assert job["needs"] == "shard" and job["if"] == "always()"
    download = next(s for s in job["steps"]
                    if str(s.get("uses", "")).startswith("actions/download-artifact@"))
    assert download["with"] == {"pattern": "qualify-shard-*", "path": "shards"}
    step, words = _command(job["steps"], "merge")
    args = build_parser().parse_args(words[1:])
    assert args.func is merge_run and [str(path) for path in args.reports] == ["shards/*/report.json"]
    assert str(args.out) == "qualify-report" and str(args.durations) == ".replaykit-durations.json"
    assert "--baseline-report baseline/report.json" in step["run"]
    saved = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/cache/save@")]
    assert {s["with"]["path"] for s in saved} == {"baseline", ".replaykit-durations.json"}
