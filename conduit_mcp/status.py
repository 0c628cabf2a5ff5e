"""What a client shows about itself without messaging any actor.

The connection is the only writer; it replaces whole frozen values (one reference store,
atomic under the GIL), so a reader on any thread sees either the old status or the new one,
never a mix, and never waits on the connection's mailbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

State = Literal[
    "connecting", "discovering", "initializing", "ready", "authorizing", "reconnecting", "closed"
]
"""The connection's states (docs/connection.md, "States"), as ``Status.state`` has them.

>>> import sys
>>> import conduit_mcp as mcp
>>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
>>> with mcp.Client.start(server) as client:
...     client.wait_for_state("ready", timeout=10).state
'ready'
"""

Era = Literal["modern", "legacy"]
"""The protocol eras: ``modern`` (``server/discover``, 2026-07-28 and later) or ``legacy``
(the ``initialize`` handshake, 2024-11-05 to 2025-11-25).

>>> import sys
>>> import conduit_mcp as mcp
>>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
>>> with mcp.Client.start(server, protocol="legacy") as client:
...     client.await_ready(timeout=10).era
'legacy'
"""

Origin = Literal["probe", "pinned", "prior"]
"""How the era was chosen: ``probe`` (``protocol="auto"``), ``pinned`` (an era or version
given), ``prior`` (``prior="legacy"``). See :class:`Status`.

>>> import sys
>>> import conduit_mcp as mcp
>>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
>>> with mcp.Client.start(server, protocol="auto") as client:
...     client.await_ready(timeout=10).origin
'probe'
"""

STATES: Final[frozenset[str]] = frozenset(get_args(State))
ERAS: Final[frozenset[str]] = frozenset(get_args(Era))
ORIGINS: Final[frozenset[str]] = frozenset(get_args(Origin))


@dataclass(frozen=True, slots=True)
class Status:
    """The connection's state, as ``Client.status()`` returns it.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server, protocol="legacy") as client:
    ...     client.await_ready(timeout=10)
    Status(state='ready', era='legacy', version='2025-11-25', reason=None, origin='pinned', degraded=None)
    >>> client.status().state, client.status().reason
    ('closed', 'stopped')
    """

    state: State
    """connecting | discovering | initializing | ready | authorizing | reconnecting | closed
    (``authorizing``: OAuth only, a token is being found or renewed, or a person must
    authorize: ``reason`` is then ``"authorization_required"``)."""
    era: Era | None = None
    """What was negotiated (None until then; kept while reconnecting)."""
    version: str | None = None
    """The negotiated protocol version (None until then; kept while reconnecting)."""
    reason: str | None = None
    """Why the connection is not ready (``"exit"``, ``"max_reconnects"``,
    ``"no_mutual_version"``, ...); None when ready."""
    origin: Origin | None = None
    """How the era was chosen: ``"probe"`` (auto mode's server/discover probe), ``"pinned"``
    (the ``protocol`` option), ``"prior"`` (``prior="legacy"`` or a probe cut short by the
    server's exit), or None before negotiation."""
    degraded: str | None = None
    """Why a ready client misses something while its requests still work:
    ``"get_stream_given_up"`` (the legacy HTTP GET stream failed 5 times in a row, so server
    notifications and requests outside a request are not received until the next session);
    None otherwise."""
