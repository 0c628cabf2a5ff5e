"""Which authorization server this client's credentials may go to (docs/oauth.md,
"What the client does", Registration).

A dynamic or CIMD registration belongs to the issuer that made it: another issuer gets a
registration of its own (:mod:`.registration`). Pre-registered credentials (``client_id``
with a secret or a key, given to ``OAuth``) were issued by one authorization server, but
nothing in them says which; sent to another one, they hand that server a credential it
should never see. So they are bound to one issuer: ``OAuth(issuer=...)`` when given, else
the issuer they were first used with, kept in the token store. A server whose metadata now
names another issuer is refused, ``auth``/``issuer_changed``, until a person confirms the
move (by naming the new issuer in ``OAuth(issuer=...)``). ``OAuth(issuer=...)`` pins every
kind of registration: no other authorization server is used at all.

Issuers are compared as strings, exactly (RFC 8414 section 3.3, RFC 9207). The store is
read and written here, so the caller runs this off the I/O loop (on a worker thread).
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from ..errors import Error
from .config import OAuth
from .store import TokenStore

log = logging.getLogger("conduit_mcp.oauth")

__all__ = ["binding_key", "check_issuer", "bind_issuer"]


def binding_key(client_id: str) -> str:
    """The store key of the issuer a pre-registered ``client_id`` is bound to.

    >>> binding_key("app")
    'issuer-of ["app"]'
    """
    return "issuer-of " + orjson.dumps([client_id]).decode()


def check_issuer(issuer: str, *, pinned: str | None, bound: str | None, client_id: str) -> None:
    """Raise ``Error("auth", "issuer_changed")`` unless ``issuer`` is the one the
    credentials may go to: ``pinned`` (``OAuth(issuer=...)``) when given, else ``bound``
    (first used with; None: not used yet, anything goes).

    >>> check_issuer("https://as", pinned=None, bound=None, client_id="app")
    >>> check_issuer("https://as", pinned="https://as", bound="https://old", client_id="app")
    >>> check_issuer("https://evil", pinned=None, bound="https://as", client_id="app")
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: auth (issuer_changed): the server now names the authorization server https://evil, but the pre-registered client 'app' was first used with https://as; its credentials are not sent to another server. If the server really moved, a person must confirm it: give OAuth(issuer='https://evil') and start the client again
    """
    if pinned is not None:
        if issuer != pinned:
            raise Error(
                "auth",
                "issuer_changed",
                f"the server names the authorization server {issuer}, but OAuth(issuer=...) "
                f"allows only {pinned}; nothing is sent there. If the server really moved, "
                f"a person must confirm it: give OAuth(issuer={issuer!r}) and start the "
                "client again",
            )
        return
    if bound is not None and issuer != bound:
        raise Error(
            "auth",
            "issuer_changed",
            f"the server now names the authorization server {issuer}, but the "
            f"pre-registered client {client_id!r} was first used with {bound}; its "
            "credentials are not sent to another server. If the server really moved, a "
            f"person must confirm it: give OAuth(issuer={issuer!r}) and start the client "
            "again",
        )


def bind_issuer(store: TokenStore, oauth: OAuth, issuer: str) -> None:
    """Check that ``oauth``'s credentials may go to ``issuer`` (:func:`check_issuer`) and,
    for pre-registered ones, keep ``issuer`` as their binding. A store that fails is logged
    (by class) and the check goes on with ``OAuth(issuer=...)`` alone."""
    client_id = oauth.client_id
    bound: str | None = None
    key = binding_key(client_id) if client_id is not None else None
    if key is not None and oauth.issuer is None:
        try:
            record: Any = store.get(key)
        except Exception as exc:
            log.warning("the OAuth token store failed (%s)", type(exc).__name__)
            record = None
        value = record.get("issuer") if isinstance(record, dict) else None
        bound = value if isinstance(value, str) and value else None
    check_issuer(issuer, pinned=oauth.issuer, bound=bound, client_id=client_id or "")
    if key is not None and bound != issuer:
        try:
            store.put(key, {"issuer": issuer})
        except Exception as exc:
            log.warning("the OAuth token store failed (%s)", type(exc).__name__)
