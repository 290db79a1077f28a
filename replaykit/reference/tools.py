"""The local tools of the reference harness: ``read`` a file of the work folder, delegate a sub-task, and
``web_search`` (:mod:`replaykit.reference.websearch`).

``read {path}`` reads a file of the work folder (a path that leaves it is a tool error the model sees);
``task {prompt}`` starts a sub-agent and answers with its id, ``task_wait {id?}`` waits for it (cancelling the
run cancels the sub-tasks); ``web_search {query, limit?}`` searches Cloudflare Web Search with the host
options of its definition. Called by the harness; the tools' behaviour in full is in
docs/architecture/reference.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path

import httpx

from replaykit.jsondoc import JSON
from replaykit.reference.defects import mutant
from replaykit.reference.websearch import TOOL_NAME, ToolAnswer, WebSearchTool
from replaykit.reference.wire import now_ms
from replaykit.transcript import ToolCallBlock, ToolResultMessage

__all__ = ["DELEGATION", "SubTaskFailed", "ToolFailure", "Tools"]

DELEGATION = ("task", "task_wait")
SubAgent = Callable[[str], Coroutine[object, object, str]]


class ToolFailure(Exception):
    """A tool call that failed: its message is the tool result the model sees (``isError: true``)."""


class SubTaskFailed(Exception):
    """A sub-task that did not finish (only ``cancel-reported-as-error`` raises it for a cancellation)."""


class Tools:
    """The tools a model may call in one agent: those of ``enabled`` that the harness implements."""

    def __init__(self, enabled: list[JSON], cwd: Path, subagent: SubAgent | None,
                 client: httpx.AsyncClient | None = None) -> None:
        """``enabled`` as the input's ``tools`` (a ``web_search`` tool needs ``client``; its host options
        are checked here: LOCAL_REQUEST_ERROR at ``/tools/<index>/host/...``)."""
        functions = [(index, tool) for index, tool in enumerate(enabled)
                     if tool.get("type", "function") == "function"]
        self.enabled = {tool.get("name") for _, tool in functions}
        self.cwd = cwd.resolve()
        self.subagent = subagent
        self.pending: dict[str, asyncio.Task[str]] = {}
        self.search = next((WebSearchTool.create(tool, client, f"/tools/{index}") for index, tool in functions
                            if tool.get("name") == TOOL_NAME and client is not None), None)

    async def call(self, block: ToolCallBlock) -> ToolResultMessage:
        """Run one tool call; its result (or its failure) as a ``toolResult`` message."""
        if block["name"] == TOOL_NAME and self.search is not None:
            answer = await self.search.run(block["arguments"])
        else:
            try:
                answer = ToolAnswer(await self._run(block["name"], block["arguments"]), False, {})
            except ToolFailure as exc:
                answer = ToolAnswer(str(exc), True, {})
        message: ToolResultMessage = {
            "role": "toolResult", "toolCallId": block["id"], "toolName": block["name"],
            "content": [{"type": "text", "text": answer.text}], "isError": answer.is_error,
            "timestamp": now_ms()}
        if answer.details:
            message["details"] = answer.details
        return message

    async def _run(self, name: str, arguments: JSON) -> str:
        handlers: dict[str, Callable[[JSON], Awaitable[str]]] = {
            "read": self.read, "task": self.task, "task_wait": self.task_wait}
        if name not in self.enabled or name not in handlers or (name in DELEGATION and not self.subagent):
            raise ToolFailure(f"unknown tool {name!r}")
        return await handlers[name](arguments)

    async def read(self, arguments: JSON) -> str:
        """The text of a file under the work folder."""
        path = (self.cwd / str(arguments.get("path", ""))).resolve()
        if not path.is_relative_to(self.cwd):
            raise ToolFailure(f"{arguments.get('path')!r} is outside the work folder")
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ToolFailure(f"cannot read {arguments.get('path')!r}: {exc.strerror}") from exc

    async def task(self, arguments: JSON) -> str:
        """Start a sub-agent on ``prompt``; answer with its id."""
        prompt = arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt or self.subagent is None:
            raise ToolFailure("task needs a prompt (a non-empty string)")
        ident = f"task-{len(self.pending) + 1}"
        self.pending[ident] = asyncio.create_task(self.subagent(prompt))
        return f"started {ident}"

    async def task_wait(self, arguments: JSON) -> str:
        """Wait for sub-task ``id`` (every one without it) and answer with its final text."""
        ident = arguments.get("id")
        names = [ident] if isinstance(ident, str) and ident else list(self.pending)
        if not names or any(name not in self.pending for name in names):
            raise ToolFailure(f"no such task {ident!r}; started: {', '.join(self.pending) or 'none'}")
        return "\n\n".join([f"{name}: {await self._wait(name)}" for name in names])

    async def _wait(self, name: str) -> str:
        try:
            return await self.pending[name]
        except asyncio.CancelledError:
            if mutant("cancel-reported-as-error"):
                raise SubTaskFailed(f"{name} failed") from None
            raise
        except Exception as exc:  # the sub-agent's own failure is the model's to handle
            raise ToolFailure(f"{name} failed: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        """Cancel the sub-tasks still running and wait for them to end."""
        for task in self.pending.values():
            task.cancel()
        await asyncio.gather(*self.pending.values(), return_exceptions=True)
