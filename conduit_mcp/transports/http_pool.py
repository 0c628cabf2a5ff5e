"""The HTTP transport's connection pools and their idle connections (docs/connection.md,
"Idle connections"; the rules are :mod:`conduit_mcp.protocol.http_reuse`).

* :class:`Pool`: a connection pool (an aiohttp connector) whose idle connections are
  dropped after ``Http.keep_alive`` seconds (aiohttp keeps them 15 s; uvicorn, hypercorn and
  Node close them after 5 s), and an aiohttp client middleware. The connector notes which
  connection each attempt got and whether that connection had carried an answer before (a
  reused one); the middleware notes when answers went back to the pool, sends a request
  again when it failed on a reused connection idle long enough, before any byte of the
  answer arrived (the server closed that idle connection as the request went out: it never
  ran it), and lowers the pool's idle limit when the server announces a shorter one
  (``Keep-Alive: timeout=N``).

How long the failed connection had been idle is bounded from below: it went back to the
pool no later than the last answer did (noted when each answer is released; the answer
that released the failed connection was noted before this failure came, as the loop runs
callbacks in order). When any answer was released after the request went out, the bound
is negative: nothing is sent again (a busy pool is no idle one).

The middleware wraps each hop (redirects within the origin included) and runs on the I/O
loop, in the request's task; it first runs the pool's ``guard`` on the hop (the transport's
same-origin rule, :func:`~.http_wire.same_origin_only`): one middleware instead of two,
as aiohttp builds its chain of closures and coroutines afresh for every hop (measured:
benchmarks/http_switches.py, docs/performance.md); the connector's ``connect``, awaited in that same task, finds
the hop's record through a context variable. (aiohttp's trace signals would tell "reused"
too, but cost a tenth of a fast server's request rate.)
"""

from __future__ import annotations

import errno
import logging
import time
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.connector import Connection
from aiohttp.tracing import Trace

from ..protocol.http_reuse import Failure, announced_timeout, idle_limit, may_resend

log = logging.getLogger("conduit_mcp.http")

# Resets that end a connection the server closed (or was closing) as the request arrived.
_RESETS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED})


class _Hop:
    """One attempt: the connection it got, and whether that one had carried an answer."""

    __slots__ = ("proto", "reused")

    def __init__(self) -> None:
        self.proto: ResponseHandler | None = None
        self.reused = False


_HOP: ContextVar[_Hop | None] = ContextVar("conduit_mcp_http_hop", default=None)


class _Connector(aiohttp.TCPConnector):
    """aiohttp's pool, telling the current hop which connection it got (``connect`` is the
    connector's documented entry point)."""

    def __init__(
        self,
        served: weakref.WeakSet[ResponseHandler],
        on_connect: Callable[[], None] | None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._served = served
        self._on_connect = on_connect

    async def connect(
        self, req: aiohttp.ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        if self._on_connect is not None:
            self._on_connect()
        hop = _HOP.get()
        proto = conn.protocol
        if proto is not None:
            _small_reads(proto.transport)
        if hop is not None and proto is not None:
            hop.proto = proto
            hop.reused = proto in self._served
        return conn


#: Bytes asked of one ``recv`` of a plain-TCP connection. asyncio's socket transport asks
#: 256 KiB, and ``recv`` allocates that much before every call: over glibc's mmap threshold
#: (128 KiB), so each one mapped and unmapped its buffer. Measured on a socket pair holding
#: a 300-byte answer: 128 us a recv at 256 KiB, 15 us at 64 KiB (the stdio reader's
#: ``process.READ_SIZE`` likewise). TLS transports read through their own buffer: untouched.
READ_SIZE = 64 * 1024


def _small_reads(transport: Any) -> None:
    if transport is not None and getattr(transport, "max_size", 0) > READ_SIZE:
        transport.max_size = READ_SIZE


def failure_of(exc: BaseException) -> tuple[Failure, bool]:
    """How a connection failed before its answer's head, and whether any byte of the answer
    had arrived (aiohttp names the part of a head it got in ``ServerDisconnectedError``; a
    reset says nothing of bytes received, and a server that began an answer does not reset
    it: read as none)."""
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "disconnected", not isinstance(exc.message, str)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "other", False  # never a reused connection: no connection was made
    if isinstance(exc, aiohttp.ClientConnectionResetError):
        return "reset", False  # written to a connection already closing
    if isinstance(exc, aiohttp.ClientOSError):
        if exc.errno in _RESETS:
            return "reset", False
        if exc.errno is None and isinstance(exc.__cause__, ConnectionResetError):
            # aiohttp's "Can not write request body": the body met a closing connection.
            return "reset", False
    return "other", False


class Pool:
    """One session's connector and middleware (the module's docstring)."""

    def __init__(self, keep_alive: float, on_connect: Callable[[], None] | None = None) -> None:
        self.keep_alive = keep_alive
        #: Run on each hop before anything is sent; raises to refuse it (the transport's
        #: same-origin rule, set before the first request). None: every hop goes.
        self.guard: Callable[[aiohttp.ClientRequest], None] | None = None
        # Told on the I/O loop each time a request got a connection (the transport's
        # "a connection was made": a deadline before it is no era evidence, docs/tls.md).
        self._on_connect = on_connect
        self.connector: aiohttp.TCPConnector | None = None
        # The connections that carried an answer: one of them handed out again is a reuse.
        # Made with the first connector (a WeakSet is ~0.9 KiB, and a client's pool for
        # long-lived streams usually never makes one).
        self._served: weakref.WeakSet[ResponseHandler] | None = None
        # When a connection last went back to the pool, or was closed after its answer
        # (monotonic; I/O loop).
        self._last_release: float | None = None

    def new_connector(self, limit: int, **options: Any) -> aiohttp.TCPConnector:
        """This pool's connector: at most ``limit`` connections, idle ones kept
        ``keep_alive`` seconds (``options``: more ``TCPConnector`` arguments)."""
        served = self._served
        if served is None:
            served = self._served = weakref.WeakSet()
        self.connector = _Connector(
            served,
            self._on_connect,
            limit=limit,
            limit_per_host=0,
            keepalive_timeout=self.keep_alive,
            **options,
        )
        return self.connector

    async def middleware(
        self, request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        guard = self.guard
        if guard is not None:
            guard(request)  # before anything of this hop is sent (a re-send is the same hop)
        resends = 0
        while True:
            hop = _Hop()
            token = _HOP.set(hop)
            started = time.monotonic()
            try:
                resp = await handler(request)
            except (
                aiohttp.ServerDisconnectedError,
                aiohttp.ClientOSError,
                aiohttp.ClientConnectionResetError,
            ) as exc:
                failure, answered = failure_of(exc)
                idle = self._idle_at_least(started) if hop.reused else None
                if not may_resend(
                    reused=hop.reused,
                    idle=idle,
                    answered=answered,
                    failure=failure,
                    resends=resends,
                ):
                    log.debug(
                        "a request's connection closed before its answer; not sent again "
                        "(%s errno=%s, reused=%s, idle at least %s s, answered=%s, resends=%d)",
                        type(exc).__name__,
                        getattr(exc, "errno", None),
                        hop.reused,
                        None if idle is None else round(idle, 3),
                        answered,
                        resends,
                    )
                    raise
                resends += 1
                log.debug(
                    "a request was sent again: its pooled connection closed before any "
                    "answer (%s; the server had closed it as idle)",
                    type(exc).__name__,
                )
                continue
            finally:
                _HOP.reset(token)
            # A reused connection is in the set already (the connector read it there): adding
            # it again would make and drop a weak reference per request.
            if hop.proto is not None and not hop.reused and self._served is not None:
                self._served.add(hop.proto)
            self._track(resp)
            self._learn(resp)
            return resp

    def _track(self, resp: aiohttp.ClientResponse) -> None:
        """Note when this response's connection goes back to the pool: now if it already
        has (a short answer is released as soon as it is read), else when it does."""
        conn = resp.connection
        if conn is None:
            self._stamp()
        else:
            conn.add_callback(self._stamp)

    def _stamp(self) -> None:
        self._last_release = time.monotonic()

    def _idle_at_least(self, started: float) -> float | None:
        """A lower bound of how long the reused connection that just failed had been idle
        when the request went out (the module's docstring); None if none is known."""
        last = self._last_release
        return None if last is None else started - last

    def _learn(self, resp: aiohttp.ClientResponse) -> None:
        """Lower the pool's idle limit to what the server announced, if shorter.

        aiohttp has one idle limit per pool (``TCPConnector(keepalive_timeout=)``) and no
        setter for it: its attribute is lowered in place (the pool serves one origin, so one
        server's limit is the pool's). An aiohttp without that attribute keeps ours, and the
        re-send rule still covers the race."""
        values = resp.headers.getall("Keep-Alive", ())
        if not values or self.connector is None:
            return
        limit = idle_limit(self.keep_alive, announced_timeout(values))
        current = getattr(self.connector, "_keepalive_timeout", None)
        if isinstance(current, (int, float)) and limit < current:
            self.connector._keepalive_timeout = limit
