"""The docs' generated parts: the MkDocs hook (mkdocs.yml ``hooks:``) that fills each
``<!-- generated: NAME -->`` line of a page, at build time, from what the code and the contracts say.

Three parts, each made from its one source, so they cannot go stale: ``cli`` (the argparse parser of
``replaykit.cli.build_parser``, every command it has), ``faults`` (the fault kinds of
``replaykit.server.faults`` and the keys each takes) and ``scenario``
(``contracts/replaykit/scenario.schema.json``, its ``$ref`` s resolved through every contract under
``contracts/``). A marker naming no part fails the build.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from referencing import Registry
from referencing.jsonschema import DRAFT202012

if TYPE_CHECKING:
    from referencing._core import Resolver  # what Registry.resolver() returns; not exported by name

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- generated: (?P<name>[\w-]+) -->$", re.MULTILINE)
SCENARIO = "https://replaykit.dev/contracts/replaykit/scenario.schema.json"
Schema = dict[str, Any]

# ---------------------------------------------------------------- cells of a Markdown table


def cell(text: str) -> str:
    """One table cell: on one line, ``|`` escaped, ``<`` and ``>`` escaped outside code spans."""
    parts = " ".join(text.split()).split("`")
    return "`".join(part.replace("|", r"\|") if odd else
                    part.replace("|", r"\|").replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*")
                    for odd, part in ((index % 2 == 1, part) for index, part in enumerate(parts)))


def table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return lines + ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]


# ---------------------------------------------------------------- the CLI reference


def commands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """Each command of ``parser``: its name, its one-line help and its own parser, in the parser's order.
    A command's arguments may be registered only when a command line chooses it (``replaykit.cli``
    imports a command's module then): each is chosen once, its refusal of the empty command line ignored."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name in list(action.choices):
                chosen(parser, name)
                yield name, helps.get(name, ""), action.choices[name]


def chosen(parser: argparse.ArgumentParser, name: str) -> None:
    """Parse the command line ``name`` alone, so the command registers its arguments."""
    from replaykit.errors import UsageError

    with contextlib.suppress(UsageError, SystemExit), contextlib.redirect_stderr(io.StringIO()):
        parser.parse_known_args([name])


def flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    if action.nargs == 0:
        value = ""
    elif isinstance(action.metavar, str):
        value = " " + action.metavar
    elif action.choices is not None:
        value = " {" + ",".join(map(str, action.choices)) + "}"
    else:
        value = " " + action.dest.upper()
    return ", ".join(f"`{option}{value}`" for option in action.option_strings)


def expanded(action: argparse.Action, prog: str) -> str:
    """The help of ``action`` as ``--help`` prints it (``%(default)s`` and the like filled in)."""
    text = action.help or ""
    if "%" not in text:
        return text
    params = {key: value for key, value in vars(action).items() if value is not argparse.SUPPRESS}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return text % (params | {"prog": prog})


def command_section(name: str, summary: str, sub: argparse.ArgumentParser) -> list[str]:
    usage = " ".join(sub.format_usage().removeprefix("usage: ").split())
    rows = [(flags(action), expanded(action, sub.prog)) for action in sub._actions
            if action.help is not argparse.SUPPRESS and not isinstance(action, argparse._HelpAction)]
    lines = [f"## replaykit {name}", "", cell(summary) + ".", "", "```text", usage, "```", ""]
    if sub.description:
        lines += [cell(sub.description), ""]
    lines += table(("argument", "what it does"), rows) if rows else []
    if sub.epilog:
        lines += ["", "```text", sub.epilog.strip("\n"), "```"]
    return [*lines, ""]


def cli_reference() -> str:
    from replaykit.cli import build_parser

    parser = build_parser()
    found = list(commands(parser))
    lines = table(("command", "what it does"), [(f"[`{name}`](#replaykit-{name})", summary)
                                                 for name, summary, _ in found])
    lines.append("")
    for name, summary, sub in found:
        lines += command_section(name, summary, sub)
    return "\n".join(lines)


# ---------------------------------------------------------------- the fault catalogue

#: What each kind does, in a sentence; its keys come from the code. A kind the code has and this table
#: lacks (or the reverse) fails the build, naming it.
WHAT = {
    "status": "Answers the HTTP error `status` (429, 500, 503, 529, 401, 400…) with the provider's own error "
              "body and headers; `retry_after` (seconds) / `retry_after_ms` become `retry-after` / "
              "`retry-after-ms`, `should_retry` the `x-should-retry` header; `message`, `error_type` and "
              "`code` fill the body.",
    "delay_headers": "Waits `ms` before sending the status line and headers.",
    "delay_events": "Waits `ms` before each event of a stream.",
    "stall": "After `after` events, sends nothing for `ms` (without `ms`: until the client gives up).",
    "disconnect": "After `after` events, closes the connection (a body that is not a stream: half of it is "
                  "sent).",
    "error_event": "After `after` events, sends the provider's mid-stream error event and ends the stream "
                   "(OpenAI: `as_failed` sends `response.failed` instead of `error`).",
    "corrupt_event": "Sends event number `event` (1-based) with its JSON cut in half.",
    "drop_terminal": "Never sends the terminal event (`message_stop`, `response.completed`…).",
    "truncate": "Cuts a body that is not a stream at byte `at` (default: half), framed as complete.",
    "kill": "A kill point for the scenario runner: after `after` events (default 0) the response goes no "
            "further and the connection is held, so the runner can SIGKILL the target knowing exactly what "
            "it received, then start it again. With `tool` it selects no provider request: it holds the "
            "target's announcement of its `nth` call of that tool (`POST /__replaykit/tool-calls`).",
}


def fault_catalogue() -> str:
    from replaykit.server import faults

    kinds = tuple(faults.KINDS)
    missing, extra = sorted(set(kinds) - set(WHAT)), sorted(set(WHAT) - set(kinds))
    if missing or extra:
        raise ValueError(f"scripts/_docs.py WHAT: fault kinds {missing} undescribed, {extra} unknown; "
                         "describe each kind of replaykit.server.faults.KINDS, once")
    rows = [(f"`{kind}`", keys(faults.keys_text(kind)), applies(kind, faults.STREAM_KINDS), WHAT[kind])
            for kind in kinds]
    return "\n".join(table(("kind", "its keys (* required)", "applies to", "what it does"), rows))


def keys(text: str) -> str:
    return ", ".join(f"`{key}`" for key in text.split(", ")) if text else "none"


def applies(kind: str, stream_kinds: frozenset[str]) -> str:
    return "streams" if kind in stream_kinds else "any response"


# ---------------------------------------------------------------- the scenario reference


def registry() -> Registry[Any]:
    """Every contract under ``contracts/``, by its ``$id``: nothing is fetched."""
    paths = sorted(ROOT.glob("contracts/**/*.schema.json"))
    schemas = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    resources = [(schema["$id"], DRAFT202012.create_resource(schema)) for schema in schemas]
    return Registry().with_resources(resources)


class Reference:
    """The sections of the scenario reference: one per object schema with properties, named by its
    ``$ref``."""

    def __init__(self) -> None:
        self.sections: dict[str, tuple[str, Schema, Resolver[Any]]] = {}  # anchor: title, schema, resolver
        self.queue: list[str] = []

    def section(self, title: str, schema: Schema, resolver: Resolver[Any]) -> str:
        anchor = title.lower()
        if anchor not in self.sections:
            self.sections[anchor] = (title, schema, resolver)
            self.queue.append(anchor)
        return anchor

    def resolve(self, schema: Schema, resolver: Resolver[Any]) -> tuple[Schema, Resolver[Any], str | None]:
        """``schema`` with its ``$ref`` followed (its own keywords kept over the target's), and the ref's
        name."""
        name = None
        schema = schema if isinstance(schema, dict) else {}  # a boolean schema (true: anything)
        while "$ref" in schema and "properties" not in schema:
            ref = schema["$ref"]
            found = resolver.lookup(ref)
            name = ref.rsplit("/", 1)[-1].removesuffix(".schema.json")
            resolver = found.resolver
            schema = found.contents | {key: value for key, value in schema.items() if key != "$ref"}
        return schema, resolver, name

    def kind(self, schema: Schema, resolver: Resolver[Any]) -> str:
        """What a value of ``schema`` is, in a few words, with a link to its section when it has one."""
        schema, resolver, name = self.resolve(schema, resolver)
        if "properties" in schema and name:
            return f"[{name}](#{self.section(name, schema, resolver)})"
        if "enum" in schema:
            return " or ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
        if "const" in schema:
            return f"`{json.dumps(schema['const'])}`"
        if alternatives := schema.get("anyOf") or schema.get("oneOf"):
            return " or ".join(self.kind(alternative, resolver) for alternative in alternatives)
        types = schema.get("type", "any")
        words = [self.array(schema, resolver) if kind == "array" else str(kind)
                 for kind in (types if isinstance(types, list) else [types])]
        return " or ".join(words)

    def array(self, schema: Schema, resolver: Resolver[Any]) -> str:
        items = schema.get("items") or schema.get("else", {}).get("items")
        return f"list of {self.kind(items, resolver)}" if isinstance(items, dict) else "list"

    def rows(self, schema: Schema, resolver: Resolver[Any]) -> list[tuple[str, ...]]:
        required = set(schema.get("required", ()))
        rows: list[tuple[str, ...]] = []
        for field, sub in schema.get("properties", {}).items():
            whole, _, _ = self.resolve(sub, resolver)
            default = f"`{json.dumps(whole['default'])}`" if "default" in whole else ""
            name = f"`{field}`" + (" (required)" if field in required else "")
            rows.append((name, self.kind(sub, resolver), default, str(whole.get("description", ""))))
        return rows

    def render(self, top: Schema, resolver: Resolver[Any]) -> str:
        self.section("scenario", top, resolver)
        lines: list[str] = []
        while self.queue:
            title, schema, resolver = self.sections[self.queue.pop(0)]
            lines += [f"## {title}", "", cell(schema.get("description", "")), ""]
            lines += [*table(("field", "type", "default", "what it says"), self.rows(schema, resolver)), ""]
        return "\n".join(lines)


def scenario_reference() -> str:
    resolver = registry().resolver(base_uri=SCENARIO)
    top = resolver.lookup(SCENARIO)
    return Reference().render(top.contents, top.resolver)


# ---------------------------------------------------------------- the hook

GENERATED: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "faults": fault_catalogue,
    "scenario": scenario_reference,
}


def expand(markdown: str, where: str = "a page") -> str:
    """``markdown`` with each ``<!-- generated: NAME -->`` line replaced by that part."""
    def part(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in GENERATED:
            raise ValueError(f"{where}: <!-- generated: {name} --> names no part; use one of "
                             f"{', '.join(GENERATED)}")
        return GENERATED[name]()
    return MARKER.sub(part, markdown)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """MkDocs' hook: called with each page's Markdown before it is rendered."""
    return expand(markdown, f"docs/{page.file.src_uri}")
