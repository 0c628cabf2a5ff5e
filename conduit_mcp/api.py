"""The request API, written once: argument checks, request builders and the ``_Front`` base
whose methods (``call_tool``, ``list_tools``, ...) each front end inherits, supplying only
``_do`` (how the caller waits: a blocked thread, an awaiting task, a Pykka future).

Arguments are checked here, in the caller, so a bad one is an ``Error("argument")`` raised
where the mistake is, never a failure inside the connection.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pykka

from .actors.events import Abandon
from .errors import Error
from .protocol.results import (
    parse_call_tool,
    parse_complete,
    parse_get_prompt,
    parse_page,
    parse_progress,
    parse_read_resource,
)
from .replies import Reply
from .types import (
    Page,
    Progress,
)

if TYPE_CHECKING:
    from .client import Client

T = TypeVar("T")

# How long a blocked caller waits past its deadline for the connection's own `timeout`
# answer (which comes after the server was told to cancel) before giving up by itself.
_GRACE = 1.0
# A server whose cursors never end would make list_all_* loop forever.
MAX_PAGES = 1000

_LISTS = {
    "tools": "tools/list",
    "prompts": "prompts/list",
    "resources": "resources/list",
    "resource_templates": "resources/templates/list",
}


def _copy(error: Error) -> Error:
    # One Error instance may be shared by every request a broken connection failed; each
    # caller raises its own copy so tracebacks of different threads never mix.
    return Error(error.kind, error.reason, error.message, code=error.code, data=error.data)


def _timeout(value: float | None, default: float) -> float:
    if value is None:
        return default
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise Error("argument", "timeout", "timeout must be a positive number of seconds")
    return float(value)


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise Error("argument", what, f"{what} must be a non-empty string")
    return value


def _mapping(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise Error("argument", what, f"{what} must be a mapping with string keys")
    return dict(value)


def _progress_value(params: dict[str, Any]) -> Progress:
    parsed = parse_progress(params)
    if parsed is None:
        return Progress(0.0, None, None)
    return parsed[1]


class _Request:
    """A request description shared by the three front ends."""

    __slots__ = ("method", "params", "parse")

    def __init__(
        self, method: str, params: dict[str, Any] | None, parse: Callable[[Any], Any]
    ) -> None:
        self.method = method
        self.params = params
        self.parse = parse


def _identity(result: Any) -> Any:
    return result


def _none(result: Any) -> None:
    return None


def _tool_call(name: str, arguments: Any, meta: Any) -> _Request:
    params: dict[str, Any] = {"name": _name(name, "name")}
    args = _mapping(arguments, "arguments")
    if args is not None:
        params["arguments"] = args
    extra = _mapping(meta, "meta")
    if extra:
        params["_meta"] = extra
    return _Request("tools/call", params, parse_call_tool)


def _page_request(kind: str, cursor: str | None) -> _Request:
    if cursor is not None and not isinstance(cursor, str):
        raise Error("argument", "cursor", "cursor must be a string or None")
    params = None if cursor is None else {"cursor": cursor}

    def parse(result: Any) -> Page:
        return parse_page(kind, result)

    return _Request(_LISTS[kind], params, parse)


def _prompt_request(name: str, arguments: Any) -> _Request:
    params: dict[str, Any] = {"name": _name(name, "name")}
    args = _mapping(arguments, "arguments")
    if args is not None:
        if not all(isinstance(v, str) for v in args.values()):
            raise Error("argument", "arguments", "prompt arguments must be strings")
        params["arguments"] = args
    return _Request("prompts/get", params, parse_get_prompt)


def _complete_request(ref: Any, argument: Any, context: Any) -> _Request:
    ref_ = _mapping(ref, "ref")
    arg = _mapping(argument, "argument")
    if not ref_ or ref_.get("type") not in ("ref/prompt", "ref/resource"):
        raise Error("argument", "ref", "ref must be {'type': 'ref/prompt'|'ref/resource', ...}")
    if not arg or not isinstance(arg.get("name"), str) or not isinstance(arg.get("value"), str):
        raise Error("argument", "argument", "argument must be {'name': str, 'value': str}")
    params: dict[str, Any] = {"ref": ref_, "argument": arg}
    ctx = _mapping(context, "context")
    if ctx is not None:
        params["context"] = ctx
    return _Request("completion/complete", params, parse_complete)


class _Front(Generic[T]):
    """The API surface, written once; each front end supplies ``_do`` (how to wait)."""

    _client: Client

    def _do(
        self, req: _Request, timeout: float | None, on_progress: Any = None
    ) -> Any:  # pragma: no cover - each front end overrides
        raise NotImplementedError

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: Any = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Any:
        """Call a tool; a result with ``is_error`` is a result, not an exception."""
        return self._do(_tool_call(name, arguments, meta), timeout, on_progress)

    def list_tools(self, cursor: str | None = None, *, timeout: float | None = None) -> Any:
        """One page of tools (``Page.next_cursor`` is None on the last page)."""
        return self._do(_page_request("tools", cursor), timeout)

    def list_prompts(self, cursor: str | None = None, *, timeout: float | None = None) -> Any:
        """One page of prompts."""
        return self._do(_page_request("prompts", cursor), timeout)

    def list_resources(self, cursor: str | None = None, *, timeout: float | None = None) -> Any:
        """One page of resources."""
        return self._do(_page_request("resources", cursor), timeout)

    def list_resource_templates(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Any:
        """One page of resource templates."""
        return self._do(_page_request("resource_templates", cursor), timeout)

    def read_resource(self, uri: str, *, timeout: float | None = None) -> Any:
        """``resources/read`` for one URI."""
        return self._do(
            _Request("resources/read", {"uri": _name(uri, "uri")}, parse_read_resource), timeout
        )

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """``prompts/get``; prompt arguments are strings (spec)."""
        return self._do(_prompt_request(name, arguments), timeout)

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """``completion/complete`` for a prompt or resource-template argument."""
        return self._do(_complete_request(ref, argument, context), timeout)

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: Any = None,
    ) -> Any:
        """Any request by method name; returns the raw result (a dict)."""
        return self._do(
            _Request(_name(method, "method"), _mapping(params, "params"), _identity),
            timeout,
            on_progress,
        )

    def ping(self, *, timeout: float | None = None) -> Any:
        """A liveness round trip: ``ping`` in the legacy era, ``server/discover`` in the modern
        one (which has no ping)."""
        status = self._client.status()
        method = "server/discover" if status.era == "modern" else "ping"
        return self._do(_Request(method, None, _none), timeout)


def _abandon(conn: pykka.ActorRef[Any], reply: Reply, reason: str = "caller_down") -> None:
    try:
        conn.tell(Abandon(reply, reason))
    except pykka.ActorDeadError:
        pass


class PageWalk:
    """Following cursors to the last page, written once for the blocking and the asyncio
    ``list_all_*`` (they differ only in how they wait for a page). One deadline bounds the
    whole walk; a server whose cursors never end is cut at ``MAX_PAGES``.
    """

    __slots__ = (
        "kind",
        "deadline",
        "items",
        "cursor",
        "pages",
        "done",
        "raws",
        "started",
        "credential",
    )

    def __init__(self, kind: str, seconds: float, credential: str | None = None) -> None:
        self.kind = kind
        self.started = time.monotonic()
        self.deadline = self.started + seconds
        self.items: list[Any] = []
        self.cursor: str | None = None
        self.pages = 0
        self.done = False
        # For the cache: each page's raw result (ttlMs, cacheScope) and the credential
        # identity the walk started under (seed 003).
        self.raws: list[Any] = []
        self.credential = credential

    def next(self) -> tuple[_Request, float]:
        """The next page's request and the time left for it."""
        if self.pages >= MAX_PAGES:
            raise Error(
                "protocol", "too_many_pages", f"{self.kind} list has more than {MAX_PAGES} pages"
            )
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise Error("timeout", "deadline", f"listing {self.kind} took past its deadline")
        return _page_request(self.kind, self.cursor), remaining

    def add(self, page: Page) -> None:
        self.pages += 1
        self.items.extend(page.items)
        self.raws.append(page.raw)
        # An empty-string cursor is a real cursor (spec: pagination); only None ends.
        self.cursor = page.next_cursor
        self.done = page.next_cursor is None
