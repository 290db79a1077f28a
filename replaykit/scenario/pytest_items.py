"""Scenarios as pytest items: which YAML files pytest collects as scenarios, one item per scenario (and per
declared kill), and how an item reports; each run is :func:`replaykit.scenario.runner.run_scenario`'s.

The plugin (:mod:`replaykit.pytest_plugin`) hands every YAML file pytest meets to :func:`collect_file`; a
scenario file is collected (a bad one is a collection error with ``file:line``, the JSON pointer and the fix),
an item fails with ``replaykit run``'s line, is skipped when ``n/a``, and with ``--replaykit-mutants`` gives
an item per declared kill. Python targets fork from a warm parent (:mod:`~replaykit.scenario.warm`). The rules
of collection are in docs/architecture/scenario.md and docs/guide/pytest-plugin.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from replaykit.errors import ReplaykitError

if TYPE_CHECKING:
    from replaykit.scenario.model import Scenario
    from replaykit.scenario.runner import Result
    from replaykit.scenario.target import Target
    from replaykit.scenario.warm import Parents

__all__ = ["ScenarioFailed", "ScenarioFile", "ScenarioItem", "Suite", "collect_file"]

_SCENARIO_KEYS = (re.compile(rb"^steps\s*:", re.MULTILINE), re.compile(rb"^expectations\s*:", re.MULTILINE))
_SNIFF = 8 << 20  # bytes read at most to recognise a scenario (model.MAX_FILE)


class ScenarioFailed(Exception):
    """An item's failure: its text is the report, shown as it is."""


@dataclass
class Suite:
    """One pytest process's scenario settings (``spec``: the target, "" for the reference), and what its
    items share: the target (parsed once), the warm parents and each scenario's result on the target."""

    spec: str
    here: Path
    named: frozenset[Path] = frozenset()
    folders: frozenset[Path] = frozenset()
    manifest: Path | None = None
    mutants: bool = False
    known: Callable[[], Collection[str]] = frozenset
    _target: Target | None = None
    _parents: Parents | None = None
    _on_target: dict[Path, Result] = field(default_factory=dict)

    def wants(self, path: Path) -> bool:
        """Whether ``path`` (a YAML file) is a scenario file (see the module's docstring)."""
        path = path.resolve()
        if path.parent in self.folders:
            from replaykit.scenario.capabilities import MANIFEST_NAMES

            return path.name not in MANIFEST_NAMES
        return (path in self.named or path.parent in self.named) and _looks_like_scenario(path)

    def target(self) -> Target:
        """The target, parsed and its manifest read when first asked for (a bad one: a usage error)."""
        if self._target is None:
            from replaykit.scenario.target import DEFAULT_TARGET, Target

            spec = self.spec or DEFAULT_TARGET
            target = Target.parse(spec, self.here, self.manifest, flag="--replaykit-target")
            _ = target.manifest
            self._target = target
        return self._target

    def kills(self, scenario: Scenario) -> list[str]:
        """The mutants of the target ``scenario`` declares it kills (none without ``--replaykit-mutants``);
        a ``kills:`` name neither a mutant nor a known defect class is a usage error."""
        if not self.mutants:
            return []
        from replaykit.scenario.mutants import check_kills

        declared = self.target().manifest.mutants
        check_kills([scenario], set(declared), self.known())
        return [name for name in scenario.kills if name in declared]

    def run(self, scenario: Scenario, mutant: str | None = None) -> Result:
        """``scenario`` on the target (as ``mutant``); on the target itself, run once per process."""
        from replaykit.scenario.runner import run_scenario
        from replaykit.scenario.warm import Parents

        if mutant is None and scenario.path in self._on_target:
            return self._on_target[scenario.path]
        if self._parents is None:
            self._parents = Parents()
        with pytest.MonkeyPatch.context() as patch:  # it changes with every item: the warm parent's
            patch.delenv("PYTEST_CURRENT_TEST", raising=False)  # environment would, and a new one start
            result = run_scenario(scenario, self.target(), mutant=mutant, parents=self._parents)
        if mutant is None:
            self._on_target[scenario.path] = result
        return result

    def close(self) -> None:
        """End the warm parents."""
        if self._parents is not None:
            self._parents.close()
            self._parents = None


def _looks_like_scenario(path: Path) -> bool:
    """True when the file's top level has ``steps:`` and ``expectations:`` (block style, as scenarios are
    written); a file that cannot be read is not one."""
    try:
        with path.open("rb") as file:
            head = file.read(_SNIFF)
    except OSError:
        return False
    return all(key.search(head) for key in _SCENARIO_KEYS)


def collect_file(path: Path, parent: pytest.Collector, suite: Suite) -> ScenarioFile | None:
    """The collector of ``path`` when it is a scenario file, else None (other plugins may take it)."""
    if path.suffix not in (".yaml", ".yml") or not suite.wants(path):
        return None
    collector: ScenarioFile = ScenarioFile.from_parent(parent, path=path, suite=suite)
    return collector


class ScenarioFile(pytest.File):
    """A scenario file: its scenario's item, and one per declared kill with ``--replaykit-mutants``."""

    def __init__(self, *, suite: Suite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite

    def collect(self) -> Iterator[ScenarioItem]:
        from replaykit.scenario.model import load

        try:
            scenario = load(self.path)
            kills = self.suite.kills(scenario)
        except ReplaykitError as exc:
            raise self.CollectError(str(exc)) from None
        for mutant in (None, *kills):
            name = scenario.name if mutant is None else f"{scenario.name}[{mutant}]"
            yield ScenarioItem.from_parent(self, name=name, scenario=scenario, mutant=mutant,
                                           suite=self.suite)


class ScenarioItem(pytest.Item):
    """One scenario on the target (``mutant`` None), or one declared kill: the scenario on a mutant."""

    def __init__(self, *, scenario: Scenario, mutant: str | None, suite: Suite, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario, self.mutant, self.suite = scenario, mutant, suite

    def runtest(self) -> None:
        """Run the scenario (and the mutant); skip it when n/a; fail it with the runner's report."""
        on_target = self.suite.run(self.scenario)
        if not on_target.applicable:
            # shown at the scenario file, as a skip marker's is (pytest's own flag for it)
            raise pytest.skip.Exception(f"n/a: {on_target.reason}", _use_item_location=True)
        problem = _failure(on_target) if self.mutant is None else self._survived(on_target)
        if problem:
            raise ScenarioFailed(problem)

    def _survived(self, on_target: Result) -> str:
        """The kill matrix's first sentence about this cell ("" when the mutant is killed)."""
        from replaykit.scenario.mutants import Matrix

        assert self.mutant is not None
        results: dict[tuple[str, str | None], Result] = {(self.scenario.name, None): on_target}
        if on_target.passed:  # a scenario failing on the target kills nothing: the mutant need not run
            results[(self.scenario.name, self.mutant)] = self.suite.run(self.scenario, self.mutant)
        matrix = Matrix((self.scenario,), (self.mutant,), results, full=False)
        return next((text for about, text in matrix.named_problems() if about == self.scenario.name), "")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The report alone for a scenario's failure or replaykit's error (no traceback); else pytest's."""
        if isinstance(excinfo.value, ScenarioFailed | ReplaykitError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.name}"


def _failure(result: Result) -> str:
    """What ``replaykit run -v`` prints for a failed scenario ("" when it passed)."""
    from replaykit.scenario import report

    return "\n".join([report.line(result), *report.details(result)]) if result.failed else ""
