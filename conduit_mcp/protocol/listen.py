"""``subscriptions/listen`` rules as pure functions (MCP spec 2026-07-28, "Subscriptions";
docs/connection.md, "Listens and resource subscriptions").

A modern server sends change notifications only on a listen stream, and only the kinds the
filter asks for. The client listens once it has a consumer for a kind the server advertises
``listChanged`` for (a cached list, a notification subscriber) or a resource subscription;
the filter is the union of those. These functions compute that filter, read the
``subscriptionId`` a listen's notifications carry, tell a listen's messages from the others
(listen request ids are strings, ``"listen-<n>"``, so they never collide with the
connection's integer ids), and say how long to wait before reopening a long-lived stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

#: The subscriptionId key of a notification's ``_meta`` (= the listen request's id).
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
RESOURCE_UPDATED: Final = "notifications/resources/updated"
LISTEN: Final = "subscriptions/listen"

#: The Tasks extension's push, and its identifier (ext-tasks, "Task Status Notifications").
TASK_STATUS: Final = "notifications/tasks"
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TOOLS_CHANGED: Final = "notifications/tools/list_changed"
PROMPTS_CHANGED: Final = "notifications/prompts/list_changed"
RESOURCES_CHANGED: Final = "notifications/resources/list_changed"

#: list_changed method -> the cached lists it makes stale.
STALE_KINDS: Final[Mapping[str, tuple[str, ...]]] = {
    TOOLS_CHANGED: ("tools",),
    PROMPTS_CHANGED: ("prompts",),
    RESOURCES_CHANGED: ("resources", "resource_templates"),
}
#: cached list kind -> the list_changed method that announces its changes.
CHANGED_BY: Final[Mapping[str, str]] = {
    "tools": TOOLS_CHANGED,
    "prompts": PROMPTS_CHANGED,
    "resources": RESOURCES_CHANGED,
    "resource_templates": RESOURCES_CHANGED,
}
# list_changed method -> (capability, filter field)
_FILTER: Final = {
    TOOLS_CHANGED: ("tools", "toolsListChanged"),
    PROMPTS_CHANGED: ("prompts", "promptsListChanged"),
    RESOURCES_CHANGED: ("resources", "resourcesListChanged"),
}

_MISSING: Final = object()

#: A listen's request id is this prefix and a number (the connection's ids are ints).
TAG_PREFIX: Final = "listen-"
CANCELLED: Final = "notifications/cancelled"

#: Reopening a long-lived stream (a listen, the legacy GET stream): never sooner than the
#: floor, whatever the server's ``retry`` or the backoff says; doubled for each end in a row
#: that came too soon, up to the ceiling (or the server's ``retry``, if larger). Seconds.
REOPEN_FLOOR: Final = 1.0
REOPEN_CEILING: Final = 30.0
#: A stream that stayed open this long (seconds) was no churn: the backoff starts again.
LIVED: Final = 5.0
#: The server's reconnection time when it named none (milliseconds).
DEFAULT_RETRY_MS: Final = 1000
#: The legacy GET stream is given up after this many failed attempts in a row (until the
#: next session).
GIVE_UP_AFTER: Final = 5


def advertised(capabilities: Mapping[str, Any] | None, cap: str, flag: str) -> bool:
    """Whether the server's capabilities set ``cap.flag`` to true."""
    if not isinstance(capabilities, Mapping):
        return False
    entry = capabilities.get(cap)
    return isinstance(entry, Mapping) and entry.get(flag) is True


def desired_filter(
    capabilities: Mapping[str, Any] | None,
    *,
    cached_kinds: Iterable[str] = (),
    subscriber_methods: Iterable[frozenset[str] | None] = (),
    resource_uris: Iterable[str] = (),
    task_ids: Iterable[str] = (),
) -> dict[str, Any]:
    """The ``SubscriptionFilter`` the connection's listen should carry now ({}: none).

    ``task_ids``: the tasks the client polls, pushed as ``notifications/tasks`` by a server
    of the Tasks extension (ext-tasks, "Task Status Notifications"; docs/tasks.md).

    ``subscriber_methods`` holds each notification subscriber's method filter (None: every
    method). A kind is listened for only if the server advertises ``listChanged`` for it;
    resource URIs only if it advertises ``resources.subscribe``.

    >>> caps = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}
    >>> desired_filter(caps, cached_kinds=["tools", "prompts"], resource_uris=["b://", "a://"])
    {'toolsListChanged': True, 'resourceSubscriptions': ['a://', 'b://']}
    >>> desired_filter(caps)
    {}
    """
    wanted: set[str] = set()
    for kind in cached_kinds:
        method = CHANGED_BY.get(kind)
        if method is not None:
            wanted.add(method)
    for methods in subscriber_methods:
        if methods is None:
            wanted.update(_FILTER)
        else:
            wanted.update(m for m in methods if m in _FILTER)
    result: dict[str, Any] = {}
    for method in (TOOLS_CHANGED, PROMPTS_CHANGED, RESOURCES_CHANGED):
        cap, field = _FILTER[method]
        if method in wanted and advertised(capabilities, cap, "listChanged"):
            result[field] = True
    uris = sorted(set(resource_uris))
    if uris and advertised(capabilities, "resources", "subscribe"):
        result["resourceSubscriptions"] = uris
    ids = sorted(set(task_ids))
    if ids and _offers_tasks(capabilities):
        result["taskIds"] = ids
    return result


def _offers_tasks(capabilities: Mapping[str, Any] | None) -> bool:
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions


def subscription_id(params: Any) -> Any:
    """The ``subscriptionId`` in a notification's ``params._meta``, or None if it has none.

    >>> subscription_id({"_meta": {SUBSCRIPTION_ID: 7}, "uri": "x"})
    7
    >>> subscription_id({"uri": "x"}) is None
    True
    """
    if type(params) is not dict:
        return None
    meta = params.get("_meta")
    if type(meta) is not dict:
        return None
    return meta.get(SUBSCRIPTION_ID)


def without_subscription(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the ``subscriptionId`` removed (a listen's notifications are
    routed with it removed); ``_meta`` disappears when nothing else was in it.

    >>> without_subscription({"_meta": {SUBSCRIPTION_ID: 7}, "uri": "x"})
    {'uri': 'x'}
    """
    meta = dict(params["_meta"])
    meta.pop(SUBSCRIPTION_ID, None)
    out = {k: v for k, v in params.items() if k != "_meta"}
    if meta:
        out["_meta"] = meta
    return out


def is_tag(value: Any) -> bool:
    """Whether ``value`` is a listen request id (``"listen-<n>"``).

    >>> is_tag("listen-3"), is_tag(3), is_tag("other")
    (True, False, False)
    """
    return type(value) is str and value.startswith(TAG_PREFIX)


def is_listen_control(message: Any) -> bool:
    """Whether a decoded inbound message is about a listen's life: the answer to a listen
    id, its acknowledgement, or the server's cancellation of it. These go to the listen
    actor. A listen's other notifications go to the connection with everything else, so
    that notifications keep their order; it routes those of a live listen.

    >>> from conduit_mcp.protocol.jsonrpc import Notification, Response
    >>> is_listen_control(Notification(ACKNOWLEDGED, {"_meta": {SUBSCRIPTION_ID: "listen-1"}}))
    True
    >>> is_listen_control(Notification(CANCELLED, {"requestId": "listen-1"}))
    True
    >>> is_listen_control(Response("listen-2", {})), is_listen_control(Response(2, {}))
    (True, False)
    >>> is_listen_control(Notification(TOOLS_CHANGED, {"_meta": {SUBSCRIPTION_ID: "listen-1"}}))
    False
    """
    method = getattr(message, "method", None)
    if method is None:
        return is_tag(getattr(message, "id", None))
    if getattr(message, "id", _MISSING) is not _MISSING:
        return False  # a server request
    params = message.params
    if method == CANCELLED:
        return type(params) is dict and is_tag(params.get("requestId"))
    return method == ACKNOWLEDGED and is_tag(subscription_id(params))


def reopen_delay(retry_ms: int | None, churn: int) -> float:
    """How long to wait before reopening a stream that ended, after ``churn`` ends in a row
    that came too soon (0: it had lived). ``retry_ms`` is the server's SSE ``retry`` (or a
    backoff's delay in milliseconds). Pure.

    >>> [reopen_delay(1, n) for n in (0, 1, 2, 3, 9)]
    [1.0, 1.0, 2.0, 4.0, 30.0]
    >>> reopen_delay(60_000, 5)
    60.0
    """
    base = max(REOPEN_FLOOR, (DEFAULT_RETRY_MS if retry_ms is None else retry_ms) / 1000)
    grown: float = base * 2 ** max(0, churn - 1)
    return min(grown, max(REOPEN_CEILING, base))
