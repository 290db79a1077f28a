"""replaykit's pytest plugin (entry point ``pytest11``): cheap to import, does nothing unless asked.

A test asks with the ``replaykit`` fixture or the ``replaykit`` marker (:data:`MARKER_KEYS`): cassettes and
faults loaded into a session :class:`~replaykit.server.FakeProvider` reset for each test, the network guard
(:mod:`replaykit.netguard`) on while it runs, and one traffic report (:mod:`replaykit.traffic`) failing it
when requests went unmatched or broke a contract. Fixtures, options, recording through a
:class:`~replaykit.record.RecordingProxy` and scenario items (:mod:`replaykit.scenario.pytest_items`) are
in docs/guide/pytest-plugin.md and docs/architecture/modules.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from replaykit import cassette as cassette_mod
from replaykit.cassette import Cassette
from replaykit.errors import ReplaykitError, UsageError
from replaykit.jsondoc import JSON
from replaykit.netguard import NetworkGuard
from replaykit.resources import find_cassette
from replaykit.routes import API_ORIGINS
from replaykit.traffic import NETWORK_HINT, RECORD_HINT, differences, format_report

if TYPE_CHECKING:
    from replaykit.record import RecordingProxy
    from replaykit.scenario.pytest_items import Suite
    from replaykit.server import Entry, FakeProvider, Fault

__all__ = [
    "MARKER_KEYS",
    "ReplayHandle",
    "ReplaykitOptions",
    "default_cassette",
    "replaykit",
    "replaykit_config",
    "replaykit_options",
    "replaykit_server",
]

SERVER_KEYS = ("strict", "match_on", "volatile", "repeat", "timing", "enforce_contracts", "profile")
_EXAMPLES = {"timing": "'fixed:20'", "profile": "'openai-compatible'", "match_on": "['body', 'model']",
             "volatile": "['/metadata/user_id', '/messages/*/cache_control']"}
_HANDLE = pytest.StashKey["ReplayHandle"]()
_SUITE = pytest.StashKey["Suite"]()
_SHOWN = {  # what a test's report carries to the terminal summary, shown under these titles
    "replaykit_differences": "replaykit: served with body differences (--replaykit-strict fails them)",
    "replaykit_recorded": "replaykit: what the tests recorded",
}
_LINES = {key: pytest.StashKey[list[str]]() for key in _SHOWN}
_FIND_FIX = "give an absolute path, put it there, or set --replaykit-cassette-dir"
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off", ""})


# ---------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the ``--replaykit-*`` options and their ini keys (and ``--record-mode`` when
    pytest-recording, which defines it, is absent)."""
    group = parser.getgroup("replaykit", "replaykit: replay recorded LLM provider traffic")
    _add(parser, group, "cassette_dir", "DIR", "where marker cassettes are looked up "
         "(default: cassettes/ next to the test file, then the bundled cassettes)")
    _add(parser, group, "timing", "MODE", "stream timing: fast (default), recorded or fixed:<ms>")
    _add(parser, group, "enforce_contracts", None, "answer requests that break their contract with a 400")
    _add(parser, group, "allow_network", None, "turn the network guard off (non-loopback connections)")
    _add(parser, group, "record_mode", "MODE", "none (default): replay only, never the network; once: record "
         "a test whose cassette does not exist; new_episodes: record what its cassette lacks; all: record "
         "every test again")
    _add(parser, group, "upstream", "PROVIDER=URL", "the API a provider's traffic is recorded from, "
         f"repeatable (default: {', '.join(f'{k}={v}' for k, v in API_ORIGINS.items())})", append=True)
    _add(parser, group, "strict", None, "a request whose body differs from the recording (volatile fields "
         "aside) is unmatched: the test fails (the marker's strict=False still serves it)")
    _add(parser, group, "scenarios", "DIR", "collect the scenario files (*.yaml) of DIR as items, "
         "repeatable; a scenario file or folder named as a pytest argument is collected too", append=True)
    _add(parser, group, "target", "CMD", "the target scenario items run on: a command or "
         "python:module:function (default: the reference, python:replaykit.reference:run)")
    _add(parser, group, "manifest", "FILE", "the target's manifest (default: replaykit-target.yaml beside "
         "it)")
    _add(parser, group, "mutants", None, "also an item per scenario and mutant it declares in kills: (it "
         "passes when the mutant fails the scenario)")
    if importlib.util.find_spec("pytest_recording") is None or pluginmanager.is_blocked("recording"):
        group.addoption("--record-mode", metavar="MODE", default=None, dest="record_mode",
                        help="pytest-recording's name of --replaykit-record-mode")


def _sources(name: str) -> tuple[str, str]:
    """The command-line flag and the environment variable of option ``name``."""
    return "--replaykit-" + name.replace("_", "-"), "REPLAYKIT_" + name.upper()


def _add(parser: pytest.Parser, group: Any, name: str, metavar: str | None, help: str,
         append: bool = False) -> None:
    flag, env = _sources(name)
    text = f"{help}; env {env}, ini replaykit_{name}"
    if metavar is None:
        group.addoption(flag, action="store_true", default=None, dest=f"replaykit_{name}", help=text)
        parser.addini(f"replaykit_{name}", help, type="bool", default=False)
    else:
        group.addoption(flag, metavar=metavar, default=None, dest=f"replaykit_{name}", help=text,
                        action="append" if append else "store")
        parser.addini(f"replaykit_{name}", help, type="string", default="")


def pytest_configure(config: pytest.Config) -> None:
    """Declare the marker (so ``--strict-markers`` accepts it); register the terminal summary."""
    config.pluginmanager.register(_Summary(), "replaykit-summary")
    config.addinivalue_line(
        "markers",
        "replaykit(*cassettes, cassettes=[...], faults=[...], allow_unused=False, strict=False, "
        "match_on=[...], volatile=[...], repeat=False, timing=..., enforce_contracts=..., profile=None): "
        "replay cassettes on replaykit's fake provider (default: cassettes/<module>/<test>.yaml); fail on "
        "unmatched, unused or invalid traffic",
    )


# ---------------------------------------------------------------- scenarios as items


def _scenario_folders(config: pytest.Config) -> list[Path]:
    """The folders of ``--replaykit-scenarios`` (environment and ini: separated by spaces), resolved."""
    value, source = _setting(config, "scenarios")
    names = value if isinstance(value, list) else str(value).split()
    return [(_base(config, source) / name).resolve() for name in names]


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """The folders of ``--replaykit-scenarios`` are collected as if named on the command line."""
    config = session.config
    given = {(config.invocation_params.dir / arg.split("::")[0]).resolve() for arg in config.args}
    config.args += [str(folder) for folder in _scenario_folders(config) if folder not in given]


def _named(config: pytest.Config) -> frozenset[Path]:
    """The files and folders named on pytest's command line (none when it fell back on ``testpaths``)."""
    given = config.args if config.args_source == pytest.Config.ArgsSource.ARGS else []
    return frozenset((config.invocation_params.dir / arg.split("::")[0]).resolve() for arg in given)


def _suite(config: pytest.Config) -> Suite:
    """This process's scenario settings (:class:`~replaykit.scenario.pytest_items.Suite`), read once."""
    if _SUITE not in config.stash:
        from replaykit.scenario.pytest_items import Suite

        target, source = _setting(config, "target")
        manifest, where = _setting(config, "manifest")
        suite = Suite(str(target or ""), _base(config, source), _named(config),
                      frozenset(_scenario_folders(config)), _base(config, where) / str(manifest) if manifest
                      else None, _flag(config, "mutants"), _defect_classes)
        config.stash[_SUITE] = suite
        config.add_cleanup(suite.close)
    return config.stash[_SUITE]


def _defect_classes() -> frozenset[str]:
    """The defect classes a ``kills:`` may name (``replaykit mutants``'s)."""
    from replaykit.reference.defects import defect_classes

    return defect_classes()


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A scenario file's items (:mod:`replaykit.scenario.pytest_items`); other files import nothing."""
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    from replaykit.scenario.pytest_items import collect_file

    try:
        return collect_file(file_path, parent, _suite(parent.config))
    except ReplaykitError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test with the marker but without the fixture gets the fixture."""
    for item in items:
        if not isinstance(item, pytest.Function) or item.get_closest_marker("replaykit") is None:
            continue
        if "replaykit" not in item.fixturenames:
            item.fixturenames = [*item.fixturenames, "replaykit"]


def _setting(config: pytest.Config, name: str) -> tuple[object, str]:
    """The value of option ``name`` and where it came from (command line, environment, ini)."""
    value = config.getoption(f"replaykit_{name}")
    flag, env = _sources(name)
    if value is not None:
        return value, flag
    if env in os.environ:
        return os.environ[env], env
    return config.getini(f"replaykit_{name}"), f"ini replaykit_{name}"


def _flag(config: pytest.Config, name: str) -> bool:
    value, source = _setting(config, name)
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word not in _TRUE | _FALSE:
        raise UsageError(f"{source}={value!r} must be one of 1, true, yes, on, 0, false, no, off")
    return word in _TRUE


def _directory(config: pytest.Config) -> Path | None:
    value, source = _setting(config, "cassette_dir")
    return (_base(config, source) / str(value)).resolve() if value else None


def _base(config: pytest.Config, source: str) -> Path:
    """What a relative path given in ``source`` is relative to: the ini file's folder, else where pytest
    was started."""
    if source.startswith("ini"):
        return config.inipath.parent if config.inipath else config.rootpath
    return config.invocation_params.dir


def _record_mode(config: pytest.Config) -> str:
    """The record mode (:data:`replaykit.record.options.MODES`): ``--replaykit-record-mode``, else
    ``--record-mode`` (pytest-recording's, or ours when it is absent), else environment, else ini."""
    from replaykit.record.options import record_mode

    value, source = _setting(config, "record_mode")
    theirs = config.getoption("record_mode", None)
    if config.getoption("replaykit_record_mode") is None and theirs:
        value, source = theirs, "--record-mode"
    return record_mode(str(value), source) if str(value).strip() else "none"


def _upstreams(config: pytest.Config) -> dict[str, str]:
    """Each provider's API to record from: the real ones (:data:`replaykit.routes.API_ORIGINS`), replaced
    by those given."""
    from replaykit.record.options import upstreams

    value, source = _setting(config, "upstream")
    return {**API_ORIGINS, **upstreams(value if isinstance(value, list) else [str(value)], source)}


@dataclasses.dataclass(frozen=True, slots=True)
class ReplaykitOptions:
    """The plugin's settings; override the ``replaykit_options`` fixture to change them in code."""

    cassette_dir: Path | None = None
    timing: str = "fast"
    enforce_contracts: bool = False
    allow_network: bool = False
    record_mode: str = "none"
    upstreams: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(API_ORIGINS))
    strict: bool = False

    @classmethod
    def from_config(cls, config: pytest.Config) -> ReplaykitOptions:
        """Read the options: command line, else environment variable, else ini."""
        timing = str(_setting(config, "timing")[0] or "fast")
        flags = _flag(config, "enforce_contracts"), _flag(config, "allow_network")
        return cls(_directory(config), timing, *flags, _record_mode(config), _upstreams(config),
                   _flag(config, "strict"))


# ---------------------------------------------------------------- fixtures


def _fail(exc: ReplaykitError) -> NoReturn:
    """Fail the test with the error's message alone: no traceback, no chained causes."""
    raise pytest.fail.Exception(str(exc), pytrace=False) from None


@pytest.fixture(scope="session")
def replaykit_options(pytestconfig: pytest.Config) -> ReplaykitOptions:
    """The options of this run (see :class:`ReplaykitOptions`)."""
    try:
        return ReplaykitOptions.from_config(pytestconfig)
    except ReplaykitError as exc:
        _fail(exc)


@pytest.fixture(scope="session")
def replaykit_server(replaykit_options: ReplaykitOptions) -> Iterator[FakeProvider]:
    """The session's fake provider on a free loopback port (one per xdist worker), started once."""
    from replaykit.server import FakeProvider  # aiohttp is imported only when a test asks for it

    try:
        options = replaykit_options
        server = FakeProvider(timing=options.timing, enforce_contracts=options.enforce_contracts,
                              strict=options.strict)
    except ReplaykitError as exc:
        _fail(exc)
    with server:
        yield server


@pytest.fixture(scope="session")
def _replaykit_servers(
    replaykit_server: FakeProvider, replaykit_options: ReplaykitOptions
) -> Iterator[_Servers]:
    """The session server, and one server more per other settings tests ask for (stopped at the end)."""
    servers = _Servers(replaykit_server, strict=replaykit_options.strict)
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture
def replaykit_config() -> JSON:
    """Defaults for every test's marker arguments (a test's marker overrides them key by key): override it in
    a ``conftest.py``, at any scope, as pytest-recording's ``vcr_config``. Empty by default."""
    return {}


@pytest.fixture
def replaykit(
    request: pytest.FixtureRequest, _replaykit_servers: _Servers, replaykit_options: ReplaykitOptions,
    replaykit_config: JSON,
) -> Iterator[ReplayHandle]:
    """This test's view of the fake provider: its cassettes and faults loaded, journal reset, network off."""
    base = replaykit_options.cassette_dir or request.node.path.parent / "cassettes"
    try:
        marked = _marked(request.node, replaykit_config)
        server = _replaykit_servers.get(marked.server, f"{request.node.nodeid}: @pytest.mark.replaykit")
        handle = ReplayHandle.open(request.node, server, base, request.config.rootpath, marked,
                                   options=replaykit_options)
    except ReplaykitError as exc:
        _fail(exc)
    handle.guard = None if replaykit_options.allow_network else NetworkGuard(NETWORK_HINT)
    request.node.stash[_HANDLE] = handle
    try:
        with handle.guard or contextlib.nullcontext():
            yield handle
    finally:
        del request.node.stash[_HANDLE]
        handle.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """After the test body: fail the test on the replaykit report, or attach it to a failure."""
    handle = item.stash.get(_HANDLE, None)
    if handle is None:
        return (yield)
    try:
        result = yield
    except pytest.skip.Exception:
        raise
    except BaseException:
        text = _report_quietly(handle)
        _keep_for_the_summary(item, handle)
        if text:
            item.add_report_section("call", "replaykit", text)
        raise
    try:
        text = handle.report()
    finally:
        _keep_for_the_summary(item, handle)
    if text:
        pytest.fail(text, pytrace=False)
    return result


def _keep_for_the_summary(item: pytest.Item, handle: ReplayHandle) -> None:
    """What the terminal summary shows of this test: requests served with differences, what it recorded."""
    shown = {"replaykit_differences": differences(handle.journal, handle._display),
             "replaykit_recorded": handle.recorded()}
    for key, items in shown.items():
        item.stash[_LINES[key]] = [line for first, *rest in items
                                   for line in (f"{item.nodeid}: {first}", *rest)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """The call's report carries the test's summary lines (to the xdist controller too)."""
    report = yield
    if call.when == "call":
        for key in _SHOWN:
            setattr(report, key, item.stash.get(_LINES[key], []))
    return report


class _Summary:
    """Collects each test's summary lines from its report; shows them at the end of the run."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {key: [] for key in _SHOWN}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for key, kept in self.lines.items():
            kept.extend(getattr(report, key, None) or [])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for key, title in _SHOWN.items():
            if self.lines[key]:
                terminalreporter.write_sep("=", title)
                for line in self.lines[key]:
                    terminalreporter.write_line(line)


def _report_quietly(handle: ReplayHandle) -> str:
    """The report, for a test that already failed: a server error must not hide the test's own."""
    try:
        return handle.report()
    except Exception as exc:
        return f"replaykit: the fake provider failed while serving this test: {type(exc).__name__}: {exc}"


# ---------------------------------------------------------------- marker arguments


@dataclasses.dataclass(frozen=True, slots=True)
class _Marked:
    """A test's arguments, the marker's over ``replaykit_config``'s; ``cassettes`` is None when neither
    names any (then the default cassette is looked for); ``server`` holds the server settings given."""

    cassettes: list[object] | None = None
    faults: list[object] = dataclasses.field(default_factory=list)
    allow_unused: bool = False
    server: JSON = dataclasses.field(default_factory=dict)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | os.PathLike | dict) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def _marked(node: pytest.Item, config: object) -> _Marked:
    """The test's marker arguments over ``replaykit_config``'s, each checked (``where`` named on an error)."""
    if not isinstance(config, Mapping):
        raise UsageError(f"replaykit_config returned {type(config).__name__}; return a dict of marker "
                         f"arguments, e.g. {{'timing': 'fixed:5', 'match_on': ['body']}}")
    given = _checked(config, "replaykit_config")
    marker = node.get_closest_marker("replaykit")
    if marker is not None:
        own = dict(marker.kwargs)
        if marker.args:
            own["cassettes"] = [*marker.args, *_as_list(own.get("cassettes"))]
        given |= _checked(own, f"{node.nodeid}: @pytest.mark.replaykit")
    server = {key: given[key] for key in SERVER_KEYS if key in given}
    return _Marked(given.get("cassettes"), given.get("faults", []), given.get("allow_unused", False), server)


def _checked(given: Mapping[str, object], where: str) -> JSON:
    unknown = sorted(set(map(str, given)) - set(MARKER_KEYS))
    if unknown:
        known = ", ".join(MARKER_KEYS)
        raise UsageError(f"{where}: unknown argument {unknown[0]!r}; the arguments are {known}")
    return {key: _ARGUMENTS[key](key, value, where) for key, value in given.items()}


def _flag_argument(key: str, value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{where}: {key}={value!r} must be True or False")
    return value


def _text_argument(key: str, value: object, where: str) -> str | None:
    if not isinstance(value, str | None):
        raise UsageError(f"{where}: {key}={value!r} must be text, e.g. {_EXAMPLES[key]}")
    return value


def _matchers_argument(key: str, value: object, where: str) -> tuple[object, ...]:
    """Matcher names or callables; text is split at commas, as ``--match-on`` is."""
    items = [part.strip() for part in value.split(",")] if isinstance(value, str) else _as_list(value)
    if not all(isinstance(item, str) or callable(item) for item in items):
        raise UsageError(f"{where}: {key}={value!r} must list matcher names or callables, e.g. "
                         f"{_EXAMPLES[key]}")
    return tuple(item for item in items if item != "")


def _pointers_argument(key: str, value: object, where: str) -> tuple[str, ...]:
    if not all(isinstance(item, str) for item in _as_list(value)):
        raise UsageError(f"{where}: {key}={value!r} must list JSON pointers, e.g. {_EXAMPLES[key]}")
    return tuple(_as_list(value))


def _list_argument(key: str, value: object, where: str) -> list[object]:
    return _as_list(value)


# The marker's arguments, each with how it is checked and normalised; SERVER_KEYS are the server's settings.
_ARGUMENTS: dict[str, Callable[[str, object, str], Any]] = {
    "cassettes": _list_argument, "faults": _list_argument, "allow_unused": _flag_argument,
    "strict": _flag_argument, "match_on": _matchers_argument, "volatile": _pointers_argument,
    "repeat": _flag_argument, "timing": _text_argument, "enforce_contracts": _flag_argument,
    "profile": _text_argument,
}
MARKER_KEYS: tuple[str, ...] = tuple(_ARGUMENTS)


def default_cassette(node: pytest.Item, base: Path) -> Path:
    """The cassette of a test that names none, as pytest-recording names it: ``<base>/<module>/<test>.yaml``
    (``<Class>.<test>`` for a method, parameters included; ``<>?%*:|"'/\\`` become ``-``), see
    https://github.com/kiwicom/pytest-recording (``default_cassette_name``)."""
    cls = getattr(node, "cls", None)
    name = f"{cls.__name__}.{node.name}" if cls is not None else node.name
    for forbidden in '<>?%*:|"\'/\\':
        name = name.replace(forbidden, "-")
    return base / node.path.stem / f"{name}.yaml"


def _recording_target(mode: str, named: list[Any] | None, default: Path | None, base: Path) -> Path | None:
    """The cassette file a test records into in ``mode`` (None: it replays): its default one, or the one
    file it names (absolute, else under ``base``); under ``once`` only while no such cassette is found.
    Several cassettes, a folder or a :class:`Cassette` object are replayed."""
    one_file = named is None or (len(named) == 1 and isinstance(named[0], str | os.PathLike))
    if mode == "none" or not one_file:
        return None
    target = default if named is None else base / named[0]  # an absolute name replaces base
    if target is None or target.is_dir():
        return None
    if mode == "once" and (target.exists() or (named is not None and _found(named[0], base))):
        return None
    return target


def _found(name: str | os.PathLike[str], base: Path) -> bool:
    """True when :func:`replaykit.resources.find_cassette` finds ``name`` (under ``base``, or bundled)."""
    try:
        find_cassette(name, base, fix=_FIND_FIX)
    except UsageError:
        return False
    return True


def _resolve(name: object, base: Path, where: str) -> Path | Cassette:
    """A cassette entry as a path (:func:`replaykit.resources.find_cassette` under ``base``) or a
    :class:`Cassette`."""
    if isinstance(name, Cassette):
        return name
    if not isinstance(name, str | os.PathLike):
        raise UsageError(f"{where}: cassette {name!r} must be a path or a replaykit.cassette.Cassette")
    try:
        return find_cassette(name, base, fix=_FIND_FIX).resolve()
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None


class _Servers:
    """The session's servers: the session server for its own settings, one more per other settings a test
    asks for (started when first asked, reset for each test, stopped with the session)."""

    def __init__(self, session: FakeProvider, strict: bool = False) -> None:
        self.session, self.strict = session, strict
        self._others: dict[tuple[object, ...], FakeProvider] = {}

    def get(self, wanted: JSON, where: str) -> FakeProvider:
        """The server with the session's settings changed by ``wanted`` (the test's server settings)."""
        try:
            settings = self._settings(wanted)
            if settings == self._settings({}):
                return self.session
            key = tuple(settings.values())
            if key not in self._others:
                from replaykit.server import FakeProvider

                self._others[key] = FakeProvider(**settings).start()
        except ReplaykitError as exc:
            raise UsageError(f"{where}: {exc}") from exc
        return self._others[key]

    def _settings(self, wanted: JSON) -> JSON:
        from replaykit.server import DEFAULT_VOLATILE, Timing

        current = self.session.settings
        timing = wanted.get("timing")
        return {"timing": Timing.parse(timing) if timing else current.timing,
                "enforce_contracts": wanted.get("enforce_contracts", current.enforce_contracts),
                "strict": wanted.get("strict", self.strict), "match_on": wanted.get("match_on", ()),
                "volatile": wanted.get("volatile", DEFAULT_VOLATILE), "repeat": wanted.get("repeat", False),
                "profile": wanted.get("profile")}

    def close(self) -> None:
        """Stop every server started for a test's settings."""
        for server in self._others.values():
            server.stop()


class ReplayHandle:
    """One test's access to the fake provider: URLs, environment, journal, faults, and the final report."""

    def __init__(
        self, server: FakeProvider, *, base: Path, root: Path, allow_unused: bool = False, own: bool = False
    ) -> None:
        self.server = server
        self.base, self.root = base, root
        self.allow_unused = allow_unused
        self.guard: NetworkGuard | None = None
        self.missing_default: Path | None = None
        self.recording: RecordingProxy | None = None
        self._said: list[str] = []
        self._own = own
        self._cassettes: list[Path | Cassette] = []
        self._listed: dict[str, frozenset[str]] = {}

    @classmethod
    def open(cls, node: pytest.Item, server: FakeProvider, base: Path, root: Path,
             marked: _Marked | None = None, *, options: ReplaykitOptions | None = None) -> ReplayHandle:
        """Reset ``server``; load the test's cassettes (its default one when it names none) and faults; or,
        when ``options.record_mode`` says so, start recording its cassette (:func:`_recording_target`)."""
        marked, options = marked or _marked(node, {}), options or ReplaykitOptions()
        named = marked.cassettes
        default = default_cassette(node, base) if named is None else None
        target = _recording_target(options.record_mode, named, default, base)
        handle = cls(server, base=base, root=root, allow_unused=marked.allow_unused)
        try:
            server.reset()
            if target is None:
                handle._replay(named, default, f"{node.nodeid}: @pytest.mark.replaykit")
            else:
                handle._record(target, options, marked.server.get("profile"))
            for number, fault in enumerate(marked.faults):
                handle._inject(fault, f"{node.nodeid}: @pytest.mark.replaykit faults[{number}]")
        except BaseException:
            handle.close()
            raise
        return handle

    # ------------------------------------------------------------ what the test uses

    @property
    def cassettes(self) -> list[Path | Cassette]:
        """The cassettes loaded for this test (resolved paths, or the objects given)."""
        return list(self._cassettes)

    @property
    def journal(self) -> list[Entry]:
        """One :class:`~replaykit.server.Entry` per request received during this test, in arrival order."""
        return self.server.journal

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` of the server this test talks to (the recording proxy, recording)."""
        return self.server.url if self.recording is None else self.recording.url

    def base_url(self, provider: str) -> str:
        """The base URL to give ``provider``'s SDK: anthropic, openai, azure or cloudflare."""
        return self.server.base_url(provider) if self.recording is None else self.recording.base_url(provider)

    def base_urls(self) -> dict[str, str]:
        """Every provider's SDK base URL."""
        return self.server.base_urls() if self.recording is None else self.recording.base_urls()

    def env(self) -> dict[str, str]:
        """Environment variables pointing a subprocess at the fake provider (base URLs, dummy keys) and the
        proxy variables that keep it from anything else (:func:`replaykit.netguard.proxy_env`); recording,
        at the recording proxy, without keys (the subprocess's own go to the provider)."""
        return self.server.env() if self.recording is None else self.recording.env()

    def inject(self, fault: Fault | str | JSON) -> Fault:
        """Add a fault (a :class:`~replaykit.server.Fault`, a ``--fault`` spec string or a mapping)."""
        return self._inject(fault, "replaykit.inject")

    def load(self, *cassettes: str | os.PathLike[str] | Cassette) -> None:
        """Replace the loaded cassettes (looked up like the marker's); which were served starts afresh."""
        self._load([_resolve(c, self.base, "replaykit.load") for c in cassettes])
        self.missing_default = None

    def unused(self) -> list[JSON]:
        """Interactions not served whole so far: ``{cassette, index, line, route}`` each."""
        return self.server.unused()

    def report(self) -> str:
        """The readable list of this test's traffic problems; empty when there are none. Recording, the
        recording ends here (its cassette written) and its problems are listed."""
        self.server.check_errors()
        refused = self.guard.refused if self.guard else []
        unused = [] if self.allow_unused else self.unused()
        failed = self._stop_recording()
        text = format_report(self.journal, unused, refused, self._display, self._expected, failed)
        if text and self.missing_default and self.server.unmatched():
            default = self._display(str(self.missing_default))
            text += (f"\nno cassette was named and the default one, {default}, does not exist: record it "
                     f"there with {RECORD_HINT}, or name cassettes in @pytest.mark.replaykit(...)")
        return text

    def recorded(self) -> list[list[str]]:
        """What this test recorded: the cassette with its counts, then each line the recorder told."""
        proxy = self.recording
        if proxy is None or proxy.path is None or not (proxy.tally.recorded or self._said):
            return []
        tally, path = proxy.tally, self._display(str(proxy.path))
        counts = f"{tally.recorded} recorded, {tally.replayed} replayed, mode {proxy.mode}"
        return [[f"{path} ({counts})", *(f"  {line}" for line in self._said)]]

    def close(self) -> None:
        """Stop a server of the test's own (``own=True``), or empty the shared one; stop recording."""
        self._stop_recording()
        if self._own:
            self.server.stop()
        else:
            self.server.reset()
            self.server.load([])

    # ------------------------------------------------------------ internals

    def _load(self, cassettes: list[Path | Cassette]) -> None:
        self.server.load(cassettes)
        self._cassettes = cassettes

    def _replay(self, named: list[object] | None, default: Path | None, where: str) -> None:
        """Load the cassettes named (looked up under ``base``), else the default one when it exists."""
        cassettes = [_resolve(c, self.base, where) for c in named or []]
        self._load(cassettes or ([default] if default and default.is_file() else []))
        self.missing_default = default if default and not default.is_file() else None

    def _record(self, target: Path, options: ReplaykitOptions, profile: str | None) -> None:
        """Record ``target`` through a recording proxy to ``options.upstreams`` (in ``options.record_mode``),
        redacted, checked, ``origin: recorded``: what ``replaykit record`` writes."""
        from replaykit.record import RecordingProxy  # aiohttp is imported only when a test records

        self.recording = RecordingProxy(target, upstream=options.upstreams, mode=options.record_mode,
                                        profile=profile, say=self._said.append, isolate=False).start()
        self._cassettes = [target]

    def _stop_recording(self) -> list[str]:
        """End the recording (its cassette written): why it failed, if it did. Safe to call again."""
        if self.recording is None:
            return []
        self.recording.stop()
        try:
            self.recording.check_errors()
        except ReplaykitError as exc:
            return [str(exc), *self._said]
        problems = self.recording.problems()
        return [*problems, *self._said] if problems else []

    def _inject(self, fault: Any, where: str) -> Fault:
        try:
            return self.server.inject(fault)
        except ReplaykitError as exc:
            raise UsageError(f"{where}: {exc}") from exc

    def _display(self, label: str) -> str:
        path = Path(label)
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else label

    def _expected(self, label: str) -> frozenset[str]:
        """The ``x-expected-violations`` of the cassette loaded under ``label`` (read once)."""
        from replaykit.contracts import expected_violations  # jsonschema is imported only on a violation

        if label not in self._listed:
            self._listed[label] = expected_violations(self._cassette(label))
        return self._listed[label]

    def _cassette(self, label: str) -> Cassette | None:
        given = [c for c in self._cassettes if isinstance(c, Cassette) and str(c.path) == label]
        if given:
            return given[0]
        return cassette_mod.load(label) if Path(label).is_file() else None
