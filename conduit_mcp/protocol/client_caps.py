"""The client's capabilities, derived once at start from its handler (a pure function).

What a client declares decides what a server may ask of it (docs/connection.md,
"Server-to-client requests"): a server must not send ``sampling/createMessage`` to a client
without ``sampling``, nor an elicitation mode the client did not declare. So the declaration
follows from what the handler can answer: ``create_message`` -> ``sampling``, ``elicit`` ->
``elicitation`` with the handler's ``elicitation_modes``, ``list_roots`` -> ``roots`` (with ``listChanged``: ``Client.roots_changed``). The
user's ``capabilities`` option is merged over that (one level deep: ``{"sampling":
{"tools": {}}}`` adds tools to sampling), and may never declare what nothing would answer:
a server trusting it would wait on a request the client can only refuse.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from ..errors import Error

__all__ = [
    "ELICITATION_MODES",
    "check_elicitation_modes",
    "client_capabilities",
    "for_handler",
    "with_extensions",
]

#: The elicitation modes the protocol defines.
ELICITATION_MODES = ("form", "url")

# capability -> the handler method that serves it
_SERVED_BY = {"sampling": "create_message", "elicitation": "elicit", "roots": "list_roots"}


def check_elicitation_modes(modes: Any) -> tuple[str, ...]:
    """A handler's ``elicitation_modes`` as a tuple, checked: a non-empty collection of
    ``"form"`` and ``"url"``.

    >>> check_elicitation_modes(["url", "form"])
    ('url', 'form')
    >>> check_elicitation_modes(("sms",))
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (handler): Handler.elicitation_modes may hold only 'form' and 'url'
    """
    if isinstance(modes, str) or not isinstance(modes, Iterable):
        raise Error(
            "config",
            "handler",
            "Handler.elicitation_modes must be a tuple of modes, e.g. ('form', 'url')",
        )
    out = tuple(modes)
    if not out:
        raise Error("config", "handler", "Handler.elicitation_modes is empty: give ('form',)")
    if any(m not in ELICITATION_MODES for m in out):
        raise Error("config", "handler", "Handler.elicitation_modes may hold only 'form' and 'url'")
    return out


def client_capabilities(
    implemented: Collection[str],
    elicitation_modes: Iterable[str],
    declared: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The capabilities to declare: those the ``implemented`` handler methods imply, with
    ``declared`` (the ``capabilities`` option) merged over them.

    >>> client_capabilities({"create_message", "elicit"}, ("form", "url"))
    {'sampling': {}, 'elicitation': {'form': {}, 'url': {}}}
    >>> client_capabilities({"create_message"}, ("form",), {"sampling": {"tools": {}}})
    {'sampling': {'tools': {}}}
    >>> client_capabilities(set(), ("form",), {"roots": {"listChanged": True}})
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (capabilities): capabilities declares 'roots', but the handler has no list_roots method: implement Handler.list_roots, or remove 'roots' from capabilities
    """
    modes = check_elicitation_modes(elicitation_modes)
    derived: dict[str, Any] = {}
    if "create_message" in implemented:
        derived["sampling"] = {}
    if "elicit" in implemented:
        derived["elicitation"] = {mode: {} for mode in ELICITATION_MODES if mode in modes}
    if "list_roots" in implemented:
        derived["roots"] = {"listChanged": True}  # Client.roots_changed() tells the server
    declared = declared or {}
    for name, method in _SERVED_BY.items():
        if name in declared and method not in implemented:
            raise Error(
                "config",
                "capabilities",
                f"capabilities declares {name!r}, but the handler has no {method} method: "
                f"implement Handler.{method}, or remove {name!r} from capabilities",
            )
    elicitation = declared.get("elicitation")
    if isinstance(elicitation, Mapping):
        for mode in ELICITATION_MODES:
            if mode in elicitation and mode not in modes:
                raise Error(
                    "config",
                    "capabilities",
                    f"capabilities declares elicitation mode {mode!r}, but the handler's "
                    f"elicitation_modes is {modes!r}: add {mode!r} to Handler.elicitation_modes",
                )
    out = dict(derived)
    for name, value in declared.items():
        base = derived.get(name)
        if isinstance(base, dict) and isinstance(value, Mapping):
            out[name] = {**base, **value}
        else:
            out[name] = value
    return out


def for_handler(handler: Any, declared: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:func:`client_capabilities` for the ``handler`` option (None: no handler), which must
    be a ``conduit_mcp.Handler``.

    >>> from conduit_mcp.handler import Handler
    >>> class Sampler(Handler):
    ...     async def create_message(self, request, ctx): ...
    >>> for_handler(Sampler(), {"experimental": {}})
    {'sampling': {}, 'experimental': {}}
    >>> for_handler(object())
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (handler): handler must be an instance of a conduit_mcp.Handler subclass, not object
    """
    from ..handler import Handler

    if handler is None:
        return client_capabilities(frozenset(), ("form",), declared)
    if not isinstance(handler, Handler):
        what = "a class" if isinstance(handler, type) else type(handler).__name__
        raise Error(
            "config",
            "handler",
            f"handler must be an instance of a conduit_mcp.Handler subclass, not {what}",
        )
    return client_capabilities(
        type(handler).implemented_methods(), handler.elicitation_modes, declared
    )


def with_extensions(capabilities: Mapping[str, Any], extensions: Iterable[str]) -> dict[str, Any]:
    """``capabilities`` with each of ``extensions`` declared under ``extensions`` (SEP-2133:
    the identifier as key, its settings object as value, ``{}`` for none). The client uses
    them (the OAuth extensions its ``auth`` configures: docs/oauth.md, "Declared
    extensions"), so it says so; settings the user declared for one are kept as they are.

    >>> with_extensions({"sampling": {}}, ["io.modelcontextprotocol/oauth-client-credentials"])
    {'sampling': {}, 'extensions': {'io.modelcontextprotocol/oauth-client-credentials': {}}}
    >>> with_extensions({"extensions": {"x.y/z": {"a": 1}}}, ["x.y/z"])
    {'extensions': {'x.y/z': {'a': 1}}}
    >>> with_extensions({}, [])
    {}
    """
    out = dict(capabilities)
    names = tuple(extensions)
    if not names:
        return out
    declared = out.get("extensions")
    merged = dict(declared) if isinstance(declared, Mapping) else {}
    for name in names:
        merged.setdefault(name, {})
    out["extensions"] = merged
    return out
