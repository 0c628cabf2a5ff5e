"""A handle on one test authorization server subprocess, for tests (synchronous).

``AuthServerProcess(workdir, scopes="mcp,offline_access", token_ttl=2)`` starts ``python -m
conduit_mcp.testing.auth.server`` with those options (keywords as in
:func:`~conduit_mcp.testing.common.process_handle.option_args`), waits for its ``listening``
line with a deadline, and logs to ``workdir``. Its methods play the person
(:meth:`approve`), pull the admin levers (revoke, expire, change the issuer, host a client
metadata document) and read the log. The manual is docs/testing.md, "The test authorization server".
"""

from __future__ import annotations

import http.client
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import orjson

from ..common.process_handle import Proc, ProcessHandle, option_args, pythonpath_env

__all__ = ["AuthServerProcess"]

_REQUEST_ID = re.compile(r'name="request_id" value="([^"]+)"')


class AuthServerProcess(ProcessHandle):
    """One ``python -m conduit_mcp.testing.auth.server`` process (restartable on its port).

    ``issuer`` is the server's real issuer URL (``http://127.0.0.1:<port>`` plus
    ``issuer_path``); ``log_path`` the JSON lines log every start appends to.
    """

    what = "the authorization server"
    imports = ("conduit_mcp.testing.auth.server",)

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        *,
        startup_timeout: float = 10.0,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        n = len(list(self.workdir.glob("auth*.log.jsonl")))
        self.log_path = self.workdir / f"auth{n}.log.jsonl"
        self.log_path.touch()
        self.port = 0
        self.issuer = ""
        self.startup_timeout = startup_timeout
        self._extra = option_args(options)
        self.scheme = "https" if options.get("tls_cert") else "http"  # docs/testing.md, "TLS"
        self._env = {**os.environ, **pythonpath_env(), **dict(env or {})}
        self._runs = 0
        self.proc: Proc | None = None
        self.stderr_path: Path | None = None
        self._start()

    # ---- the process ------------------------------------------------------------------------

    def command(self, port: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "conduit_mcp.testing.auth.server",
            "--port",
            str(port),
            "--log",
            str(self.log_path),
            *self._extra,
        ]

    def _start(self) -> None:
        self._runs += 1
        line = self._launch(self.log_path.with_suffix(f".{self._runs}.stderr"))
        words = line.decode(errors="replace").split()
        if len(words) != 3 or words[0] != "listening" or not words[1].isdigit():
            raise self._bad_start(line)
        self.port, self.issuer = int(words[1]), words[2]

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        return f"<AuthServerProcess {self.issuer} pid={self.proc and self.proc.pid} {state}>"

    # ---- URLs and plain HTTP ------------------------------------------------------------------

    @property
    def base(self) -> str:
        """``http://127.0.0.1:<port>`` (``https`` with ``tls_cert``): the admin endpoints."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def endpoint(self, name: str) -> str:
        """``authorize``, ``token``, ``register``, ``revoke``, ``introspect``, ``login``."""
        return f"{self.issuer}/{name}"

    def request(
        self,
        method: str,
        url: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> tuple[int, dict[str, str], bytes]:
        """One HTTP exchange, redirects not followed: (status, headers lower-cased, body)."""
        parts = urlsplit(url)
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            from ..common.tls import client_context

            conn = http.client.HTTPSConnection(
                parts.hostname or "127.0.0.1", parts.port, timeout=timeout, context=client_context()
            )
        else:
            conn = http.client.HTTPConnection(
                parts.hostname or "127.0.0.1", parts.port, timeout=timeout
            )
        try:
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            conn.request(method, path or "/", body=body, headers=dict(headers or {}))
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def admin(self, action: str, **body: Any) -> Any:
        """``POST /admin/<action>`` with a JSON body; the JSON answer (raises on non-200)."""
        status, _, data = self.request(
            "POST",
            f"{self.base}/admin/{action}",
            orjson.dumps(body),
            {"Content-Type": "application/json"},
        )
        if status != 200:
            raise RuntimeError(f"/admin/{action} answered {status}: {data[:500]!r}")
        return orjson.loads(data)

    # ---- the levers ---------------------------------------------------------------------------

    def approve(
        self, url: str, subject: str | None = None, *, deny: bool = False, follow: bool = False
    ) -> str:
        """Play the person: open an authorization URL, consent, return the redirect's URL.

        With auto-approval that is the 302 of the URL itself; with ``require_person`` the
        login page is submitted (as ``subject``, or denied). Raises when no redirect comes.
        ``follow=True`` then also GETs the redirect URL, as a browser would (to a client's
        loopback listener), and raises unless that answers 2xx.
        """
        status, headers, body = self.request("GET", url)
        if status == 200:
            found = _REQUEST_ID.search(body.decode(errors="replace"))
            if found is None:
                raise RuntimeError(f"no login form in the authorization page: {body[:300]!r}")
            form: dict[str, str] = {
                "request_id": found.group(1),
                "decision": "deny" if deny else "approve",
            }
            if subject is not None:
                form["subject"] = subject
            status, headers, body = self.request(
                "POST",
                self.endpoint("login"),
                urlencode(form).encode(),
                {"Content-Type": "application/x-www-form-urlencoded"},
            )
        if status != 302:
            raise RuntimeError(f"the authorization answered {status}: {body[:300]!r}")
        location = headers["location"]
        if follow:
            status, _, body = self.request("GET", location)
            if not 200 <= status < 300:
                raise RuntimeError(f"the redirect target answered {status}: {body[:300]!r}")
        return location

    def revoke(
        self,
        token: str | None = None,
        *,
        all: bool = False,
        client_id: str | None = None,
        sub: str | None = None,
    ) -> int:
        """Revoke a token (a refresh token: its whole family), every token of a client and/or
        subject (their families), or every token; returns how many tokens it revoked."""
        body = {"token": token, "all": all, "client_id": client_id, "sub": sub}
        return int(self.admin("revoke", **body)["revoked"])

    def expire_access_tokens(self) -> int:
        """Make every access token expire now (refresh tokens stay)."""
        return int(self.admin("expire")["expired"])

    def set_issuer(self, issuer: str | None) -> None:
        """Advertise another issuer (None: the real one again) in metadata and ``iss``."""
        self.admin("issuer", issuer=issuer)

    def set_iss(self, mode: str) -> None:
        """``iss`` on redirects: ``correct``, ``wrong`` or ``none``."""
        self.admin("iss", mode=mode)

    def add_client(self, client_id: str, **metadata: Any) -> None:
        """Pre-register a client (``client_secret``, ``redirect_uris``, ``public_key``, ...)."""
        self.admin("clients", client_id=client_id, **metadata)

    def set_hostile(self, **levers: Any) -> dict[str, Any]:
        """Change the hostile levers (``POST /admin/hostile``): ``split_bodies`` (a delay in
        seconds: every answer's body in two segments; None: whole), ``registration_padding``
        (bytes added to every registration answer), ``metadata_status`` (every metadata
        request answers it; None: the documents). Returns the levers now set."""
        answer: dict[str, Any] = self.admin("hostile", **levers)
        return answer

    def forget_clients(self) -> None:
        """Drop every registered (DCR, CIMD) client and revoke every token."""
        self.admin("reset")

    def clients(self) -> list[dict[str, Any]]:
        """Every client as the server knows it (no secrets)."""
        status, _, data = self.request("GET", f"{self.base}/admin/clients")
        assert status == 200, data
        result: list[dict[str, Any]] = orjson.loads(data)
        return result

    def host_client_document(self, name: str, metadata: Mapping[str, Any]) -> str:
        """Serve a client ID metadata document at ``<base>/client-docs/<name>``; returns its
        ``client_id``, which defaults to that URL (as a valid document's must be).

        Give an ``https`` ``client_id`` (``https://app.example/client.json``) to use that
        as the client id: the server reads the document it hosts instead of fetching the URL.
        """
        url = f"{self.base}/client-docs/{name}"
        doc = {"client_id": url, **metadata}
        status, _, data = self.request(
            "PUT", f"{self.base}/admin/client-docs/{name}", orjson.dumps(doc)
        )
        assert status == 200, data
        return str(doc["client_id"])

    # ---- the log ------------------------------------------------------------------------------

    def log(self) -> list[dict[str, Any]]:
        """Every record so far, in order: whole lines only (the server may be writing the
        last one as it is read; it is there at the next read)."""
        data = self.log_path.read_bytes()
        lines = data[: data.rfind(b"\n") + 1].splitlines()
        return [orjson.loads(line) for line in lines if line.strip()]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.log() if r.get("event") == name]

    def requests(self, path: str | None = None) -> list[dict[str, Any]]:
        """The ``http`` records (every request, answered), those to ``path`` when given
        (a path like ``/token`` also matches ``<issuer path>/token``)."""
        return [
            r
            for r in self.events("http")
            if path is None or r["path"] == path or r["path"].endswith(path)
        ]

    def find(
        self, match: str | Mapping[str, Any] | Callable[[dict[str, Any]], bool]
    ) -> list[dict[str, Any]]:
        """Records matching ``match``: an event name, a mapping (every key equal, e.g.
        ``{"event": "token", "grant": "refresh_token"}``) or a predicate."""
        if isinstance(match, str):
            name = match
            return self.events(name)
        if isinstance(match, Mapping):
            items = list(match.items())
            return [r for r in self.log() if all(k in r and r[k] == v for k, v in items)]
        return [r for r in self.log() if match(r)]

    def wait_for(
        self,
        match: str | Mapping[str, Any] | Callable[[dict[str, Any]], bool],
        timeout: float = 5.0,
        *,
        count: int = 1,
    ) -> dict[str, Any]:
        """Wait until ``count`` records match (see :meth:`find`); return the ``count``-th.
        Polls the log every 10 ms until the deadline, then raises ``TimeoutError``."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.find(match)
            if len(found) >= count:
                return found[count - 1]
            if time.monotonic() >= deadline:
                tail = self.log()[-5:]
                raise TimeoutError(
                    f"{match!r}: {len(found)} match(es) within {timeout}s; last records: {tail!r}"
                )
            time.sleep(0.01)
