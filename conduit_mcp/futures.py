"""The Pykka front end: the same API as ``Client``, every request returning a
``pykka.Future`` at once, so an actor calling it never blocks its own thread."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pykka

from .actors.events import Call
from .api import _Front, _Request, _timeout
from .errors import Error
from .replies import FutureReply
from .telemetry import Operation

if TYPE_CHECKING:
    from .client import Client


class FutureClient(_Front[Any]):
    """The same API for Pykka actors: every request method returns a ``pykka.Future`` at
    once, so an actor never blocks its own thread; ``get()`` it later, or from elsewhere.

    ``on_progress`` here is a ``pykka.ActorRef``: it is told
    ``("conduit_mcp.progress", request_id, params)`` for each progress notification.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    def __repr__(self) -> str:
        return f"<conduit_mcp.FutureClient {self._client.name!r}>"

    def _do(self, req: _Request, timeout: float | None, on_progress: Any = None) -> Any:
        runtime = self._client._runtime()
        seconds = _timeout(timeout, runtime.config.request_timeout)
        if on_progress is not None and not isinstance(on_progress, pykka.ActorRef):
            raise Error("argument", "on_progress", "on_progress must be a pykka.ActorRef here")
        future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
        op = runtime.telemetry.start(req.method, req.params)
        if op is None:  # nothing to record or propagate (no OpenTelemetry SDK)
            self._client._tell(
                runtime,
                Call(
                    req.method,
                    req.params,
                    time.monotonic() + seconds,
                    FutureReply(future, on_progress),
                    on_progress is not None,
                ),
            )
            return future.map(req.parse)
        reply = _TimedFutureReply(future, on_progress)
        try:
            self._client._tell(
                runtime,
                Call(
                    req.method,
                    op.params,
                    time.monotonic() + seconds,
                    reply,
                    on_progress is not None,
                ),
            )
        except BaseException as exc:
            op.finish(None, exc, None)
            raise
        return _finishing(future, reply, op, req.parse)


class _TimedFutureReply(FutureReply):
    """A ``FutureReply`` that notes when the answer arrived (two clock reads in the
    connection: no user code), so the span and duration can end at that instant although
    they are finished later, in the thread that reads the future."""

    __slots__ = ("answered",)

    def __init__(
        self, future: pykka.ThreadingFuture[Any], progress_to: pykka.ActorRef[Any] | None
    ) -> None:
        super().__init__(future, progress_to)
        self.answered: tuple[int, float] | None = None

    def ok(self, result: Any) -> None:
        if not self.done:
            self.answered = (time.time_ns(), time.perf_counter())
        super().ok(result)

    def fail(self, error: Error) -> None:
        if not self.done:
            self.answered = (time.time_ns(), time.perf_counter())
        super().fail(error)


def _finishing(
    inner: pykka.ThreadingFuture[Any],
    reply: _TimedFutureReply,
    op: Operation,
    parse: Callable[[Any], Any],
) -> pykka.ThreadingFuture[Any]:
    """Like ``inner.map(parse)`` (a get hook: it runs in the thread calling ``get()``), and
    the first ``get()`` after the answer also ends the span and records the duration, timed
    at the answer's arrival. Why here and not when the answer arrives: that happens in the
    connection actor, which must not run span processors (application code). A future that
    is never read never ends its span (it is never exported)."""

    def get(timeout: float | None) -> Any:
        try:
            raw = inner.get(timeout=timeout)
        except pykka.Timeout:
            raise  # our own wait ran out: the request is still going
        except BaseException as exc:
            if reply.answered is not None:  # the answer was a failure (not an interrupt)
                op.finish(None, exc, reply.request_id, answered=reply.answered)
            raise
        try:
            value = parse(raw)
        except BaseException as exc:
            op.finish(raw, exc, reply.request_id, answered=reply.answered)
            raise
        op.finish(raw, None, reply.request_id, answered=reply.answered)
        return value

    out: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
    out.set_get_hook(get)
    return out
