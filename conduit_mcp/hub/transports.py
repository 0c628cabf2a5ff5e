"""A config entry made into what ``Client.start`` takes: a transport and client options.

The transport comes from one small table keyed by the entry's ``type`` (``stdio``, ``http``,
``streamable-http``, ``sse``), so a new transport is one row. The entry's ``"conduit"``
object is split: client options (``conduit_mcp.ClientOptions``) go to the client, transport
options (``inherit_env``, ``verify``, ``auth``, ``bearer``, ...) to the transport. Every
mistake is ``config``/``servers.<name>.<key>``; no value of ``env`` or ``headers`` is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ..config import OPTION_NAMES, Config, build_config
from ..errors import Error
from ..transports.http_spec import Http
from ..transports.sse_spec import Sse
from ..transports.stdio_spec import Stdio
from .config import ServerEntry

__all__ = ["STDIO_OPTIONS", "HTTP_OPTIONS", "TRANSPORTS", "build"]

#: ``conduit`` keys that configure a stdio transport.
STDIO_OPTIONS: Final = frozenset({"inherit_env", "stderr_limit", "close_grace"})
#: ``conduit`` keys that configure an HTTP transport (``auth``: ``{"bearer": ...}``,
#: ``{"oauth": {...OAuth fields}}`` or ``"oauth"``).
HTTP_OPTIONS: Final = frozenset(
    {
        "auth",
        "bearer",
        "credential_id",
        "auth_timeout",
        "max_response",
        "stream_idle",
        "connect_timeout",
        "pool_limit",
        "close_timeout",
        "verify",
        "keep_alive",
    }
)

Authorize = Callable[[str, str], object]


def _stdio(entry: ServerEntry, options: dict[str, Any], on_authorize: Authorize | None) -> Any:
    assert entry.command is not None
    return Stdio(
        entry.command, list(entry.args), env=dict(entry.env) or None, cwd=entry.cwd, **options
    )


def _http(entry: ServerEntry, options: dict[str, Any], on_authorize: Authorize | None) -> Any:
    auth = options.pop("auth", None)
    if auth is not None:
        auth_options = _auth(entry, auth, on_authorize)
        options.update(auth_options)
    return Http(entry.url or "", headers=dict(entry.headers) or None, **options)


def _sse(entry: ServerEntry, options: dict[str, Any], on_authorize: Authorize | None) -> Any:
    auth = options.pop("auth", None)
    if auth is not None:
        options.update(_auth(entry, auth, on_authorize))
    return Sse(entry.url or "", headers=dict(entry.headers) or None, **options)


#: type -> (its transport options, the constructor).
TRANSPORTS: Final[Mapping[str, tuple[frozenset[str], Callable[..., Any]]]] = {
    "stdio": (STDIO_OPTIONS, _stdio),
    "http": (HTTP_OPTIONS, _http),
    "streamable-http": (HTTP_OPTIONS, _http),
    "sse": (HTTP_OPTIONS, _sse),
}


def _auth(entry: ServerEntry, auth: Any, on_authorize: Authorize | None) -> dict[str, Any]:
    where = f"servers.{entry.name}.conduit.auth"
    if isinstance(auth, Mapping) and set(auth) == {"bearer"} and isinstance(auth["bearer"], str):
        return {"bearer": auth["bearer"]}
    if auth == "oauth" or (isinstance(auth, Mapping) and set(auth) == {"oauth"}):
        from ..oauth.config import OAuth

        fields = dict(auth["oauth"]) if isinstance(auth, Mapping) else {}
        if not isinstance(fields, dict):
            raise Error("config", where, f"server {entry.name!r}: 'oauth' must be an object")
        if on_authorize is not None and "on_authorize" not in fields:
            name = entry.name
            fields["on_authorize"] = lambda url: on_authorize(name, url)
        try:
            return {"auth": OAuth(**fields)}
        except TypeError:
            raise Error(
                "config", where, f"server {entry.name!r}: unknown OAuth field in 'oauth'"
            ) from None
        except Error as exc:
            raise Error("config", where, f"server {entry.name!r}: {exc.message}") from None
    raise Error(
        "config",
        where,
        f'server {entry.name!r}: \'auth\' must be {{"bearer": TOKEN}}, "oauth" or '
        '{"oauth": {...}}',
    )


def build(
    entry: ServerEntry,
    defaults: Mapping[str, Any] | None = None,
    on_authorize: Authorize | None = None,
) -> tuple[Any, Config]:
    """The transport and the validated client options of ``entry`` (``defaults`` under the
    entry's own).

    Raises:
        Error: ``config``/``servers.<name>.<key>``.
    """
    transport_keys, make = TRANSPORTS[entry.type]
    options: dict[str, Any] = dict(defaults or {})
    transport_options: dict[str, Any] = {}
    for key, value in entry.conduit.items():
        if key in OPTION_NAMES:
            options[key] = value
        elif key in transport_keys:
            transport_options[key] = value
        else:
            import difflib

            close = difflib.get_close_matches(key, [*OPTION_NAMES, *transport_keys], n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise Error(
                "config",
                f"servers.{entry.name}.conduit.{key}",
                f"server {entry.name!r}: {key!r} is not a conduit option for a {entry.type!r} "
                f"entry{hint}",
            )
    try:
        transport = make(entry, transport_options, on_authorize)
    except Error as exc:
        if exc.reason.startswith("servers."):
            raise
        key = exc.reason.rsplit(".", 1)[-1]
        if key in transport_options:
            key = f"conduit.{key}"
        raise Error(
            "config", f"servers.{entry.name}.{key}", f"server {entry.name!r}: {exc.message}"
        ) from None
    except TypeError:
        raise Error(
            "config",
            f"servers.{entry.name}.conduit",
            f"server {entry.name!r}: a transport option has the wrong type",
        ) from None
    try:
        config = build_config(options)
    except Error as exc:
        key = exc.reason if exc.reason in OPTION_NAMES else "conduit"
        raise Error(
            "config", f"servers.{entry.name}.conduit.{key}", f"server {entry.name!r}: {exc.message}"
        ) from None
    return transport, config
