"""A server on loopback in a background thread with its own event loop (HTTP wing).

:func:`bind` the socket (a clear usage error when the port is taken); :meth:`Background.start` runs
``setup(sock)`` on a new loop in a daemon thread and returns once it has finished (raising what it
raised); :meth:`Background.stop` stops the loop, runs ``cleanup()`` and joins the thread. Used by the fake
provider and the recording proxy (``unguarded=True``: its thread passes the network guard).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor

from replaykit.errors import UsageError
from replaykit.netguard import unguard_thread

__all__ = ["Background", "bind", "cancel_pending", "new_loop"]


def new_loop() -> asyncio.AbstractEventLoop:
    """The server thread's event loop: uvloop's (libuv transports, cheaper per request) where it is
    installed, else asyncio's own; both serve the same bytes."""
    try:
        import uvloop
    except ImportError:  # Windows: uvloop does not exist there
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --port (0 picks a free one)"
        ) from exc


async def cancel_pending() -> None:
    """Cancel every task of the running loop but the current one, and wait for them to end."""
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


class Background:
    """One serving thread: ``setup(sock)`` starts serving on the loop, ``cleanup()`` ends it, ``closed()``
    runs in the thread once the loop is closed (whether setup succeeded or not)."""

    def __init__(self, name: str, setup: Callable[[socket.socket], Awaitable[None]],
                 cleanup: Callable[[], Awaitable[None]], closed: Callable[[], None] = lambda: None, *,
                 unguarded: bool = False) -> None:
        self.name, self.unguarded = name, unguarded
        self._setup, self._cleanup, self._closed = setup, cleanup, closed
        self.thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self.thread is not None

    def start(self, sock: socket.socket) -> None:
        """Serve on ``sock`` in a new thread; return once set up, or raise what setting up raised."""
        ready: Future[None] = Future()
        self.thread = threading.Thread(target=self._serve, args=(sock, ready), name=self.name, daemon=True)
        self.thread.start()
        try:
            ready.result()
        except BaseException:
            self.thread.join()
            self.thread = None
            raise

    def _serve(self, sock: socket.socket, ready: Future[None]) -> None:
        loop = self.loop = new_loop()
        if self.unguarded:
            unguard_thread()
            loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix=f"{self.name}-resolve",
                                                         initializer=unguard_thread))
        try:
            loop.run_until_complete(self._setup(sock))
        except BaseException as exc:
            sock.close()
            loop.close()
            self._closed()
            ready.set_exception(exc)
            return
        ready.set_result(None)
        loop.run_forever()
        loop.run_until_complete(self._cleanup())
        loop.close()
        self._closed()

    def stop(self) -> bool:
        """Stop the loop, let the cleanup run and join the thread; False when it was not running."""
        thread, loop = self.thread, self.loop
        if thread is None or loop is None:
            return False
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self.thread = self.loop = None
        return True
