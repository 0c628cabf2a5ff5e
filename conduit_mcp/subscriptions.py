"""Notification subscriptions and run-time credentials, told to the client's actors.

Subscribing tells the notifier actor (started on first use) and the connection (which listens
for what subscribers want); it never waits on either. ``set_auth`` waits, briefly, for the
connection to apply the new credentials. ``Client`` offers these as methods.
"""

from __future__ import annotations

import dataclasses
import queue
from collections.abc import Iterable, Mapping
from typing import Any

import pykka

from .actors.events import Consumers, SetAuth
from .actors.notifier import Subscribe, Unsubscribe
from .errors import Error
from .replies import SyncReply
from .request import Handle, check_timeout
from .transports.http_spec import Http, is_oauth


def subscribe_notifications(handle: Handle, subscriber: Any, methods: Iterable[str] | None) -> None:
    runtime = handle.tree()
    message = Subscribe(subscriber, methods)  # validated here, in the caller's thread
    sub = message.subscriber
    if not runtime.siblings.tell("notifier", message):
        raise Error("closed", "stopped", f"client {handle.name!r} is not running")
    _tell_connection(handle, Consumers(sub.key, sub.methods, True))


def unsubscribe_notifications(handle: Handle, subscriber: Any) -> None:
    runtime = handle.tree()
    message = Unsubscribe(subscriber)
    runtime.siblings.tell("notifier", message)
    _tell_connection(handle, Consumers(message.key, None, False))


def await_listening(handle: Handle, timeout: float) -> dict[str, Any]:
    runtime = handle.tree()
    if runtime.shared.status.era == "legacy":
        return {}
    honoured = runtime.shared.wait_listen(check_timeout(timeout, timeout))
    if honoured is None:
        raise Error("timeout", "deadline", "no subscriptions/listen was acknowledged in time")
    return honoured


def set_auth(
    handle: Handle,
    *,
    bearer: str | None,
    headers: Mapping[str, str] | None,
    auth: Any,
    credential_id: str | None,
    timeout: float,
) -> None:
    runtime = handle.tree()
    seconds = check_timeout(timeout, timeout)
    spec = runtime.spec
    if not isinstance(spec, Http):
        raise Error("argument", "transport", "set_auth needs an Http transport")
    if is_oauth(spec.auth) or is_oauth(auth):
        # The OAuth actor owns an OAuth client's credentials (docs/connection.md,
        # "Authorizing"): another principal is another client.
        raise Error(
            "argument",
            "oauth",
            "set_auth does not change OAuth credentials: start another client with "
            "Http(auth=OAuth(principal=...)) for another principal",
        )
    try:
        new = dataclasses.replace(
            spec, bearer=bearer, headers=headers, auth=auth, credential_id=credential_id
        )
    except Error as exc:
        raise Error("argument", exc.reason, exc.message) from None
    runtime.spec = new  # a restarted connection starts with these
    reply = SyncReply()
    handle.tell_now(SetAuth(new, reply))
    try:
        _tag, value = reply.queue.get(timeout=seconds)
    except queue.Empty:
        raise Error("timeout", "deadline", "set_auth was not applied in time") from None
    if isinstance(value, Error):
        raise value


def _tell_connection(handle: Handle, message: Consumers) -> None:
    """Tell the connection who consumes notifications now. A connection restarting after a
    crash may miss it: the notifier, which has the subscription already, tells the new one
    every subscriber when it starts (``Replay``), so this never fails the caller."""
    try:
        handle.tell_now(message)
    except (Error, pykka.ActorDeadError):
        pass
