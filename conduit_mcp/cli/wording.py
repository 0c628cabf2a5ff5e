"""Why a connection failed, in the command line's words: ``--env``, not ``env=...``.

The library's messages name its Python options (``inherit_env=True``, ``max_reconnects=0``,
``protocol='modern'``): right for a program, wrong for a shell user, who has options of
another name and never set ``max_reconnects`` (the command line sets it to 0: one attempt).
This module rebuilds a connection failure's message from what the error carries
(``Error.data``: the last attempt's reason, detail and stderr; docs/connection.md) with the
shared :func:`~conduit_mcp.protocol.failures.describe` and hints in option names of the
command line. Pure: no I/O.

>>> e = Error("closed", "max_reconnects", "the client gave up after 1 failed attempt ...",
...           data={"last_reason": "unreachable", "detail": "Connection refused"})
>>> connection_message(e, timeout=30, state="closed")
"could not connect: unreachable (Connection refused): check the URL's host and port, and that the server is listening"
"""

from __future__ import annotations

from typing import Any

from ..errors import Error
from ..protocol.failures import Failure, describe

#: Hints for the reasons whose library hint names a Python option.
HINTS = {
    "spawn_failed": "check the command and its PATH (a stdio server gets a minimal environment: "
    "add --env NAME=VALUE, or --inherit-env for this shell's whole environment)",
    "connect_timeout": "the server did not accept a connection within 10 s: check the URL's "
    "host and port",
    "initialize_timeout": "the server did not answer initialize within --timeout",
}

#: The same, for a server of a ``--config`` file served with the others (no --server): its
#: environment comes from the file's entry, not from --env.
CONFIG_HINTS = {
    **HINTS,
    "spawn_failed": "check the entry's command and its PATH (a stdio server gets a minimal "
    'environment: give it "env" in the file, or "conduit": {"inherit_env": true})',
}

#: Why the client closed, for the reasons whose library text names a Python option.
CLOSED = {
    "legacy_server": "the server does not speak the modern protocol, and --protocol modern "
    "forbids falling back to initialize (use --protocol auto)",
}


def last_failure(exc: Error) -> Failure | None:
    """The last failed attempt an error carries in its ``data``, if any."""
    data: Any = exc.data
    if not isinstance(data, dict) or not isinstance(data.get("last_reason"), str):
        return None
    detail, stderr = data.get("detail"), data.get("stderr")
    return Failure(
        data["last_reason"],
        detail if isinstance(detail, str) else None,
        stderr if isinstance(stderr, str) else None,
    )


def connection_message(
    exc: Error, *, timeout: float, state: str, hints: dict[str, str] | None = None
) -> str:
    """The message for an error met while connecting (``state``: the client's state then;
    ``hints``: the words for each reason, default :data:`HINTS`).

    >>> e = Error("closed", "spawn_failed", "...", data={"last_reason": "spawn_failed",
    ...           "detail": "FileNotFoundError: No such file or directory: 'srv'"})
    >>> connection_message(e, timeout=30, state="closed")
    "could not start the server, and retrying cannot help: spawn_failed (FileNotFoundError: No such file or directory: 'srv'): check the command and its PATH (a stdio server gets a minimal environment: add --env NAME=VALUE, or --inherit-env for this shell's whole environment)"
    >>> connection_message(Error("timeout", "deadline", "..."), timeout=1, state="discovering")
    'the server was not ready within 1 s; the client is discovering'
    >>> connection_message(Error("closed", "legacy_server", "..."), timeout=1, state="closed")
    'the client is closed: the server does not speak the modern protocol, and --protocol modern forbids falling back to initialize (use --protocol auto)'
    """
    last = last_failure(exc)
    said = describe(last, HINTS if hints is None else hints) if last is not None else None
    if exc.kind == "closed":
        if exc.reason == "max_reconnects":
            return f"could not connect: {said}" if said else "could not connect"
        if last is not None and exc.reason == last.reason:
            what = "start the server" if last.reason == "spawn_failed" else "connect"
            return f"could not {what}, and retrying cannot help: {said}"
        if exc.reason in CLOSED:
            return f"the client is closed: {CLOSED[exc.reason]}"
    if exc.kind == "timeout" and exc.reason == "deadline":
        text = f"the server was not ready within {timeout:g} s; the client is {state}"
        return f"{text} after: {said}" if said else text
    return exc.message
