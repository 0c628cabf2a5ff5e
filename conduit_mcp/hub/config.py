"""The ``mcpServers`` document desktop hosts use, read into frozen entries (pure functions).

One loader serves the Hub and the CLI's ``--config``: :func:`load_config` takes a path, a
JSON string or a mapping and returns a :class:`HubConfig` whose entries are validated and
expanded, but not yet turned into transports (``conduit_mcp.hub.transports`` does that), so
this module does no I/O besides reading the file and ``os.environ``.

Every mistake is ``Error("config", "servers.<name>.<key>")`` (or ``"config"`` for the
document itself) whose message says what to change. A value from ``env`` or ``headers`` is
never shown: those carry API keys and tokens.

>>> cfg = load_config({"mcpServers": {
...     "files": {"command": "python", "args": ["-m", "files_server"], "env": {"K": "s3cret"}},
...     "remote": {"url": "http://127.0.0.1:8000/mcp", "type": "http"},
...     "off": {"command": "x", "disabled": True},
... }})
>>> [(e.name, e.type) for e in cfg.servers.values()]
[('files', 'stdio'), ('remote', 'http')]
>>> cfg.disabled
('off',)
>>> load_config({"mcpServers": {"files": {"command": 3, "env": {"K": "s3cret"}}}})
Traceback (most recent call last):
...
conduit_mcp.errors.Error: config (servers.files.command): server 'files': 'command' must be a non-empty string
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, cast, get_args

from ..errors import Error

__all__ = [
    "DEFAULT_SEPARATOR",
    "HubConfig",
    "ServerEntry",
    "TransportType",
    "expand",
    "load_config",
    "parse_entry",
]

log = logging.getLogger("conduit_mcp.hub")

#: How a remote entry is reached. ``http`` and ``streamable-http`` are the same transport.
TransportType = Literal["stdio", "http", "streamable-http", "sse"]
TRANSPORT_TYPES: Final[frozenset[str]] = frozenset(get_args(TransportType))

#: Qualified names are ``<server><separator><name>`` (``files.read``) by default.
DEFAULT_SEPARATOR: Final = "."

# The keys of an entry this loader reads; anything else is kept and ignored (hosts add their
# own, e.g. "autoApprove", "timeout", "alwaysAllow").
_KNOWN: Final = frozenset(
    {"command", "args", "env", "cwd", "url", "headers", "type", "transport", "disabled", "conduit"}
)
# ``${VAR}`` or ``${VAR:-default}`` (the default may be empty; no nesting).
_VAR: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class ServerEntry:
    """One server of the document, validated and expanded.

    ``conduit`` holds the entry's conduit options (client options such as ``protocol``,
    ``request_timeout``, ``on_give_up``, and transport options such as ``auth``); they are
    checked when the entry is started. ``extra`` is every key the loader does not know, kept
    for the host. ``repr`` shows the name, type and command or URL host only.

    >>> cfg = load_config({"mcpServers": {"remote": {
    ...     "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer s3cret"},
    ...     "conduit": {"request_timeout": 10}, "x-host-colour": "blue"}}})
    >>> entry = cfg.servers["remote"]
    >>> entry.type, dict(entry.conduit), dict(entry.extra)
    ('http', {'request_timeout': 10}, {'x-host-colour': 'blue'})
    >>> "s3cret" in repr(entry)
    False
    """

    name: str
    type: TransportType
    command: str | None = None
    args: tuple[str, ...] = field(default=(), repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    conduit: Mapping[str, Any] = field(default_factory=dict, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class HubConfig:
    """The enabled servers in document order, and the names of the disabled ones.

    >>> cfg = load_config({"mcpServers": {"a": {"command": "a"}, "b": {"command": "b",
    ...     "disabled": True}, "c": {"command": "c"}}})
    >>> list(cfg.servers), cfg.disabled
    (['a', 'c'], ('b',))
    """

    servers: Mapping[str, ServerEntry]
    disabled: tuple[str, ...] = ()


def _bad(name: str, key: str, why: str, hint: str = "") -> Error:
    message = f"server {name!r}: {why}" + (f"; {hint}" if hint else "")
    return Error("config", f"servers.{name}.{key}" if key else f"servers.{name}", message)


def expand(value: str, environ: Mapping[str, str], where: tuple[str, str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` from ``environ``; an unset variable without a
    default is an error naming the variable (never its value, never the text around it).

    >>> expand("Bearer ${TOKEN}", {"TOKEN": "t"}, ("s", "headers"))
    'Bearer t'
    >>> expand("${HOST:-127.0.0.1}:${PORT:-8000}", {}, ("s", "url"))
    '127.0.0.1:8000'
    >>> expand("${NOPE}", {}, ("s", "env"))
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (servers.s.env): server 's': ${NOPE} is not set in the environment; set it, or write ${NOPE:-default}
    """

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found is not None:
            return found
        if default is not None:
            return default
        raise _bad(
            where[0],
            where[1],
            f"${{{name}}} is not set in the environment",
            f"set it, or write ${{{name}:-default}}",
        )

    return _VAR.sub(one, value) if "${" in value else value


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    separator: str = DEFAULT_SEPARATOR,
) -> HubConfig:
    """Read an ``mcpServers`` document: a path, a JSON string or a mapping.

    ``{"mcpServers": {...}}`` (desktop hosts) and ``{"servers": {...}}`` (VS Code's
    ``mcp.json``) are both accepted, and so is the bare mapping of servers. ``environ``
    (default ``os.environ``) feeds ``${VAR}`` expansion in ``command``, ``args``, ``env``,
    ``cwd``, ``url``, ``headers`` and string values under ``conduit``. A server name that
    contains ``separator`` is refused: its qualified tool names could not be split again.

    >>> cfg = load_config(
    ...     '{"mcpServers": {"files": {"command": "${PY:-python3}", "args": ["-m", "files"]}}}',
    ...     environ={"PY": "/usr/bin/python3"})
    >>> cfg.servers["files"].command
    '/usr/bin/python3'
    >>> load_config({"mcpServers": {"my.files": {"command": "x"}}})
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (servers.my.files): ...

    Raises:
        Error: ``config``/``config`` for a document that cannot be read or is not one;
            ``config``/``servers.<name>.<key>`` for a bad entry.
    """
    env = os.environ if environ is None else environ
    document = _document(source)
    servers = _servers_of(document)
    entries: dict[str, ServerEntry] = {}
    disabled: list[str] = []
    for name, raw in servers.items():
        check_name(name, separator)
        if not isinstance(raw, Mapping):
            raise _bad(
                name, "", "an entry must be a JSON object", '{"command": ...} or {"url": ...}'
            )
        if raw.get("disabled") is True:
            disabled.append(name)
            continue
        entries[name] = parse_entry(name, raw, env)
    return HubConfig(MappingProxyType(entries), tuple(disabled))


def check_name(name: Any, separator: str = DEFAULT_SEPARATOR) -> None:
    """A server name: a non-empty string without the separator or surrounding space."""
    if not isinstance(name, str) or not name or name.strip() != name:
        raise Error(
            "config", "servers", f"server name {name!r} must be a non-empty string without spaces"
        )
    if separator and separator in name:
        raise _bad(
            name,
            "",
            f"the name contains the separator {separator!r}",
            "rename the entry, or start the Hub with another separator=",
        )


def parse_entry(name: str, raw: Mapping[str, Any], environ: Mapping[str, str]) -> ServerEntry:
    """One entry, validated and expanded (see :func:`load_config`)."""
    unknown = sorted(k for k in raw if k not in _KNOWN)
    if unknown:
        log.debug("server %r: ignoring keys %s", name, unknown)
    disabled = raw.get("disabled", False)
    if not isinstance(disabled, bool):
        raise _bad(name, "disabled", "'disabled' must be true or false")
    kind = _type_of(name, raw)
    conduit = _conduit(name, raw.get("conduit"), environ)
    extra = {k: raw[k] for k in unknown}
    if kind == "stdio":
        for key in ("url", "headers"):
            if key in raw:
                raise _bad(name, key, f"a stdio entry ('command') has no {key!r}")
        command = raw.get("command")
        if not isinstance(command, str) or not command:
            raise _bad(name, "command", "'command' must be a non-empty string")
        args = raw.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _bad(name, "args", "'args' must be a list of strings")
        cwd = raw.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise _bad(name, "cwd", "'cwd' must be a string")
        where = (name, "args")
        return ServerEntry(
            name,
            "stdio",
            command=expand(command, environ, (name, "command")),
            args=tuple(expand(a, environ, where) for a in args),
            env=MappingProxyType(_strings(name, "env", raw.get("env"), environ)),
            cwd=expand(cwd, environ, (name, "cwd")) if cwd is not None else None,
            conduit=conduit,
            extra=MappingProxyType(extra),
        )
    for key in ("command", "args", "env", "cwd"):
        if key in raw:
            raise _bad(name, key, f"a remote entry ('url') has no {key!r}")
    url = raw.get("url")
    if not isinstance(url, str) or not url:
        raise _bad(name, "url", "'url' must be a non-empty string")
    return ServerEntry(
        name,
        kind,
        url=expand(url, environ, (name, "url")),
        headers=MappingProxyType(_strings(name, "headers", raw.get("headers"), environ)),
        conduit=conduit,
        extra=MappingProxyType(extra),
    )


def _type_of(name: str, raw: Mapping[str, Any]) -> TransportType:
    given = [k for k in ("type", "transport") if k in raw]
    values = {raw[k] for k in given if isinstance(raw[k], str)}
    for key in given:
        value = raw[key]
        if not isinstance(value, str) or value not in TRANSPORT_TYPES:
            raise _bad(
                name,
                key,
                f"{key!r} must be one of {', '.join(sorted(TRANSPORT_TYPES))}",
            )
    if len(values) > 1:
        raise _bad(name, "type", "'type' and 'transport' say different things", "keep one")
    has_command, has_url = "command" in raw, "url" in raw
    if has_command and has_url:
        raise _bad(name, "url", "an entry has 'command' (stdio) or 'url' (remote), not both")
    if not values:
        if has_command:
            return "stdio"
        if has_url:
            return "http"
        raise _bad(name, "command", "an entry needs 'command' (stdio) or 'url' (remote)")
    kind = cast(TransportType, values.pop())
    if kind == "stdio" and not has_command:
        raise _bad(name, "command", "a stdio entry needs 'command'")
    if kind != "stdio" and not has_url:
        raise _bad(name, "url", f"a {kind!r} entry needs 'url'")
    return kind


def _strings(name: str, key: str, value: Any, environ: Mapping[str, str]) -> dict[str, str]:
    # The values are never shown: env and headers carry the secrets.
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _bad(name, key, f"{key!r} must map names to strings")
    return {k: expand(v, environ, (name, key)) for k, v in value.items()}


def _conduit(name: str, value: Any, environ: Mapping[str, str]) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise _bad(name, "conduit", "'conduit' must be an object of conduit-mcp options")
    return MappingProxyType(
        {k: _expanded(v, environ, (name, f"conduit.{k}")) for k, v in value.items()}
    )


def _expanded(value: Any, environ: Mapping[str, str], where: tuple[str, str]) -> Any:
    if isinstance(value, str):
        return expand(value, environ, where)
    if isinstance(value, Mapping):
        return {k: _expanded(v, environ, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_expanded(v, environ, where) for v in value]
    return value


def _document(source: Any) -> Any:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and not source.lstrip().startswith("{")
    ):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise Error(
                "config",
                "config",
                f"cannot read the config file {str(path)!r}: {exc.strerror or exc}",
            ) from None
        except UnicodeDecodeError:
            raise Error("config", "config", f"the config file {str(path)!r} is not UTF-8") from None
        return _json(text, f"the config file {str(path)!r}")
    if isinstance(source, str):
        return _json(source, "the config text")
    raise Error(
        "config",
        "config",
        f"a config is a path, a JSON string or a mapping, not {type(source).__name__}",
    )


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # Position only: the text around the error may be a secret.
        raise Error(
            "config", "config", f"{what} is not valid JSON (line {exc.lineno}, column {exc.colno})"
        ) from None


def _servers_of(document: Any) -> Mapping[str, Any]:
    if isinstance(document, Mapping):
        for key in ("mcpServers", "servers"):
            if key in document:
                servers = document[key]
                if not isinstance(servers, Mapping):
                    raise Error("config", "config", f"{key!r} must be an object of servers")
                return servers
        if all(isinstance(v, Mapping) for v in document.values()) and document:
            return document
    raise Error(
        "config",
        "config",
        'the config has no "mcpServers" object',
    )
