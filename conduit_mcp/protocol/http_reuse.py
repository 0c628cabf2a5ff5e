"""Reusing HTTP/1.1 connections safely: how long an idle pooled connection may be kept, and
when a request that failed on one may be sent again (docs/connection.md, "Idle connections").

A server closes a connection that stayed idle past its keep-alive timeout (uvicorn, hypercorn
and Node: 5 s by default). A client that picks that connection from its pool just then sends
its request into the close: the connection ends before any byte of an answer, and the
server never ran the request (it had stopped reading). Two rules keep that from failing a
call:

* **Idle limit**: a pooled connection is not reused once it has been idle for longer than
  the client's ``keep_alive`` (below the common 5 s), nor longer than the server announced
  in ``Keep-Alive: timeout=N`` (RFC 2068 §19.7.1.1; Node sends it) less a margin for the
  time the answer took to arrive.
* **Re-send**: a request that failed on a **reused** connection that had been idle for at
  least :data:`MIN_IDLE`, by a disconnect or a reset, **before any byte of the answer
  arrived**, is sent again (RFC 9112 §9.3.1 lets a client retry a non-idempotent request
  when it can tell the request was never applied; a server closes a kept-alive connection
  between requests, once it has been idle for its timeout, RFC 9112 §9.6). A fresh
  connection that fails is never re-sent (the failure says something about the server),
  nor one busy a moment ago (no keep-alive timer closes that: a server that drops it had
  the request, and may have run it), nor one where the answer had begun.

The one case these rules cannot tell apart: a server that read the request on a connection
idle for longer than :data:`MIN_IDLE` and then died without writing a byte. Its request is
sent again (and may run twice); that needs a crash at the instant of reading.

Pure functions, tested without sockets (tests/protocol/test_http_reuse.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Final, Literal

#: The client's default idle limit (seconds): below the 5 s of uvicorn, hypercorn and Node,
#: with a second's margin for the answer's travel and the caller's own latency.
DEFAULT_KEEP_ALIVE: Final = 4.0
#: How often one request may be sent again: each attempt drops the pooled connection that
#: failed, so a pool of several stale connections needs more than one.
MAX_RESENDS: Final = 4
#: A reused connection that failed is a server's idle close only if it had been idle at
#: least this long (seconds): no server's keep-alive timer is shorter in practice (uvicorn,
#: hypercorn, Node: 5 s; gunicorn: 2 s), and a server that announces one is honoured.
MIN_IDLE: Final = 0.5
#: Taken off a server's announced timeout: its clock starts when it wrote the answer, ours
#: when the answer was read.
_MARGIN: Final = 1.0
_TIMEOUT: Final = re.compile(r"\s*timeout\s*=\s*\"?([0-9]{1,9}(?:\.[0-9]{1,6})?)\"?\s*$", re.I)

Failure = Literal["disconnected", "reset", "other"]


def announced_timeout(values: Iterable[str]) -> float | None:
    """The ``timeout`` of ``Keep-Alive`` header values (seconds), or None when none says one.

    Lenient, as a header a server got wrong must not become an exception: a parameter that
    does not parse says nothing. Several values or parameters: the shortest timeout.

    >>> announced_timeout(["timeout=5"])
    5.0
    >>> announced_timeout(["timeout=5, max=1000"])
    5.0
    >>> announced_timeout(["max=100", "Timeout = 2"])
    2.0
    >>> announced_timeout(["timeout=-1", "timeout=abc", "timeout="]) is None
    True
    >>> announced_timeout([]) is None
    True
    """
    found: float | None = None
    for value in values:
        for part in value.split(","):
            m = _TIMEOUT.match(part)
            if m is None:
                continue
            seconds = float(m.group(1))
            if math.isfinite(seconds) and (found is None or seconds < found):
                found = seconds
    return found


def idle_limit(ours: float, announced: float | None) -> float:
    """How long an idle pooled connection may be kept: ours, or less when the server
    announced a shorter keep-alive (less a margin: its clock started first). Never negative:
    0 means a connection is never reused.

    >>> idle_limit(4.0, None)
    4.0
    >>> idle_limit(4.0, 75.0)
    4.0
    >>> idle_limit(4.0, 5.0)
    4.0
    >>> idle_limit(4.0, 2.0)
    1.0
    >>> idle_limit(4.0, 1.0)
    0.5
    >>> idle_limit(4.0, 0.0)
    0.0
    """
    if announced is None:
        return ours
    return max(0.0, min(ours, announced - min(_MARGIN, announced / 2)))


def may_resend(
    *, reused: bool, idle: float | None, answered: bool, failure: Failure, resends: int
) -> bool:
    """Whether a request that failed may be sent again: only when it provably never reached
    the server, as far as HTTP/1.1 can prove it (the module's docstring).

    ``reused``: it was sent on a pooled connection that had carried an earlier request;
    ``idle``: how long, at least, that connection had been idle when the request went out
    (seconds; None: not known); ``answered``: any byte of the answer had arrived;
    ``failure``: how the connection ended (a clean ``disconnected``, a ``reset``, or
    anything else: a timeout, a bad answer, a connection that could not be made);
    ``resends``: how often it was already sent again.

    >>> may_resend(reused=True, idle=4.9, answered=False, failure="disconnected", resends=0)
    True
    >>> may_resend(reused=False, idle=None, answered=False, failure="disconnected", resends=0)
    False
    >>> may_resend(reused=True, idle=0.01, answered=False, failure="disconnected", resends=0)
    False
    >>> may_resend(reused=True, idle=4.9, answered=True, failure="reset", resends=0)
    False
    >>> may_resend(reused=True, idle=4.9, answered=False, failure="other", resends=0)
    False
    >>> may_resend(reused=True, idle=4.9, answered=False, failure="reset", resends=MAX_RESENDS)
    False
    """
    return (
        reused
        and idle is not None
        and idle >= MIN_IDLE
        and not answered
        and failure in ("disconnected", "reset")
        and 0 <= resends < MAX_RESENDS
    )
