"""The test authorization server's plumbing: its state, URLs, log and body parsing.

:class:`AuthBase` holds what every endpoint needs; :mod:`.clients` adds registration and
client authentication on top of it, :mod:`.server` the endpoints. docs/testing.md,
"The test authorization server", is the manual.
"""

from __future__ import annotations

import os
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import aiohttp
import orjson
from aiohttp import web

from ..common.dpop_proofs import ProofChecker
from ..common.event_log import EventLog
from .options import AuthOptions
from .state import AuthState, Client, OAuthFailure, client_from_metadata

__all__ = ["JWT_BEARER", "NO_STORE", "AuthBase", "json_answer", "with_query"]

JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def json_answer(
    body: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(body),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def with_query(uri: str, params: dict[str, str]) -> str:
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True) + list(params.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


class AuthBase:
    """State, URLs, the log and request parsing, shared by the endpoints."""

    def __init__(self, options: AuthOptions, log: EventLog | None) -> None:
        self.opt = options
        self._log = log
        self._pid = os.getpid()
        self.port = 0
        self.state = AuthState(
            token_ttl=options.token_ttl,
            refresh_ttl=options.refresh_ttl,
            rotate=not options.no_rotation,
        )
        self.issuer_override = options.issuer
        self.iss_mode = options.iss
        # The hostile levers (POST /admin/hostile changes them at run time).
        self.split_bodies = options.split_bodies
        self.registration_padding = options.registration_padding
        self.metadata_status = options.metadata_status
        self.pending: dict[str, dict[str, str]] = {}
        # DPoP (--dpop): the nonce asked for (--dpop-nonce), the proofs seen.
        self.proofs = ProofChecker(require_nonce=options.dpop_nonce)
        self.client_docs: dict[str, bytes] = {}
        self.hosted_by_id: dict[str, str] = {}  # a hosted document's client_id -> its name
        self._session: aiohttp.ClientSession | None = None
        for meta in options.clients:
            self._register(client_from_metadata(meta, "pre", str(meta["client_id"])))

    # ---- plumbing ---------------------------------------------------------------------------

    def event(self, name: str, **fields: Any) -> None:
        if self._log is not None:
            self._log.write({"t": time.time(), "pid": self._pid, "event": name, **fields})

    @property
    def base(self) -> str:
        scheme = "https" if self.opt.tls_cert else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def real_issuer(self) -> str:
        return self.base + self.opt.issuer_path

    @property
    def issuer(self) -> str:
        """The issuer advertised (metadata, ``iss``, introspection): ``--issuer`` or the real one."""
        return self.issuer_override or self.real_issuer

    def endpoint(self, name: str) -> str:
        return f"{self.real_issuer}/{name}"

    def _register(self, client: Client) -> None:
        self.state.clients[client.client_id] = client
        self.event(
            "registered",
            client_id=client.client_id,
            kind=client.kind,
            application_type=client.application_type,
            token_endpoint_auth_method=client.auth_method,
            redirect_uris=client.redirect_uris,
            grant_types=client.grant_types,
        )

    async def _close_session(self, app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    async def _form(self, request: web.Request) -> dict[str, str]:
        if request.content_type != "application/x-www-form-urlencoded":
            raise OAuthFailure(
                "invalid_request", "the body must be application/x-www-form-urlencoded"
            )
        form = {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        request["form"] = form
        return form

    async def _body_json(self, request: web.Request) -> Any:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            raise OAuthFailure("invalid_request", "the body is not JSON") from None
        request["json"] = body
        return body

    def _session_get(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        return self._session
