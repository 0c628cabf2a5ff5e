"""Era negotiation as pure decisions: what the ``server/discover`` probe's outcome means.

The connection sends the probe, turns whatever happened into one outcome value
(:class:`ProbeResult`, :class:`ProbeError`, :class:`ProbeTimeout`, :class:`ProbeExit`, or on
HTTP :class:`HttpProbe`), and acts on the :data:`Decision` that :func:`classify_probe`
returns. The rules are those of docs/connection.md, "Era discovery", with the detail of the
MCP spec 2026-07-28 (pages server/discover, basic/versioning, basic/transports/stdio):

* a ``DiscoverResult`` is modern;
* ``-32022`` naming a mutual modern version is discovered once more with it, never a
  fallback; a second refusal, or no version in common, closes;
* legacy evidence, i.e. any other error or a timeout, falls back to ``initialize`` in auto
  mode; the fallback is not keyed to one code (basic/transports/stdio: "MUST NOT be keyed
  to one specific error code"); in modern mode it closes instead;
* the server exiting during the probe reconnects, and the next attempt starts with
  ``initialize``;
* a recognised modern error naming no common version, or a missing client capability,
  closes.

Only the final modern codes -32020/-32021/-32022 prove a modern peer; the retired draft
numbers -32001/-32003/-32004 are ordinary "other errors", i.e. legacy evidence (see
``jsonrpc.RETIRED_*`` for why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from ..errors import Error
from .handshake import DiscoverInfo, InitInfo, check_initialize, parse_discover
from .jsonrpc import (
    HEADER_MISMATCH,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    MODERN_ERROR_CODES,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from .versions import mutual_version

# Re-exported: the probe's Modern decision carries a DiscoverInfo, and the connection reads
# both handshakes' answers from here.
__all__ = [
    "AuthRequired",
    "Close",
    "Decision",
    "DiscoverInfo",
    "HttpProbe",
    "InitInfo",
    "KeepWaiting",
    "Legacy",
    "Modern",
    "ProbeError",
    "ProbeExit",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeTimeout",
    "Reconnect",
    "Rediscover",
    "check_initialize",
    "classify_initialize_refusal",
    "classify_probe",
    "parse_discover",
]

# -- probe outcomes (inputs) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """The probe was answered with a JSON-RPC result (the ``result`` member)."""

    result: Any


@dataclass(frozen=True, slots=True)
class ProbeError:
    """The probe was answered with a JSON-RPC error."""

    code: int
    message: str = ""
    data: Any = None


@dataclass(frozen=True, slots=True)
class ProbeTimeout:
    """The probe got no answer within ``probe_timeout``."""


@dataclass(frozen=True, slots=True)
class ProbeExit:
    """The server process exited, or the transport closed, while the probe was pending."""


@dataclass(frozen=True, slots=True)
class HttpProbe:
    """An HTTP answer to the probe POST that the transport did not turn into a JSON-RPC
    result or error itself: the status and the raw body (None or ``b""`` when empty).
    """

    status: int
    body: bytes | None = field(default=None, repr=False)


ProbeOutcome = ProbeResult | ProbeError | ProbeTimeout | ProbeExit | HttpProbe

# -- decisions (outputs) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Modern:
    """Modern: use ``version`` on every request from now on; ``info`` is what discover said."""

    version: str
    info: DiscoverInfo


@dataclass(frozen=True, slots=True)
class Rediscover:
    """The server refused our version with -32022 but supports ``version``: probe again."""

    version: str


@dataclass(frozen=True, slots=True)
class Legacy:
    """Run the ``initialize`` handshake. ``version`` is the one to offer, when the server
    named one (else the newest legacy version, or the user's pin).
    """

    reason: str
    version: str | None = None


@dataclass(frozen=True, slots=True)
class Reconnect:
    """The probe could not be judged: reconnect after the backoff. With ``next_legacy``
    the next attempt skips the probe once and starts with ``initialize``.
    """

    reason: str
    next_legacy: bool = False


@dataclass(frozen=True, slots=True)
class Close:
    """Negotiation failed for good: the connection closes with ``Error("closed", reason)``.

    ``message`` is for people; ``data`` is the server's error data when there was one
    (``requiredCapabilities`` for -32021, ``supported``/``requested`` for -32022).
    """

    reason: str
    message: str = ""
    data: Any = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class AuthRequired:
    """HTTP 401/403: not era evidence. The connection authorizes (discovering leads to
    authorizing on 401) and probes again, or fails with kind ``auth`` without OAuth.
    """

    status: int


Decision = Modern | Rediscover | Legacy | Reconnect | Close | AuthRequired


@dataclass(frozen=True, slots=True)
class KeepWaiting:
    """``initialize`` was refused, but the probe that timed out may still be answered: the
    fallback was taken on silence alone, and a slow modern server answers the probe late."""

    reason: str


# -- the classifier ------------------------------------------------------------------------


def classify_probe(
    outcome: ProbeOutcome,
    transport_kind: Literal["stdio", "http"],
    *,
    mode: Literal["auto", "modern"],
    offered: str,
    retried: bool,
) -> Decision:
    """What the probe's ``outcome`` means (docs/connection.md, "Era discovery"; module
    docstring).

    ``offered`` is the version the probe carried in ``_meta``; ``retried`` is True when
    this probe is already the one :class:`Rediscover` asked for. ``mode="legacy"`` never
    probes, so it is an argument error here.
    """
    if mode != "auto" and mode != "modern":
        raise Error("argument", "mode", "classify_probe needs mode 'auto' or 'modern'")
    if transport_kind != "stdio" and transport_kind != "http":
        raise Error("argument", "transport_kind", "transport_kind must be 'stdio' or 'http'")
    if isinstance(outcome, ProbeResult):
        return _on_result(outcome.result, mode, offered)
    if isinstance(outcome, ProbeError):
        return _on_error(outcome.code, outcome.message, outcome.data, mode, offered, retried)
    if isinstance(outcome, ProbeTimeout):
        # MCP spec 2026-07-28, basic/transports/stdio: "Any other error, or a timeout, means
        # legacy" (legacy servers may stay silent). Kept for HTTP too: a server that never
        # answers an unknown method would otherwise be reconnected to forever.
        return _legacy_evidence("probe_timeout", mode)
    if isinstance(outcome, ProbeExit):
        # Reconnect, and the next attempt starts with initialize (a legacy server
        # may die on an unknown method). Modern mode never falls back, so it just retries.
        # Over HTTP the connection dropping says nothing about the era (a server restart,
        # a refused connection): plain reconnect.
        if transport_kind == "http":
            return Reconnect("unreachable")
        return Reconnect("server_exited", next_legacy=mode == "auto")
    if isinstance(outcome, HttpProbe):
        if transport_kind != "http":
            raise Error("argument", "outcome", "an HttpProbe outcome needs transport_kind 'http'")
        return _on_http(outcome, mode, offered, retried)
    raise Error("argument", "outcome", f"not a probe outcome: {type(outcome).__name__}")


def classify_initialize_refusal(
    code: int, data: Any, *, probe_outstanding: bool
) -> Rediscover | KeepWaiting | Close:
    """What a refused ``initialize`` means in auto mode, after the fallback it answers.

    The fallback to ``initialize`` can rest on a probe that only timed out: a server slower
    to start than ``probe_timeout`` (a first ``uvx`` or ``npx`` run, a container, a slow
    import) then answers both requests, in order. So, in auto mode:

    * ``-32022`` naming a version we speak in the modern era proves a modern server: discover
      again with it (MCP spec 2026-07-28, basic/versioning: the error lists what the server
      supports);
    * any other refusal while the probe is still unanswered says nothing final: keep waiting
      for the probe's late answer (bounded by the handshake's ``request_timeout``);
    * otherwise the server refused the handshake: close.

    >>> classify_initialize_refusal(-32022, {"supported": ["2026-07-28"]}, probe_outstanding=False)
    Rediscover(version='2026-07-28')
    >>> classify_initialize_refusal(-32601, None, probe_outstanding=True)
    KeepWaiting(reason='probe_outstanding')
    >>> classify_initialize_refusal(-32601, None, probe_outstanding=False).reason
    'initialize_refused'
    """
    if code == UNSUPPORTED_PROTOCOL_VERSION:
        listed = data.get("supported") if type(data) is dict else None
        if isinstance(listed, (list, tuple)):
            version = mutual_version(listed, "modern")
            if version is not None:
                return Rediscover(version)
    if probe_outstanding:
        return KeepWaiting("probe_outstanding")
    return Close("initialize_refused", "the server refused initialize")


def _legacy_evidence(reason: str, mode: str) -> Decision:
    if mode == "modern":
        # protocol="modern": legacy evidence closes the connection instead of falling back.
        return Close("legacy_server", f"the server does not speak the modern protocol ({reason})")
    return Legacy(reason)


def _on_result(result: Any, mode: str, offered: str) -> Decision:
    try:
        info = parse_discover(result)
    except Error:
        # Not a DiscoverResult (e.g. ``{}``): an unrecognised answer is legacy evidence.
        return _legacy_evidence("not_discover_result", mode)
    if offered in info.versions:
        return Modern(offered, info)
    version = mutual_version(info.versions, "modern")
    if version is not None:
        return Modern(version, info)
    return _no_modern_version(info.versions, mode, None)


def _no_modern_version(supported: Any, mode: str, data: Any) -> Decision:
    """The server speaks modern but has no modern version in common with us.

    MCP spec 2026-07-28, basic/versioning: ``supported`` "may contain legacy versions ... Switching to one of
    them means switching to the initialize flow". That is negotiation, not a fallback on
    evidence, so in auto mode a mutual legacy version leads to ``initialize`` with it. In
    modern mode (the user excluded legacy) there is no version in common: close.
    """
    legacy = mutual_version(supported, "legacy")
    if legacy is not None and mode == "auto":
        return Legacy("server_prefers_legacy", legacy)
    return Close("no_mutual_version", "the server supports no protocol version we do", data)


def _on_error(
    code: int, message: str, data: Any, mode: str, offered: str, retried: bool
) -> Decision:
    if code == UNSUPPORTED_PROTOCOL_VERSION:
        if retried:
            # A second refusal closes (no ping-pong between versions).
            return Close("version_refused", "the server refused the version it proposed", data)
        listed = data.get("supported") if type(data) is dict else None
        if not isinstance(listed, (list, tuple)):
            listed = []
        # -32022 with a mutual version: discover once more with that version.
        # That includes the version just offered: a server can refuse it transiently (a
        # rolling upgrade) and list it; the `retried` rule above bounds it to one retry.
        version = mutual_version(listed, "modern")
        if version is not None:
            return Rediscover(version)
        return _no_modern_version(listed, mode, data)
    if code == MISSING_REQUIRED_CLIENT_CAPABILITY:
        return Close(
            "missing_client_capability",
            f"the server requires a client capability we lack: {message[:200]}",
            data,
        )
    if code == HEADER_MISMATCH:
        # A modern server that rejects our HTTP headers: never a fallback (MCP spec
        # 2026-07-28, basic/transports/streamable-http), and re-sending cannot help.
        return Close("header_mismatch", f"the server rejected the headers: {message[:200]}", data)
    return _legacy_evidence("probe_error", mode)


def _on_http(probe: HttpProbe, mode: str, offered: str, retried: bool) -> Decision:
    """MCP spec 2026-07-28, basic/transports/streamable-http, "Detecting the era on HTTP",
    plus what real legacy servers answer.

    * A body holding a recognised modern error (-32020/-32021/-32022), on any status:
      handled exactly like the same error over stdio (never a fallback).
    * 2xx with a JSON-RPC result: like :class:`ProbeResult`.
    * 401/403: :class:`AuthRequired`, not evidence either way.
    * 429, or 5xx without a JSON-RPC error body: the server (or a proxy) is overloaded or
      down, which says nothing about its era: :class:`Reconnect` after the backoff.
    * Anything else (400 with an empty or unrecognised body, 404, 405, other 4xx, any
      other JSON-RPC error, a 2xx that is not a DiscoverResult) is legacy evidence. This
      covers what real legacy servers answer: 400 -32000 "Server not initialized" with id
      null, 400 -32600 "Missing session ID" with id "server-error".
    """
    status = probe.status
    if status in (401, 403):
        return AuthRequired(status)
    body = _json_body(probe.body)
    error = _error_member(body)
    if error is not None and error[0] in MODERN_ERROR_CODES:
        return _on_error(*error, mode, offered, retried)
    if status == 429:
        return Reconnect("http_429")
    if 500 <= status <= 599 and error is None:
        return Reconnect(f"http_{status}")
    if 200 <= status <= 299 and error is None and type(body) is dict and "result" in body:
        return _on_result(body["result"], mode, offered)
    return _legacy_evidence("probe_error" if error is not None else f"http_{status}", mode)


def _json_body(body: bytes | None) -> Any:
    if not body:
        return None
    try:
        return orjson.loads(body)
    except ValueError:
        return None


def _error_member(body: Any) -> tuple[int, str, Any] | None:
    """The JSON-RPC error in an HTTP body: ``{"error": {...}}``, or a bare error object
    ``{"code": ..., "message": ...}`` as some servers write it. None if there is none.
    """
    if type(body) is not dict:
        return None
    error = body.get("error")
    if type(error) is not dict:
        error = body
    code = error.get("code")
    if type(code) is not int:
        return None
    message = error.get("message")
    return code, message if type(message) is str else "", error.get("data")
