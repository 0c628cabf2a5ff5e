"""The public handler API: what the client answers when the server asks, and where server
notifications and logs go.

A :class:`Handler` subclass implements any of five methods, each a plain ``def`` or an
``async def``. The client runs them in its handler actor, never in the connection
(docs/connection.md, "Server-to-client requests"): plain methods on a bounded pool of
threads, coroutines on an event loop the handler actor owns. The client's capabilities are
derived from the methods a subclass implements, once, at start
(:func:`conduit_mcp.protocol.client_caps.client_capabilities`).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .handler_types import ElicitRequest, ElicitResult, Root, SamplingRequest, SamplingResult

__all__ = ["SERVING_METHODS", "Declined", "Handler", "HandlerContext"]

#: The server request each serving method answers (the notification methods answer none).
SERVING_METHODS: Mapping[str, str] = {
    "sampling/createMessage": "create_message",
    "elicitation/create": "elicit",
    "roots/list": "list_roots",
}
_NOTIFICATION_METHODS = ("handle_notification", "handle_log")
_METHODS = (*SERVING_METHODS.values(), *_NOTIFICATION_METHODS)


class Declined(Exception):
    """Raised by ``create_message`` (or ``list_roots``) when the user declines the request.

    The server is answered with the protocol's "user rejected" error (code ``-1``) in the
    legacy era; a modern call fails with ``Error("handler", "declined")``. Whatever text it
    carries stays in the client: the server only hears that the user declined. An
    ``elicit`` that raises it answers ``decline`` (a declined elicitation is an answer).

    >>> raise Declined()
    Traceback (most recent call last):
    ...
    conduit_mcp.handler.Declined
    """


@dataclass(frozen=True, slots=True, repr=False)
class HandlerContext:
    """What a handler method knows about the request it serves, besides its params.

    ``server_info`` is the server's ``conduit_mcp.ServerInfo`` (None before the first
    handshake); ``era`` is ``"legacy"`` or ``"modern"``. ``request_id`` is the server's
    JSON-RPC id (legacy) or the ``inputRequests`` key (modern); ``related_method`` and
    ``related_id`` name the client's call this request belongs to, when known. ``cancelled``
    is set when the server cancels the request, the ``handler_timeout`` passes or the client
    stops: a plain method that runs long should check it (a thread cannot be stopped from
    outside); an ``async def`` method is also cancelled.

    >>> ctx = HandlerContext("c1", "legacy", None, 7)
    >>> ctx.cancelled.is_set(), ctx
    (False, <HandlerContext c1 legacy request_id=7>)
    """

    client_name: str
    era: str
    server_info: Any = None
    request_id: Any = None
    related_method: str | None = None
    related_id: Any = None
    cancelled: threading.Event = field(default_factory=threading.Event)

    def __repr__(self) -> str:
        return f"<HandlerContext {self.client_name} {self.era} request_id={self.request_id!r}>"


class Handler:
    """Subclass it and implement what the client should answer; every method is optional,
    and each may be ``def`` or ``async def``.

    Pass an instance as ``conduit_mcp.Client.start(..., handler=MyHandler())``. The methods
    a subclass implements decide the client's capabilities: ``create_message`` declares
    ``sampling``, ``elicit`` declares ``elicitation`` (with the modes of
    :attr:`elicitation_modes`), ``list_roots`` declares ``roots``. A server request for a
    method the subclass lacks is refused (``-32601``). Methods run concurrently (up to
    ``max_server_requests`` at once), each bounded by ``handler_timeout``;
    ``handle_notification`` and ``handle_log`` run one at a time, in the order the
    notifications arrived. What a method raises is logged (its type, never its text or the
    params) and answered as an error: it never takes the client down.

    >>> class Assistant(Handler):
    ...     def create_message(self, request, ctx):
    ...         return SamplingResult("Paris", model="echo")
    ...     async def elicit(self, request, ctx):
    ...         return ElicitResult.decline()
    >>> sorted(Assistant.implemented_methods())
    ['create_message', 'elicit']
    """

    #: The elicitation modes this handler's ``elicit`` serves: ``"form"``, ``"url"`` or
    #: both. A request in another mode is refused (``-32602``) before ``elicit`` runs.
    elicitation_modes: ClassVar[tuple[str, ...]] = ("form",)

    @classmethod
    def implemented_methods(cls) -> frozenset[str]:
        """The handler methods this class defines (overrides), by name: what the client's
        capabilities are derived from, and what the handler actor will call.

        >>> class Roots(Handler):
        ...     def list_roots(self, ctx):
        ...         return ["file:///srv"]
        >>> Roots.implemented_methods()
        frozenset({'list_roots'})
        >>> Handler.implemented_methods()
        frozenset()
        """
        return frozenset(
            name for name in _METHODS if getattr(cls, name, None) is not getattr(Handler, name)
        )

    def create_message(
        self, request: SamplingRequest, ctx: HandlerContext
    ) -> SamplingResult | Mapping[str, Any] | Awaitable[SamplingResult | Mapping[str, Any]]:
        """Sample a message for the server (``sampling/createMessage``): return a
        :class:`~conduit_mcp.SamplingResult` (or the protocol's ``CreateMessageResult``
        dict), or raise :class:`Declined` when the user refuses. Here the test server's
        ``ask`` tool sends one ``sampling/createMessage`` and reports the answer:

        >>> import sys
        >>> import conduit_mcp as mcp
        >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
        >>> class Model(mcp.Handler):
        ...     def create_message(self, request, ctx):
        ...         return mcp.SamplingResult("Paris", model="my-model")
        >>> ask = {"method": "sampling/createMessage", "params": {"maxTokens": 9, "messages": [
        ...     {"role": "user", "content": {"type": "text", "text": "Capital of France?"}}]}}
        >>> with mcp.Client.start(server, protocol="legacy", handler=Model()) as client:
        ...     answer = client.call_tool("ask", {"requests": [ask]}).structured_content
        >>> answer["answers"][0]["result"]["content"]["text"]
        'Paris'
        """
        raise NotImplementedError

    def elicit(
        self, request: ElicitRequest, ctx: HandlerContext
    ) -> ElicitResult | Mapping[str, Any] | Awaitable[ElicitResult | Mapping[str, Any]]:
        """Ask the user (``elicitation/create``): return an
        :class:`~conduit_mcp.ElicitResult` (accept with content, decline, cancel) or the
        protocol's ``ElicitResult`` dict. Fields of the requested schema left out of an
        ``accept`` are sent with their defaults:

        >>> import sys
        >>> import conduit_mcp as mcp
        >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
        >>> class Person(mcp.Handler):
        ...     async def elicit(self, request, ctx):
        ...         return mcp.ElicitResult.accept({"name": "ada"})
        >>> schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        >>> ask = {"method": "elicitation/create",
        ...        "params": {"message": "Name?", "requestedSchema": schema}}
        >>> with mcp.Client.start(server, protocol="legacy", handler=Person()) as client:
        ...     answer = client.call_tool("ask", {"requests": [ask]}).structured_content
        >>> answer["answers"][0]["result"]
        {'action': 'accept', 'content': {'name': 'ada'}}
        """
        raise NotImplementedError

    def list_roots(
        self, ctx: HandlerContext
    ) -> (
        Iterable[Root | str | Mapping[str, Any]]
        | Awaitable[Iterable[Root | str | Mapping[str, Any]]]
    ):
        """The client's roots (``roots/list``): :class:`~conduit_mcp.Root` values,
        ``file://`` URI strings, or ``{"uri": ..., "name": ...}`` dicts. When they change,
        call ``client.roots_changed()``.

        >>> import sys
        >>> import conduit_mcp as mcp
        >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
        >>> class Project(mcp.Handler):
        ...     def list_roots(self, ctx):
        ...         return [mcp.Root("file:///home/me/project", "project")]
        >>> with mcp.Client.start(server, protocol="legacy", handler=Project()) as client:
        ...     answer = client.call_tool("ask", {"requests": [{"method": "roots/list"}]})
        >>> answer.structured_content["answers"][0]["result"]
        {'roots': [{'uri': 'file:///home/me/project', 'name': 'project'}]}
        """
        raise NotImplementedError

    def handle_notification(
        self, method: str, params: dict[str, Any] | None, ctx: HandlerContext
    ) -> Awaitable[None] | None:
        """A server notification (every one but ``notifications/message``, which goes to
        :meth:`handle_log`, and progress and cancellation, which the client handles), in
        arrival order. The default ignores it.

        >>> import sys
        >>> import conduit_mcp as mcp
        >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
        >>> import queue
        >>> class Notes(mcp.Handler):
        ...     def __init__(self):
        ...         self.seen = queue.Queue()
        ...     def handle_notification(self, method, params, ctx):
        ...         self.seen.put(method)
        >>> notes = Notes()
        >>> with mcp.Client.start(server, protocol="legacy", handler=notes) as client:
        ...     _ = client.call_tool("notify", {"method": "test/hello"})
        ...     notes.seen.get(timeout=10)
        'test/hello'
        """
        return None

    def handle_log(
        self, level: str, data: Any, logger: str | None, ctx: HandlerContext
    ) -> Awaitable[None] | None:
        """A server log message (``notifications/message``): its ``level``, ``data`` and
        optional ``logger`` name, as the server sent them (untrusted: the Python logging
        copy on ``conduit_mcp.server.<client name>`` is the escaped, bounded one), in
        arrival order. The default ignores it. ``client.set_logging_level`` asks for them:

        >>> import sys
        >>> import conduit_mcp as mcp
        >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
        >>> import queue
        >>> class Logs(mcp.Handler):
        ...     def __init__(self):
        ...         self.seen = queue.Queue()
        ...     def handle_log(self, level, data, logger, ctx):
        ...         self.seen.put((level, data))
        >>> logs = Logs()
        >>> with mcp.Client.start(server, protocol="legacy", handler=logs) as client:
        ...     client.set_logging_level("info")
        ...     _ = client.call_tool("log", {"level": "info", "data": "hello"})
        ...     logs.seen.get(timeout=10)
        ('info', 'hello')
        """
        return None
