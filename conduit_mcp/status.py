"""What a client shows about itself without messaging any actor.

The connection is the only writer; it replaces whole frozen values (one reference store,
atomic under the GIL), so a reader on any thread sees either the old status or the new one,
never a mix, and never waits on the connection's mailbox.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Status:
    """The connection's state, as ``Client.status()`` returns it.

    ``state``: connecting | discovering | initializing | ready | reconnecting | closed.
    ``era``/``version``: what was negotiated (None until then; kept while reconnecting).
    ``reason``: why the connection is not ready (``"exit"``, ``"max_reconnects"``,
    ``"no_mutual_version"``, ...), None when ready.
    ``origin``: how the era was chosen: ``"probe"`` (auto mode's server/discover probe),
    ``"pinned"`` (the ``protocol`` option), ``"prior"`` (``prior="legacy"`` or a probe cut
    short by the server's exit), or None before negotiation.
    """

    state: str
    era: str | None = None
    version: str | None = None
    reason: str | None = None
    origin: str | None = None
