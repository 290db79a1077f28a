#!/usr/bin/env python3
"""Mutation testing of one module at a time with mutmut; run through ``scripts/mutation`` (it makes the venv).

For each module named (default: every module in ``[tool.mutmut] only_mutate`` of pyproject.toml) the
repository is copied into a scratch folder, that table is narrowed to the module and its tests, and
``mutmut run`` runs there. Its tests are ``--tests`` or those that mirror it (``replaykit/x.py``:
``tests/test_x.py`` and ``tests/test_x_*.py``; ``replaykit/server/x.py``: ``tests/server/test_x.py``…).
The surviving mutants are printed as diffs, then a score line. The scratch folder (mutmut's ``mutants/`` and
its stats) is removed afterwards unless ``--keep`` is given (then ``mutmut browse`` works in it); nothing is
written to the repository.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("replaykit", "tests", "contracts", "cassettes", "scenarios", "pyproject.toml")
TABLE = "\n[tool.mutmut]\n"


@dataclass(frozen=True)
class Score:
    """One module's outcome: mutmut's counts, and the names of the mutants not killed, by status."""

    module: str
    counts: dict[str, int]
    left: dict[str, list[str]]

    @property
    def caught(self) -> int:
        """Mutants a test failed on, or that ran past mutmut's time limit (a loop that never ends)."""
        return self.counts["killed"] + self.counts["timeout"]

    def line(self) -> str:
        """``replaykit/sse.py: 252/277 killed (91.0%; 2 by timeout); 25 survived``."""
        total, timeout = self.counts["total"], self.counts["timeout"]
        percent = f"{100 * self.caught / total:.1f}%" if total else "-"
        how = f"{percent}; {timeout} by timeout" if timeout else percent
        left = [f"{self.counts[key]} {key.replace('_', ' ')}" for key in _LEFT if self.counts.get(key)]
        return f"{self.module}: {self.caught}/{total} killed ({how}); {', '.join(left) or 'none survived'}"


_LEFT = ("survived", "no_tests", "suspicious", "skipped", "segfault")


def settings() -> dict[str, object]:
    """The ``[tool.mutmut]`` table of the repository's pyproject.toml."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        table: dict[str, object] = tomllib.load(file)["tool"]["mutmut"]
    return table


def module_path(name: str) -> str:
    """``replaykit/sse.py`` for ``replaykit/sse.py``, ``replaykit.sse`` or ``sse``; exits on a wrong name."""
    dotted = name.removesuffix(".py").replace("/", ".")
    if not dotted.startswith("replaykit."):
        dotted = "replaykit." + dotted
    path = dotted.replace(".", "/") + ".py"
    if not (ROOT / path).is_file():
        sys.exit(f"mutation: {name!r} is not a module of replaykit (no {path})")
    return path


def mirrored_tests(module: str) -> list[str]:
    """The test files that mirror ``module`` (tests/README.md: tests mirror the package); for a module of a
    subpackage with no test folder of its own (``replaykit/redact/shapes.py``), the subpackage's tests
    (``tests/test_redact.py``, ``tests/test_redact_*.py``); a test file may name the package too
    (``tests/scenario/test_scenario_expect.py`` for ``replaykit/scenario/expect.py``)."""
    parts = Path(module).with_suffix("").parts[1:]  # replaykit/server/matching.py -> server, matching
    folder, stem = ROOT.joinpath("tests", *parts[:-1]), parts[-1]
    if len(parts) > 1 and not folder.is_dir():
        folder, stem = folder.parent, parts[-2]
    found = [folder / f"test_{stem}.py", *sorted(folder.glob(f"test_{stem}_*.py"))]
    if len(parts) > 1 and folder.name == parts[-2]:  # a test file that names its package too
        found.append(folder / f"test_{parts[-2]}_{stem}.py")
    tests = [str(path.relative_to(ROOT)) for path in found if path.is_file()]
    if not tests:
        looked = f"{folder.relative_to(ROOT)}/test_{stem}.py"
        sys.exit(f"mutation: no tests mirror {module} (looked for {looked}); name them with --tests")
    return tests


def narrowed(pyproject: str, table: dict[str, object]) -> str:
    """``pyproject`` with its ``[tool.mutmut]`` table replaced by ``table`` (strings and lists of strings:
    their JSON is valid TOML); checked by parsing the result back."""
    start = pyproject.index(TABLE)
    end = pyproject.find("\n[", start + len(TABLE))
    body = "".join(f"{key} = {json.dumps(value)}\n" for key, value in table.items())
    text = pyproject[:start] + TABLE + body + (pyproject[end:] if end != -1 else "")
    assert tomllib.loads(text)["tool"]["mutmut"] == table
    return text


def prepare(scratch: Path, module: str, tests: list[str]) -> None:
    """Copy the repository into ``scratch`` with mutmut narrowed to ``module`` and ``tests``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, scratch / name, ignore=ignore)
        else:
            shutil.copy2(source, scratch / name)
    table = {**settings(), "only_mutate": [module], "pytest_add_cli_args_test_selection": tests}
    pyproject = scratch / "pyproject.toml"
    pyproject.write_text(narrowed(pyproject.read_text(encoding="utf-8"), table), encoding="utf-8")


def mutmut(scratch: Path, *args: str) -> str:
    """Run ``mutmut ARGS`` in ``scratch``; its output, or exit with the end of it when mutmut fails."""
    done = subprocess.run(["mutmut", *args], cwd=scratch, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"mutation: mutmut {' '.join(args)} failed ({done.returncode}):\n"
                 f"{(done.stdout + done.stderr)[-3000:]}")
    return done.stdout


def score(scratch: Path, module: str) -> Score:
    """Read mutmut's counts and the mutants it did not kill."""
    mutmut(scratch, "export-cicd-stats")
    counts = json.loads((scratch / "mutants" / "mutmut-cicd-stats.json").read_text(encoding="utf-8"))
    left: dict[str, list[str]] = {}
    for line in mutmut(scratch, "results").splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            left.setdefault(status, []).append(name)
    return Score(module, counts, left)


def show(scratch: Path, names: list[str]) -> None:
    """Print each mutant as its diff."""
    for name in names:
        print(mutmut(scratch, "show", name).rstrip(), end="\n\n")


def run(module: str, tests: list[str], jobs: int, keep: bool) -> Score:
    """Mutation-test ``module`` with ``tests``; print the survivors and the score line."""
    scratch = Path(tempfile.mkdtemp(prefix="replaykit-mutation-"))
    try:
        prepare(scratch, module, tests)
        print(f"== {module} against {' '.join(tests)}", file=sys.stderr, flush=True)
        mutmut(scratch, "run", "--max-children", str(jobs))
        result = score(scratch, module)
        show(scratch, result.left.get("survived", []))
        for status in sorted(set(result.left) - {"survived"}):
            print(f"{status}: {' '.join(result.left[status])}")
        print(result.line(), flush=True)
        return result
    finally:
        if keep:
            print(f"kept {scratch} (mutmut browse / mutmut show NAME work there)", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="scripts/mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", metavar="MODULE",
                        help="replaykit/sse.py, replaykit.sse or sse (default: [tool.mutmut] only_mutate)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="mutants run at once (default: 2)")
    parser.add_argument("--tests", nargs="+", metavar="TEST", help="tests to run (default: mirrored)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder and print where it is")
    args = parser.parse_args(argv)
    configured = settings().get("only_mutate", [])
    names = args.modules or (configured if isinstance(configured, list) else [])
    modules = [module_path(str(name)) for name in names]
    scores = [run(module, args.tests or mirrored_tests(module), args.jobs, args.keep) for module in modules]
    if len(scores) > 1:
        print("\n" + "\n".join(result.line() for result in scores))


if __name__ == "__main__":
    main()
