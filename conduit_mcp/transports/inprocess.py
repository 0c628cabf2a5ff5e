"""The in-process transport: a server object served on a thread of its own, in this process.

It keeps the transport contract (:mod:`.base`) the stdio transport keeps, with a thread and
an event loop where stdio has a pipe and a subprocess: the connection's ``send`` encodes the
message (the same ``argument`` error for what is not JSON) and hands the bytes to the
server's loop; each frame the server sends comes back as bytes, is checked against
``max_frame``, decoded, and answered straight to its caller through the connection's pending
table, like a line read from stdout. No object is shared between client and server.

Why a thread per connection and not the client's I/O loop: the server's code is the user's
(a tool that blocks, a slow lifespan), and the I/O loop is shared by every client of the
process and runs no user code (docs/architecture.md). The caller's thread and the actors
never wait on the server either: everything is told, as over a pipe.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pykka

from ..errors import Error
from ..otp.base import safe_tell
from ..protocol.jsonrpc import ID_SCAN, Invalid, decode, encode_kept, response_id
from ..protocol.listen import is_listen_control
from ..protocol.messages import cancelled
from .base import (
    FrameProblem,
    Inbound,
    RequestFailed,
    StreamMessages,
    StreamSink,
    TransportDown,
    TransportUp,
)
from .inprocess_servers import Exited, Session, open_session
from .inprocess_spec import InProcess

log = logging.getLogger("conduit_mcp.inprocess")

__all__ = ["InProcess", "InProcessTransport"]


class InProcessTransport:
    """One session of an in-process server (a reconnect opens a new one)."""

    # The probe classifier's rules are stdio's: messages only, no HTTP statuses.
    kind = "stdio"

    def __init__(
        self,
        spec: InProcess,
        owner: pykka.ActorRef[Any],
        gen: int,
        *,
        max_frame: int,
        pending: Any = None,
        max_answer_backlog: int = 1024 * 1024,
    ) -> None:
        self._spec = spec
        self._owner = owner
        self._gen = gen
        self.gen = gen
        self._max_frame = max_frame
        self._pending = pending
        self._max_answers = max_answer_backlog
        self._lock = threading.Lock()
        # Frames sent before the session started (under _lock), then None: sends go to the
        # server's loop directly from then on, in order.
        self._early: list[bytes] | None = []
        # Bytes handed to the server it has not read yet (under _lock): what a pipe would
        # hold. A server that stops reading makes answers to its requests drop, counted.
        self._unread = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Session | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self._down = False
        self._gone = threading.Event()
        self._sink: StreamSink | None = None
        self._sink_key: object = None
        self._tags: set[str] = set()

    def __repr__(self) -> str:
        return f"<InProcessTransport gen={self._gen} server={self._spec!r}>"

    # -- called from the connection's thread ------------------------------------------------

    def connect(self) -> None:
        thread = threading.Thread(target=self._main, name="conduit-mcp-inprocess", daemon=True)
        self._thread = thread
        thread.start()

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(encode_kept(message))  # raises Error("argument") before anything queues

    def send_answer(self, message: dict[str, Any]) -> None:
        """An answer to a server request: dropped (and counted) while the server has not
        read ``max_answer_backlog`` bytes, as over a pipe it has stopped reading."""
        data = encode_kept(message)
        with self._lock:
            if self._unread and self._unread + len(data) > self._max_answers:
                drops = getattr(self._pending, "drops", None)
                if drops is not None:
                    drops.add("answer")
                return
        self.send_bytes(data)

    def send_bytes(self, data: bytes) -> None:
        with self._lock:
            self._unread += len(data)
            early = self._early
            if early is not None:
                early.append(data)
                return
            loop = self._loop
        if loop is not None and not self._down:
            try:
                loop.call_soon_threadsafe(self._feed, data)
            except RuntimeError:
                pass  # the server's loop has ended: like a write to a closed pipe

    def cancel(self, request_id: int | str, reason: str) -> None:
        self.send(cancelled(request_id, reason))

    def open_stream(
        self,
        tag: str,
        message: dict[str, Any] | None,
        sink: StreamSink,
        last_event_id: str | None = None,
    ) -> None:
        """As over stdio: the listen request goes to the server, and the messages of a
        listen's life go to ``sink``; a new sink supersedes the old one's listens."""
        if message is None:
            return
        key = getattr(sink, "actor_urn", None) or id(sink)
        if self._sink_key is not None and key != self._sink_key:
            for old in self._tags:
                self.send(cancelled(old, "listen_closed"))
            self._tags.clear()
        self._sink, self._sink_key = sink, key
        self._tags.add(tag)
        self.send(message)

    def close_stream(self, tag: str) -> None:
        if tag in self._tags:
            self._tags.discard(tag)
            self.send(cancelled(tag, "listen_closed"))

    def close(self) -> None:
        self._closing = True
        loop, stop = self._loop, self._stop
        if self._thread is None:
            self._gone.set()  # never connected
            return
        if loop is not None and stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:
                pass  # already ended

    def stderr(self) -> bytes:
        return b""  # an in-process server has no stderr of its own

    def negotiated(self, era: str, version: str) -> None:
        """Nothing to do: the version travels only in the messages."""

    def wait_closed(self, timeout: float) -> bool:
        """Block (a caller's thread, never an actor's) until the session's thread is done."""
        return self._gone.wait(timeout)

    # -- the server's thread ----------------------------------------------------------------

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # never a traceback on a thread nobody joins
            log.warning("in-process server thread ended: %s", type(exc).__name__)
            self._report_down("exit", type(exc).__name__)
        finally:
            self._gone.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.set_exception_handler(_log_exception)
        self._stop = asyncio.Event()
        if self._closing:
            self._report_down("closed", None)
            return
        session = open_session(self._spec.server)
        self._session = session
        try:
            await session.start(self._on_frame, self._on_server_down)
        except Exception as exc:
            # The class only: the server's exception text is its own and may hold anything.
            self._report_down("session_failed", type(exc).__name__)
            await session.close(0.0)
            return
        with self._lock:
            early, self._early = self._early or [], None
        if not self._closing:
            safe_tell(self._owner, TransportUp(self._gen))
        for data in early:
            self._feed(data)
        if not self._closing:
            await self._stop.wait()
        await session.close(self._spec.close_grace)
        self._report_down("closed", None)

    def _feed(self, data: bytes) -> None:
        session = self._session
        if session is not None and session.receive(data):
            with self._lock:
                self._unread -= len(data)

    def _on_server_down(self, reason: str, detail: str | None) -> None:
        """The server ended by itself (``exit``) or can no longer answer
        (``output_closed``): what is pending fails with ``transport`` and the connection
        reconnects to a fresh session."""
        if self._closing:
            return
        self._report_down(reason, detail)
        if reason == "exit" and self._stop is not None:
            self._stop.set()

    def _report_down(self, reason: str, detail: str | None) -> None:
        if self._down:
            return
        self._down = True
        safe_tell(self._owner, TransportDown(self._gen, reason, detail))

    def _on_frame(self, frame: bytes) -> None:
        """One frame from the server: what a line of a stdio server's stdout is."""
        if self._down:
            return
        if len(frame) > self._max_frame:
            self._oversize(frame)
            return
        msg = decode(frame)
        if isinstance(msg, Invalid):
            safe_tell(self._owner, FrameProblem(self._gen, "malformed", msg.reason))
            return
        messages: list[Any] = [msg]
        pending = self._pending
        if pending is not None:
            messages = pending.deliver(messages)
        sink = self._sink
        if sink is not None and messages:
            messages = self._to_sink(sink, messages)
        if messages and pending is not None:
            messages = pending.admit(messages)  # the flood bound (max_inbox)
        if messages:
            safe_tell(self._owner, Inbound(self._gen, messages))

    def _oversize(self, frame: bytes) -> None:
        """A frame over ``max_frame``: a response fails its request at once (as over stdio);
        anything else is reported and dropped."""
        rid = response_id(frame[:ID_SCAN])
        if rid is None:
            safe_tell(self._owner, FrameProblem(self._gen, "oversize", len(frame)))
            return
        limit = self._max_frame
        error = Error(
            "protocol",
            "response_too_large",
            f"the server's response is over max_frame ({limit} bytes); "
            "raise the client's max_frame option to accept larger responses",
            data={"limit": limit},
        )
        safe_tell(self._owner, RequestFailed(self._gen, rid, error))

    def _to_sink(self, sink: StreamSink, messages: list[Any]) -> list[Any]:
        listen = [m for m in messages if is_listen_control(m)]
        if not listen:
            return messages
        try:
            sink.tell(StreamMessages(self._gen, None, listen))
        except pykka.ActorDeadError:
            self._sink = None
        return [m for m in messages if not is_listen_control(m)]


def _log_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """What escapes the server's tasks: the type only (a context may hold its arguments); a
    scripted server's ``exit`` unwinding a task is its end, already reported."""
    exc = context.get("exception")
    if isinstance(exc, Exited):
        return
    log.warning("in-process server error: %s (%s)", context.get("message"), type(exc).__name__)
