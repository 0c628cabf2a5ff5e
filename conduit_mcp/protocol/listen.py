"""``subscriptions/listen`` rules as pure functions (mcp-spec §6; seed 000, "Change
notifications and resource subscriptions").

A modern server sends change notifications only on a listen stream, and only the kinds the
filter asks for. The connection listens once the client has a consumer for a kind the server
advertises ``listChanged`` for (a cached list, a notification subscriber) or a resource
subscription; the filter is the union of those. These functions compute that filter and read
the ``subscriptionId`` a listen's notifications carry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

#: The subscriptionId key of a notification's ``_meta`` (= the listen request's id).
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
RESOURCE_UPDATED: Final = "notifications/resources/updated"
LISTEN: Final = "subscriptions/listen"

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
) -> dict[str, Any]:
    """The ``SubscriptionFilter`` the connection's listen should carry now ({}: none).

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
    return result


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
    """``params`` with the ``subscriptionId`` removed (seed 000: routed "with its
    ``subscriptionId`` removed"); ``_meta`` disappears when nothing else was in it.

    >>> without_subscription({"_meta": {SUBSCRIPTION_ID: 7}, "uri": "x"})
    {'uri': 'x'}
    """
    meta = dict(params["_meta"])
    meta.pop(SUBSCRIPTION_ID, None)
    out = {k: v for k, v in params.items() if k != "_meta"}
    if meta:
        out["_meta"] = meta
    return out
