"""Qualification: one run that says whether a target (and an estimator) qualify on this environment, and
leaves the evidence: ``report.json`` (``contracts/replaykit/qualification-report.schema.json``) and
``report.md``. ``replaykit qualify`` calls :func:`qualify` then :func:`write`.

It runs, in order, the environment's identity (:mod:`~replaykit.qualify.identity`), verify and the contracts,
drift, the scenarios, the mutants' kill matrix and the property suite, each a section
(:mod:`~replaykit.qualify.stages`); with a baseline report, what changed since it
(:mod:`~replaykit.qualify.baseline`). The order and the defaults are in docs/architecture/qualify.md.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from replaykit import __version__, contracts, properties
from replaykit.cassette import named_paths, write_atomic
from replaykit.errors import UsageError, located
from replaykit.findings import Finding
from replaykit.jsondoc import JSON
from replaykit.qualify import baseline, identity, markdown, stages
from replaykit.qualify.stages import Section
from replaykit.resources import data_dir
from replaykit.scenario.model import Scenario
from replaykit.scenario.mutants import Matrix
from replaykit.scenario.runner import Result
from replaykit.scenario.shard import DEFAULT_DURATIONS, Shard, read_durations, write_durations
from replaykit.scenario.target import DEFAULT_TARGET, Target

__all__ = [
    "DEFAULT_ESTIMATOR",
    "SECTIONS",
    "Observer",
    "Options",
    "Qualification",
    "qualify",
    "write",
]

DEFAULT_ESTIMATOR = "replaykit.estimate:estimate_tokens"
SECTIONS = ("verify", "contracts", "drift", "scenarios", "mutants", "properties", "redgreen")
_BROKEN = "the contracts are broken (see contracts), and this check reads them"
_REDGREEN = (
    "it needs a baseline target and a candidate target (replaykit redgreen); qualify checks one "
    "target, and compares with an earlier report through --baseline-report"
)


class Observer(Protocol):
    """What a qualification says while it runs (the command line shows it)."""

    def note(self, text: str) -> None:
        """A line of information (what is being qualified)."""

    def start(self, stage: str) -> None:
        """A stage begins."""

    def tick(self, done: int, total: int, what: str) -> None:
        """``done`` of the stage's ``total`` items are done, ``what`` last."""

    def finish(self, stage: str, section: Section) -> None:
        """A section is decided."""


class _Silent:
    def note(self, text: str) -> None:
        """Nothing to say."""

    def start(self, stage: str) -> None:
        """Nothing to say."""

    def tick(self, done: int, total: int, what: str) -> None:
        """Nothing to say."""

    def finish(self, stage: str, section: Section) -> None:
        """Nothing to say."""


@dataclass(frozen=True)
class Options:
    """What to qualify. Empty ``cassettes`` / ``scenarios``: the bundled ones; ``mutants`` None: those the
    target's manifest declares (the reference's 41 for the reference), empty: the kill matrix is skipped.
    ``manifest``: the target's manifest (default: the one beside it, if any). ``shard``: run only that part of
    the scenarios (balanced on ``durations``, :mod:`replaykit.scenario.shard`), and the checks that are not
    per scenario only in shard 1; without it, ``durations`` is where the scenarios' seconds are recorded."""

    target: str = DEFAULT_TARGET
    manifest: Path | None = None
    estimator: str | None = DEFAULT_ESTIMATOR
    estimator_cmd: str | None = None
    cassettes: tuple[Path, ...] = ()
    scenarios: tuple[Path, ...] = ()
    mutants: tuple[str, ...] | None = None
    jobs: int = 1
    max_examples: int = 100
    seed: int = 0
    baseline_report: Path | None = None
    full_matrix: bool = False
    shard: Shard | None = None
    durations: Path | None = None


@dataclass
class Qualification:
    """The report document (report.json's) and the sections it was built from."""

    document: JSON
    sections: dict[str, Section] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when no section failed."""
        return bool(self.document["verdict"] == "pass")

    def failed(self) -> list[str]:
        """The sections that failed, each with what failed first: ``scenarios (no-retry-400: ...)``."""
        found = []
        for name, section in self.sections.items():
            if section.status == "fail":
                first = section.failures[0]
                found.append(f"{name} ({first.file or first.code}: {first.message})")
        return found


def _subject(spec: str, argv: Sequence[str], module: str | None, search: Sequence[str]) -> JSON:
    return {
        "label": spec,
        "command": list(argv) or [spec],
        "revision": identity.revision(),
        "files": identity.command_files(argv, module=module, search=search),
    }


def _target_subject(target: Target) -> JSON:
    if target.spec.startswith("python:"):
        module = target.spec.split(":")[1]
        search = dict(target.env).get("PYTHONPATH", "").split(os.pathsep)
        return {**_subject(target.spec, (), module, search), "command": list(target.argv)}
    return _subject(target.spec, target.argv, None, ())


def _estimator_subject(options: Options) -> JSON:
    if options.estimator is not None:
        module = options.estimator.partition(":")[0]
        return {**_subject(options.estimator, (), module, ()), "command": [options.estimator]}
    command = options.estimator_cmd or ""
    return _subject(command, shlex.split(command), None, ())


def _identity_line(subject: JSON, hashes: JSON) -> str:
    env = identity.environment()
    packages: JSON = env["packages"]  # type: ignore[assignment]
    sdks = ", ".join(f"{sdk} {packages.get(sdk) or 'not installed'}" for sdk in identity.SDKS)
    files = ", ".join(f"{len(found)} {group}" for group, found in hashes.items())
    target = subject["candidate"]
    return (
        f"identity: Python {env['python']}, replaykit {__version__}, {sdks}; target {target['label']} "
        f"({len(target['files'])} files hashed); inputs hashed: {files}"
    )


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Run:
    options: Options
    progress: Observer
    estimator: tuple[str, properties.Estimator]
    every: list[Scenario] = field(default_factory=list)
    sections: dict[str, Section] = field(default_factory=dict)
    results: list[Result] | None = None  # None: the scenarios did not run (they did not load)
    matrix: Matrix | None = None

    def stage(self, name: str, section: Section) -> None:
        self.sections[name] = section
        self.progress.finish(name, section)

    def elsewhere(self) -> str:
        """Why a check that is not per scenario does not run here ("": it does)."""
        shard = self.options.shard
        return "" if shard is None or shard.index == 1 else f"shard {shard}: shard 1/{shard.count} runs it"

    def checks(
        self,
        target: Target,
        roots: tuple[list[Path], list[Path]],
        loaded: tuple[list[Scenario], Finding | None],
        schemas: tuple[int, list[Finding]],
    ) -> None:
        if self.elsewhere():
            for name in ("verify", "contracts", "drift", "properties"):
                self.stage(name, stages.skipped(self.elsewhere()))
            if not schemas[1]:
                self.scenario_stages(target, *loaded)
            else:
                for name in ("scenarios", "mutants"):
                    self.stage(name, stages.skipped(_BROKEN))
            self.stage("redgreen", stages.skipped(_REDGREEN))
            return
        cassette_roots, scenario_roots = roots
        scenarios, bad = loaded
        self.progress.start("verify")
        paths = [*named_paths(cassette_roots)]
        seen = {path.resolve() for path in paths}
        paths += [path for path in stages.cassettes_of(self.every) if path.resolve() not in seen]
        every = [*cassette_roots, *scenario_roots]
        verify, contract = stages.verify_sections(
            paths, lambda path: identity.key(Path(path), every), schemas
        )
        self.stage("verify", verify)
        self.stage("contracts", contract)
        if schemas[1]:
            for name in ("drift", "scenarios", "mutants", "properties"):
                self.stage(name, stages.skipped(_BROKEN))
        else:
            self.progress.start("drift")
            self.stage("drift", stages.drift_section())
            self.scenario_stages(target, scenarios, bad)
            self.property_stage()
        self.stage("redgreen", stages.skipped(_REDGREEN))

    def property_stage(self) -> None:
        self.progress.start("properties")
        options, (name, estimator) = self.options, self.estimator
        section = stages.properties_section(
            estimator, name, options.max_examples, options.seed, self.progress.tick
        )
        self.stage("properties", section)

    def scenario_stages(self, target: Target, scenarios: list[Scenario], bad: Finding | None) -> None:
        if bad is not None:
            self.stage("scenarios", stages.failed_section([bad], "a scenario file is broken"))
            self.stage("mutants", stages.skipped("the scenarios did not load"))
            return
        self.progress.start("scenarios")
        section, results = stages.scenarios_section(scenarios, target, self.options.jobs, self.progress.tick,
                                                    whole=self.options.shard is None)
        self.stage("scenarios", section)
        self.results = results
        mutants = _mutants_of(self.options, target)
        if not mutants:
            self.stage(
                "mutants",
                stages.skipped(
                    f"no mutants for the target {target.spec}: declare them in its manifest (mutants:) or "
                    "name them with --mutant NAME"
                ),
            )
            return
        self.progress.start("mutants")
        section, self.matrix = stages.mutants_section(
            scenarios, target, mutants, results, self.options.jobs, self.progress.tick,
            full=self.options.full_matrix, universe=self.every if self.options.shard else None,
        )
        self.stage("mutants", section)

    def seconds(self) -> dict[str, float]:
        """Each scenario's seconds: on the target and on each mutant."""
        ran = [*(self.results or []),
               *(r for (_, m), r in (self.matrix.results if self.matrix else {}).items() if m)]
        seconds: dict[str, float] = {}
        for result in ran:
            seconds[result.scenario.name] = seconds.get(result.scenario.name, 0.0) + result.seconds
        return seconds

    def shard_results(self) -> JSON:
        """What ``replaykit merge`` joins: the scenarios' results and the kill matrix of this shard (nothing
        when the scenarios did not run: then the merge keeps shard 1's sections, which say why)."""
        if self.results is None:
            return {}
        matrix = None if self.matrix is None else self.matrix.to_json()
        scenarios = [result.to_json() for result in self.results]
        return {"shardResults": {"scenarios": scenarios, "matrix": matrix}}


def _mutants_of(options: Options, target: Target) -> tuple[str, ...]:
    """The mutants named, else those the target's manifest declares."""
    return options.mutants if options.mutants is not None else tuple(target.manifest.mutants)


def _sharded(options: Options, target: Target, loaded: tuple[list[Scenario], Finding | None],
             hashes: JSON) -> tuple[tuple[list[Scenario], Finding | None], JSON | None]:
    """The scenarios of ``options.shard`` (all without one) and the report's ``shard`` block."""
    if options.shard is None:
        return loaded, None
    durations = read_durations(options.durations or DEFAULT_DURATIONS, "qualify")
    more = {"mutants": list(_mutants_of(options, target)), "full": options.full_matrix, "hashes": hashes,
            "estimator": [options.estimator, options.estimator_cmd, options.max_examples, options.seed]}
    mine, block = options.shard.pick("qualify", loaded[0], target, durations, more)
    return (mine, loaded[1]), block


def _existing(paths: list[Path], what: str) -> list[Path]:
    """``paths``, each checked to exist (a usage error naming the first that does not)."""
    for path in paths:
        if not path.exists():
            raise UsageError(located(path, None, "no such file or folder", f"name a {what} file or folder"))
    return paths


def qualify(options: Options, progress: Observer | None = None) -> Qualification:
    """Run every check (see the module docstring) and build the report; a bad option, path, estimator or
    baseline report is a :class:`~replaykit.errors.UsageError` before any check runs."""
    progress = progress or _Silent()
    target = Target.parse(options.target, manifest=options.manifest)
    before = baseline.load_report(options.baseline_report) if options.baseline_report is not None else None
    cassette_roots = _existing(list(options.cassettes), "cassette") or [data_dir("cassettes")]
    scenario_roots = _existing(list(options.scenarios), "scenario") or [data_dir("scenarios")]
    with properties.open_estimator(options.estimator, options.estimator_cmd) as estimator:
        progress.start("identity")
        schemas = stages.contract_schemas()
        loaded = stages.load_scenarios(scenario_roots) if not schemas[1] else ([], None)
        hashes = {
            "cassettes": identity.manifest(cassette_roots),
            "contracts": identity.manifest([contracts.default().root]),
            "scenarios": identity.manifest(scenario_roots, stages.inputs_of(loaded[0])),
        }
        subject = {
            "baseline": before["subject"]["candidate"] if before else None,
            "candidate": _target_subject(target),
            "estimator": _estimator_subject(options),
        }
        progress.note(_identity_line(subject, hashes))
        mine, shard = _sharded(options, target, loaded, hashes)
        run = _Run(options, progress, estimator, loaded[0])
        run.checks(target, (cassette_roots, scenario_roots), mine, schemas)
    sections = {name: run.sections[name] for name in SECTIONS}
    failed = any(section.status == "fail" for section in sections.values())
    doc: JSON = {
        "version": 1,
        "verdict": "fail" if failed else "pass",
        "generatedAt": _now(),
        "replaykitVersion": __version__,
        "subject": subject,
        "environment": identity.environment(),
        "dependencies": [],
        "hashes": hashes,
        "sections": {name: section.to_json() for name, section in sections.items()},
        "changes": None,
    }
    if shard is not None:
        doc.update(shard=shard, **run.shard_results())
    elif options.durations is not None:
        write_durations(options.durations, "qualify", run.seconds())
    if before is not None and options.baseline_report is not None:
        doc["dependencies"], doc["changes"] = baseline.compare(before, doc, str(options.baseline_report))
    if not schemas[1]:  # broken contracts cannot check the report (the contracts section says why)
        _check(doc)
    return Qualification(doc, sections)


def _check(doc: JSON) -> None:
    """The report is valid by its contract (a replaykit bug otherwise: an internal error, not a report)."""
    found = [v for v in contracts.validate("replaykit.qualification-report", doc) if v.severity == "error"]
    if found:
        raise AssertionError(
            f"the qualification report breaks its contract at {found[0].pointer}: {found[0].message}"
        )


def write(done: Qualification, out: Path) -> tuple[Path, Path]:
    """Write ``out/report.md`` and ``out/report.json`` (each atomically; ``out`` made when missing) and
    append report.md to ``$GITHUB_STEP_SUMMARY`` when it is set; returns the two paths."""
    out.mkdir(parents=True, exist_ok=True)
    text = markdown.render(done.document)
    md, js = out / "report.md", out / "report.json"
    write_atomic(js, (json.dumps(done.document, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    write_atomic(md, text.encode("utf-8"))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return md, js
