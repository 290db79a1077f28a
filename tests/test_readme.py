"""The examples of the README and of the docs (``docs/**/*.md``) run as written, each on its own.

Markers: an HTML comment on the line just before a fence (hidden where the page is rendered),
``<!-- readme: WORD ... -->``, with these words:

- ``wheel``: run by the wheel of the checkout installed in a fresh venv (the ``wheel_venv`` fixture,
  ``tests/wheel_support.py``), with the dependencies but not the checkout on its path; without it, by the
  checkout (``PYTHONPATH`` the repository root). Either way from a temp folder, never the repository root.
- ``pytest``: the ```python block is a test file: saved as ``test_readme_example.py`` and run by ``pytest``
  (``-W error``), which must collect it and pass. A block that defines a ``test_…`` function must say so.
- ``target``: the ```js block is a target of the scenario runner (run by ``tests/test_js_target.py``).
- ``curl``: each ``curl `` line of the ```bash block runs with ``REPLAYKIT_URL`` the origin of a fake provider
  serving ``anthropic/web_search_stream.yaml``; it must exit 0 with the whole stream (``message_stop``) and be
  journaled as served.

What runs, each in a fresh interpreter (a subprocess: no block sees another's names):

- every ```python block, as a script (or a test file); none may have a ``...`` statement for a body;
- in a ```bash block, each line that starts with ``replaykit `` (the other lines, ``./scripts/…``, bootstrap a
  venv or run for minutes: not run). The temp folder stands for a user's project holding what the tour names:
  ``my_cassettes/`` (a copy of the bundled Anthropic cassettes) and ``my_estimator.js``
  (``tests/fixtures/estimator.js``). A command must exit 0; ``serve`` (it runs until stopped) must print its
  URLs (the line needs ``--json``), answer every request recorded in the cassettes it names, and exit 0 on
  SIGINT; ``record`` (it runs until stopped too) forwards to a fake provider standing in for its
  ``--upstream`` (nothing leaves the machine), must pass the bundled Anthropic stream's request through,
  exit 0 on SIGINT and have written its ``--cassette``, ``origin: recorded``;
- the unmarked ```js block (the admin API, ``docs/guide/fake-provider.md``) is run by
  ``tests/server/test_node_sdks.py``, the ``target`` one (``docs/target-protocol.md``) by
  ``tests/test_js_target.py``, not here.

A script is padded with blank lines so that a traceback's line numbers are its page's; a test's id and a
failure name the page and the line (``docs/jobs/record.md:41``).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from wheel_support import ROOT, Installed, outside_env

from replaykit import cassette
from replaykit.resources import find_cassette
from replaykit.server import FakeProvider

README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?:<!-- readme: (?P<marks>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)^```$",
                   flags=re.MULTILINE | re.DOTALL)
MARKS = {"wheel", "pytest", "target", "curl"}
TIMEOUT = 300  # seconds: a bound on a hang, not a speed check (the property suite takes a few seconds)


@dataclass(frozen=True)
class Block:
    """A fenced block of a page: its language, its marker words, its code, the page (relative to the
    repository) and the line the code starts."""

    lang: str
    marks: frozenset[str]
    code: str
    line: int
    page: str = "README.md"

    def at(self, number: int = 0) -> str:
        """Where line ``number`` of the block is: ``page:line``."""
        return f"{self.page}:{self.line + number}"


def blocks(text: str, page: str = "README.md") -> list[Block]:
    return [Block(match["lang"], frozenset((match["marks"] or "").split()), match["code"],
                  text.count("\n", 0, match.start("code")) + 1, page) for match in FENCE.finditer(text)]


def page_blocks(path: Path) -> list[Block]:
    return blocks(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())


BLOCKS = [block for path in PAGES for block in page_blocks(path)]
PYTHON = [block for block in BLOCKS if block.lang == "python"]
COMMANDS = [pytest.param(block, block.at(number), argv, id=f"{block.at(number)}-{argv[1]}")
            for block in BLOCKS if block.lang == "bash"
            for number, line in enumerate(block.code.splitlines()) if line.startswith("replaykit ")
            for argv in [shlex.split(line, comments=True)]]


@dataclass(frozen=True)
class Runner:
    """How a block runs: the interpreter, the ``replaykit`` command, the environment."""

    python: str
    replaykit: list[str]
    env: dict[str, str]


def runner(block: Block, request: pytest.FixtureRequest) -> Runner:
    if "wheel" in block.marks:
        installed: Installed = request.getfixturevalue("wheel_venv")
        return Runner(str(installed.python), [str(installed.command)], outside_env())
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    return Runner(sys.executable, [sys.executable, "-m", "replaykit"], env | {"PYTHONPATH": str(ROOT)})


def ran(command: list[str], cwd: Path, env: dict[str, str], where: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)
    assert done.returncode == 0, (f"{where}: {shlex.join(command)} exited {done.returncode}:\n"
                                  f"{done.stdout}\n{done.stderr}")
    return done


def defines_tests(code: str) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
               for node in ast.parse(code).body)


def ellipses(code: str) -> list[int]:
    """The lines of ``...`` statements (a body left out)."""
    return [node.lineno for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and node.value.value is ...]


# ---------------------------------------------------------------- the README's shape


def test_the_readme_opens_with_the_two_commands() -> None:
    head = TEXT.split("\n## ", 1)[0]
    assert "./scripts/demo" in head and "./scripts/test" in head


def test_the_readme_is_a_front_page() -> None:
    """What it is, install, the two commands and a tour, with links into the docs: not the docs themselves."""
    assert TEXT.count("\n") <= 250, f"README.md has {TEXT.count(chr(10))} lines: move the detail into docs/"
    readme = [block for block in BLOCKS if block.page == "README.md"]
    assert sum(block.lang == "python" for block in readme) >= 2
    assert sum(1 for param in COMMANDS if param.values[1].startswith("README.md:")) >= 5
    linked = set(re.findall(r"\]\((docs/[^)#]+)", TEXT))
    assert linked and all((ROOT / path).is_file() for path in linked), sorted(linked)


def test_the_docs_have_examples() -> None:
    assert len(PYTHON) >= 5 and len(COMMANDS) >= 5
    assert any("pytest" in block.marks for block in PYTHON)
    assert {block.page for block in BLOCKS} > {"README.md"}


FENCES = {"python", "bash", "js", "yaml", "mermaid", "text"}  # text: a drawing, never run


@pytest.mark.parametrize("path", PAGES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_marker_is_known_and_marks_a_block(path: Path) -> None:
    page = page_blocks(path)
    marked = sum(1 for block in page if block.marks)
    assert path.read_text(encoding="utf-8").count("<!-- readme:") == marked, (
        f"{path.relative_to(ROOT)}: a <!-- readme: ... --> marker not just before a fence")
    for block in page:
        where = block.at()
        assert block.marks <= MARKS, f"{where}: unknown marker words {sorted(block.marks - MARKS)}"
        assert block.lang in FENCES, f"{where}: a ```{block.lang} block"
        assert "pytest" not in block.marks or block.lang == "python", f"{where}: pytest marks a python block"
        assert "target" not in block.marks or block.lang == "js", f"{where}: target marks a js block"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "yaml"], ids=Block.at)
def test_a_yaml_example_is_a_bundled_scenario_as_it_is(block: Block) -> None:
    """A ```yaml block shows a scenario of scenarios/ whole (not run here: the bundled scenarios are)."""
    name = re.search(r"^name: (\S+)$", block.code, re.MULTILINE)
    assert name, f"{block.at()}: a ```yaml block that is not a scenario"
    assert (ROOT / "scenarios" / f"{name[1]}.yaml").read_text(encoding="utf-8") == block.code


@pytest.mark.parametrize("block", PYTHON, ids=Block.at)
def test_a_python_example_is_complete(block: Block) -> None:
    lines = [block.line + number - 1 for number in ellipses(block.code)]
    assert not lines, f"{block.page} lines {lines}: `...` where the example's code belongs"
    assert defines_tests(block.code) == ("pytest" in block.marks), (
        f"{block.at()}: a block defining test_ functions is marked <!-- readme: pytest -->, "
        "and only such a block")


# ---------------------------------------------------------------- the examples run


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON, ids=Block.at)
def test_a_python_example_runs_alone(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    run = runner(block, request)
    name = "test_readme_example.py" if "pytest" in block.marks else "readme_example.py"
    (tmp_path / name).write_text("\n" * (block.line - 1) + block.code, encoding="utf-8")
    if "pytest" in block.marks:
        done = ran([run.python, "-m", "pytest", "-p", "no:cacheprovider", "-W", "error", "-q", name],
                   tmp_path, run.env, block.at())
        assert re.search(r"\b\d+ passed", done.stdout) and "skipped" not in done.stdout, done.stdout
    else:
        ran([run.python, name], tmp_path, run.env, block.at())


def project(folder: Path) -> Path:
    """A user's project as the tour names its files: ``my_cassettes/`` and ``my_estimator.js``."""
    shutil.copytree(ROOT / "cassettes" / "anthropic", folder / "my_cassettes")
    shutil.copy(ROOT / "tests" / "fixtures" / "estimator.js", folder / "my_estimator.js")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(("block", "where", "argv"), COMMANDS)
def test_a_command_runs(block: Block, where: str, argv: list[str], request: pytest.FixtureRequest,
                        tmp_path: Path) -> None:
    if any(word.startswith("node ") for word in argv) and shutil.which("node") is None:
        pytest.skip("node is not installed")
    run, folder = runner(block, request), project(tmp_path)
    if argv[1] == "serve":
        serves(run.replaykit + argv[1:], folder, run.env, where)
    elif argv[1] == "record":
        records(run.replaykit + argv[1:], folder, run.env, where)
    else:
        ran(run.replaykit + argv[1:], folder, run.env, where)


CURLS = [pytest.param(block.at(number), line, id=f"{block.at(number)}-curl")
         for block in BLOCKS if "curl" in block.marks
         for number, line in enumerate(block.code.splitlines()) if line.startswith("curl ")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest.mark.parametrize(("where", "command"), CURLS)
def test_a_curl_example_streams_from_the_fake_provider(where: str, command: str, tmp_path: Path) -> None:
    with FakeProvider(["anthropic/web_search_stream.yaml"]) as fake:
        env = os.environ | {"REPLAYKIT_URL": fake.base_url("anthropic")}
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT, check=False)
        assert done.returncode == 0, f"{where}: exited {done.returncode}: {done.stderr}"
        assert done.stdout.startswith("event: message_start") and "event: message_stop" in done.stdout
        assert [entry.verdict for entry in fake.journal] == ["served"]


def test_the_docs_have_a_curl_example() -> None:
    assert CURLS, "neither the README nor the docs show a curl line under a `readme: curl` marker"


def serves(command: list[str], folder: Path, env: dict[str, str], where: str) -> None:
    """``serve`` prints its URLs, answers each request its cassettes recorded, and exits 0 on SIGINT."""
    assert "--json" in command, f"{where}: the test reads the URLs `serve --json` prints"
    with subprocess.Popen(command, cwd=folder, env=env | {"PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            origin = json.loads(proc.stdout.readline())["anthropic"]
            for interaction in recorded(command, folder):
                sent = interaction.request
                reply = httpx.request(sent.method, origin + urlsplit(sent.uri).path, content=sent.body,
                                      headers={"content-type": "application/json"}, timeout=TIMEOUT)
                assert reply.status_code == interaction.response.status, reply.text
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, f"{where}: {shlex.join(command)} exited {proc.returncode}:\n{err}"


def records(command: list[str], folder: Path, env: dict[str, str], where: str) -> None:
    """``record`` forwards to a fake provider in place of its ``--upstream``, passes a stream through, exits 0
    on SIGINT and has written its cassette, recorded."""
    assert "--json" in command and "--upstream" in command, f"{where}: the test needs --json and --upstream"
    item = cassette.load(find_cassette("anthropic/web_search_stream.yaml")).interactions[0]
    at = command.index("--upstream") + 1
    with FakeProvider(["anthropic/web_search_stream.yaml"]) as upstream, subprocess.Popen(
            [*command[:at], upstream.url, *command[at + 1:]], cwd=folder, env=env | {"PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            origin = json.loads(proc.stdout.readline())["anthropic"]
            reply = httpx.post(f"{origin}/v1/messages", content=item.request.body, timeout=TIMEOUT,
                               headers={"content-type": "application/json"})
            assert reply.content == item.response.body, reply.text
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, f"{where}: {shlex.join(command)} exited {proc.returncode}:\n{err}"
    written = cassette.load(folder / command[command.index("--cassette") + 1])
    assert written.meta.origin == "recorded" and len(written.interactions) == 1


def recorded(command: list[str], folder: Path) -> list[cassette.Interaction]:
    """The interactions of the cassettes a ``serve`` command names (its arguments not starting with -)."""
    names = [arg for arg in command[command.index("serve") + 1:] if not arg.startswith("-")]
    paths = cassette.iter_paths([find_cassette(name, folder) for name in names])
    return [interaction for path in paths for interaction in cassette.load(path).interactions]
