"""Which member serves a name, URI or server: resolved in the caller's thread, lock-free.

A call never waits for a server that is not ready: it fails at once with ``unavailable``
(``server_not_ready``), naming the server and why (its status reason), so a dead entry costs a
caller microseconds, not its deadline. An unknown server, tool, prompt or resource is
``argument`` (``unknown_server``, ``unknown_tool``, ...) with the closest names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..client import Client
from ..errors import Error
from .board import Board, Member
from .names import closest

__all__ = ["member", "resource", "template", "tool", "prompt"]


def unknown(reason: str, what: str, name: str, candidates: Iterable[str]) -> Error:
    near = closest(name, candidates)
    hint = f"; did you mean {', '.join(repr(n) for n in near)}?" if near else ""
    return Error("argument", reason, f"no {what} {name!r}{hint}", data={"closest": near})


def stopped() -> Error:
    return Error("closed", "stopped", "the hub is stopped")


def member(board: Board, server: Any) -> Client:
    """The client of the ready member ``server``."""
    if board.stopped:
        raise stopped()
    found = board.members.get(server) if isinstance(server, str) else None
    if found is None:
        raise unknown("unknown_server", "server", str(server), board.order)
    return ready(found)


def ready(found: Member) -> Client:
    """The member's client, if it is ready (``unavailable``/``server_not_ready`` if not)."""
    client, runtime = found.client, found.runtime
    # The hot path: the status the member's connection published (one attribute read); a
    # tree that died while "ready" fails the call itself, with why.
    if client is not None and runtime is not None and runtime.shared.status.state == "ready":
        return client
    status = found.status()
    if status.state != "ready" or client is None:
        why = status.reason or status.state
        raise Error(
            "unavailable",
            "server_not_ready",
            f"server {found.name!r} is {status.state} ({why}); it is not called until it is "
            "ready (hub.status() shows each server)",
            data={"server": found.name, "state": status.state, "reason": status.reason},
        )
    return client


def _named(board: Board, name: Any, what: str, reason: str, kind: str) -> tuple[Client, str]:
    if isinstance(name, tuple):
        if len(name) != 2 or not all(isinstance(p, str) for p in name):
            raise Error("argument", "name", f"a {what} is a name or a (server, name) tuple")
        return member(board, name[0]), name[1]
    if not isinstance(name, str) or not name:
        raise Error("argument", "name", f"a {what} is a name or a (server, name) tuple")
    if board.stopped:
        raise stopped()
    view = board.view
    routes = view.tool_routes if kind == "tools" else view.prompt_routes
    route = routes.get(name)
    if route is not None:
        return member(board, route[0]), route[1]
    # Not in the view: a hidden server's (not ready) or nobody's.
    try:
        parsed = board.naming.unqualify(name)
    except Exception:
        parsed = None
    if isinstance(parsed, tuple) and len(parsed) == 2 and parsed[0] in board.members:
        client = ready(board.members[parsed[0]])
        if parsed[0] not in view.listed:
            return client, parsed[1]  # ready, its lists not in the view yet: the server decides
    raise unknown(reason, what, name, routes)


def tool(board: Board, name: Any) -> tuple[Client, str]:
    """The member and the server's own name of a qualified tool name or ``(server, name)``."""
    return _named(board, name, "tool", "unknown_tool", "tools")


def prompt(board: Board, name: Any) -> tuple[Client, str]:
    """As :func:`tool`, for a prompt."""
    return _named(board, name, "prompt", "unknown_prompt", "prompts")


def resource(board: Board, uri: Any) -> tuple[Client, str]:
    """The member that listed ``uri`` (or ``(server, uri)``)."""
    if isinstance(uri, tuple):
        if len(uri) != 2 or not all(isinstance(p, str) for p in uri):
            raise Error("argument", "uri", "a resource is a URI or a (server, uri) tuple")
        return member(board, uri[0]), uri[1]
    if not isinstance(uri, str) or not uri:
        raise Error("argument", "uri", "a resource is a URI or a (server, uri) tuple")
    if board.stopped:
        raise stopped()
    server = board.view.resource_routes.get(uri)
    if server is None:
        raise unknown("unknown_resource", "resource", uri, board.view.resource_routes)
    return member(board, server), uri


def template(board: Board, uri_template: str) -> Client:
    if board.stopped:
        raise stopped()
    server = board.view.template_routes.get(uri_template)
    if server is None:
        raise unknown(
            "unknown_resource", "resource template", uri_template, board.view.template_routes
        )
    return member(board, server)


def completion_ref(board: Board, ref: Any) -> tuple[Client, dict[str, Any]]:
    """The member a ``completion/complete`` ref names, and the ref in the server's names."""
    if not isinstance(ref, dict) and not hasattr(ref, "get"):
        raise Error("argument", "ref", "ref must be a ref/prompt or ref/resource object")
    kind = ref.get("type")
    if kind == "ref/prompt":
        client, name = prompt(board, ref.get("name"))
        return client, {**ref, "name": name}
    if kind == "ref/resource":
        return template(board, ref.get("uri")), dict(ref)
    raise Error("argument", "ref", "ref must be a ref/prompt or ref/resource object")
