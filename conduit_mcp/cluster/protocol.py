"""The host protocol: what crosses between a caller and a host, as plain data.

A host is described by a :class:`HostSpec` (its servers, in the Hub's config format, and
plain options), so an engine that restarts a host rebuilds it from the spec, never from a
history of calls. Calls, results, errors, progress and notifications cross as dicts of JSON
values; nothing callable ever crosses: :func:`check_plain` refuses one in a spec or a call's
arguments with a ``config`` (or ``argument``) error before anything is sent, and the caller's
callbacks (``on_progress``, notification subscribers) run on the caller's side, fed by
messages.

Secrets: a host expands ``${VAR}`` itself, from its own environment, so the caller's spec
holds only references. :func:`check_secrets` refuses a literal where a reference could stand
(``headers``, ``env``, a bearer token, an OAuth client secret) unless the engine's
transport is authenticated and encrypted; :func:`redact` scrubs the values a host expanded
from every text it sends back.

Everything here is pure (no engine, no threads), tested in ``tests/cluster/test_protocol.py``.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import KINDS, Error
from ..protocol.results import (
    parse_call_tool,
    parse_complete,
    parse_get_prompt,
    parse_read_resource,
)

#: The routed calls a host runs, by the Hub's method names.
OPS: Final = frozenset(
    {
        "call_tool",
        "get_prompt",
        "read_resource",
        "complete",
        "request",
        "subscribe",
        "unsubscribe",
        "set_logging_level",
    }
)

#: Hub options a spec may carry (plain values only; the client options of ``Client.start``
#: that are plain values pass too). Callables (``qualify``, ``on_authorize``, ``handler``,
#: ``backoff``...) cannot: they would have to cross the engine.
HUB_OPTIONS: Final = frozenset(
    {
        "separator",
        "name_pattern",
        "on_server_down",
        "max_restarts",
        "max_seconds",
        "restart_base",
        "restart_cap",
        "list_timeout",
    }
)

#: The most calls in one message (a batch); more in flight travel in several.
MAX_BATCH: Final = 256

_VAR: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: Where a credential is written in a server entry: these must be references.
_SECRET_MAPS: Final = ("headers", "env")
#: The shortest expanded value redacted from replies (shorter ones would scrub ordinary text).
MIN_REDACTED: Final = 4
REDACTED: Final = "***"


@dataclass(frozen=True)
class HostSpec:
    """One host, declaratively: its name, the tenant it serves, its servers (an
    ``mcpServers`` document, references unexpanded) and plain options for its Hub.

    >>> spec = HostSpec("t1-0", "t1", {"mcpServers": {"a": {"command": "srv"}}})
    >>> spec.servers()
    ('a',)
    """

    name: str
    tenant: str
    config: Mapping[str, Any]
    options: Mapping[str, Any] = field(default_factory=dict)
    resources: Mapping[str, float] = field(default_factory=dict)
    """The engine's resources the host asks for (Ray: custom resources, ``CPU``, ``GPU``,
    ``memory``); empty: placed by tenant (node affinity)."""

    def servers(self) -> tuple[str, ...]:
        """The servers' names, in config order."""
        return tuple(servers_of(self.config))

    def to_data(self) -> dict[str, Any]:
        """The spec as plain data (what crosses to the engine)."""
        return {
            "name": self.name,
            "tenant": self.tenant,
            "config": self.config,
            "options": dict(self.options),
            "resources": dict(self.resources),
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> HostSpec:
        return cls(
            data["name"],
            data["tenant"],
            data["config"],
            data.get("options", {}),
            data.get("resources", {}),
        )


def servers_of(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The server entries of a document (``mcpServers``, or VS Code's ``servers``).

    Raises:
        Error: ``config``/``config`` when there are none.
    """
    if isinstance(config, Mapping):
        for key in ("mcpServers", "servers"):
            found = config.get(key)
            if isinstance(found, Mapping):
                return found
    raise Error(
        "config",
        "config",
        'a host\'s config must be a mapping with "mcpServers": {name: entry, ...} '
        "(paths and JSON text are read on the caller's side with json.load first)",
    )


def check_plain(value: Any, where: str, kind: str = "config", depth: int = 0) -> None:
    """Refuse anything but JSON values (None, bool, int, finite float, str, lists, tuples,
    dicts with string keys): a callable or an object cannot cross to a host.

    >>> check_plain({"a": [1, "x", None]}, "options")
    >>> check_plain({"on_give_up": print}, "servers.a.conduit")
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (servers.a.conduit.on_give_up): servers.a.conduit.on_give_up is a callable: nothing callable crosses to a host (callbacks run on the caller's side: pass on_progress to the call, subscribe_notifications on the hub)
    """
    if depth > 64:
        raise Error(kind, where, f"{where} is nested too deeply to cross to a host")  # type: ignore[arg-type]
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Error(kind, where, f"{where} must be a finite number")  # type: ignore[arg-type]
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise Error(kind, where, f"{where} has a key that is not a string")  # type: ignore[arg-type]
            check_plain(v, f"{where}.{k}", kind, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_plain(v, f"{where}[{i}]", kind, depth + 1)
        return
    what = "a callable" if callable(value) else f"a {type(value).__name__}"
    raise Error(
        kind,  # type: ignore[arg-type]
        where,
        f"{where} is {what}: nothing callable crosses to a host (callbacks run on the "
        "caller's side: pass on_progress to the call, subscribe_notifications on the hub)"
        if callable(value)
        else f"{where} is {what}: only JSON values (str, numbers, lists, dicts) cross to a host",
    )


def check_spec(spec: HostSpec) -> None:
    """A spec that can cross: a plain name, servers, options of plain values.

    >>> check_spec(HostSpec("h", "t", {"mcpServers": {"a": {"command": "x"}}}, {"separator": "__"}))
    >>> check_spec(HostSpec("h", "t", {"mcpServers": {"a": {"command": "x"}}}, {"qualify": str}))
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (options.qualify): options.qualify is a callable: nothing callable crosses to a host (callbacks run on the caller's side: pass on_progress to the call, subscribe_notifications on the hub)
    """
    for what, value in (("name", spec.name), ("tenant", spec.tenant)):
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", value):
            raise Error(
                "config", what, f"a host's {what} must be 1 to 100 of A-Z a-z 0-9 _ . - characters"
            )
    for name, entry in servers_of(spec.config).items():
        if not isinstance(name, str):
            raise Error("config", "config", "a server's name must be a string")
        check_plain(entry, f"servers.{name}")
    if spec.resources:
        check_placement({"resources": spec.resources}, "placement")
    if not isinstance(spec.options, Mapping):
        raise Error("config", "options", "a host's options must be a mapping")
    for key, value in spec.options.items():
        check_plain(value, f"options.{key}")


def _secret_places(entry: Mapping[str, Any]) -> Iterable[tuple[str, str, Any]]:
    """Each (key, field, value) of an entry where a credential is written."""
    for key in _SECRET_MAPS:
        found = entry.get(key)
        if isinstance(found, Mapping):
            for k, v in found.items():
                yield key, str(k), v
    conduit = entry.get("conduit")
    if isinstance(conduit, Mapping):
        if "bearer" in conduit:
            yield "conduit", "bearer", conduit["bearer"]
        auth = conduit.get("auth")
        if isinstance(auth, Mapping):
            if "bearer" in auth:
                yield "conduit.auth", "bearer", auth["bearer"]
            oauth = auth.get("oauth")
            if isinstance(oauth, Mapping):
                for k in ("client_secret", "refresh_token", "access_token"):
                    if k in oauth:
                        yield "conduit.auth.oauth", k, oauth[k]


def is_reference(value: Any) -> bool:
    """A value that names its secret instead of holding it: at least one ``${VAR}`` and no
    ``${VAR:-default}`` (a default is a literal that would cross).

    >>> is_reference("Bearer ${TOKEN}"), is_reference("${TOKEN:-abc}"), is_reference("abc")
    (True, False, False)
    """
    if not isinstance(value, str):
        return False
    found = list(_VAR.finditer(value))
    return bool(found) and all(m.group(2) is None for m in found)


def check_secrets(config: Mapping[str, Any], secure: bool) -> None:
    """Refuse a literal credential in a host's config unless the engine's transport is
    authenticated and encrypted (``secure``): every value of ``headers`` and ``env``, a
    ``bearer`` and an OAuth client secret must be a ``${VAR}`` reference the host expands.

    >>> check_secrets({"mcpServers": {"gh": {"url": "u", "headers": {"Authorization": "Bearer ${GH}"}}}}, False)
    >>> check_secrets({"mcpServers": {"gh": {"url": "u", "headers": {"X-Key": "s3cr3t"}}}}, False)
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: config (servers.gh.headers): server 'gh': headers['X-Key'] holds a literal value, which would cross the engine in the clear; write a reference such as "${X_KEY}" and set it in the hosts' environment (or turn on Ray's token authentication and TLS)
    """
    if secure:
        return
    for name, entry in servers_of(config).items():
        if not isinstance(entry, Mapping):
            continue
        for key, item, value in _secret_places(entry):
            if is_reference(value):
                continue
            hint = re.sub(r"[^A-Z0-9]+", "_", str(item).upper()).strip("_") or "SECRET"
            raise Error(
                "config",
                f"servers.{name}.{key}",
                f"server {name!r}: {key}[{item!r}] holds a literal value, which would cross "
                f'the engine in the clear; write a reference such as "${{{hint}}}" and set '
                "it in the hosts' environment (or turn on Ray's token authentication and TLS)",
            )


def referenced(config: Any) -> set[str]:
    """The names of every ``${VAR}`` in a document (the values a host must redact).

    >>> sorted(referenced({"mcpServers": {"a": {"env": {"K": "${A}-${B:-x}"}}}}))
    ['A', 'B']
    """
    found: set[str] = set()
    if isinstance(config, str):
        found.update(m.group(1) for m in _VAR.finditer(config))
    elif isinstance(config, Mapping):
        for v in config.values():
            found |= referenced(v)
    elif isinstance(config, (list, tuple)):
        for v in config:
            found |= referenced(v)
    return found


def secret_values(config: Any, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The expanded values a host must never send back, longest first."""
    values = {environ[n] for n in referenced(config) if len(environ.get(n) or "") >= MIN_REDACTED}
    return tuple(sorted(values, key=len, reverse=True))


def host_environ(secrets_file: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """What a host expands ``${VAR}`` from: its own environment, and over it the names of
    ``secrets_file`` (a JSON object of strings on the host's machine, read by the host: its
    values never cross the engine).

    >>> host_environ(None, {"HOME": "/root"})
    {'HOME': '/root'}
    >>> try:
    ...     host_environ("/nonexistent/t42.json", {})
    ... except Error as e:
    ...     print(e.kind, e.reason)
    config secrets_file

    Raises:
        Error: ``config``/``secrets_file`` when it cannot be read or is not a JSON object
            of strings (the message names the file, never a value).
    """
    merged = dict(environ)
    if secrets_file is None:
        return merged
    try:
        with open(secrets_file, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError) as exc:
        raise Error(
            "config",
            "secrets_file",
            f"the host could not read its secrets file {secrets_file!r} ({type(exc).__name__})",
        ) from None
    if not isinstance(found, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in found.items()
    ):
        raise Error(
            "config",
            "secrets_file",
            f"the secrets file {secrets_file!r} must hold a JSON object of strings",
        )
    merged.update(found)
    return merged


def redact(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` with every secret replaced by ``***``, in every string it holds.

    >>> redact({"m": "token abcd1234 refused", "n": [1, "abcd1234"]}, ("abcd1234",))
    {'m': 'token *** refused', 'n': [1, '***']}
    """
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, Mapping):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


# -- messages -----------------------------------------------------------------------------------


def call(cid: int, op: str, args: Mapping[str, Any], progress: bool = False) -> dict[str, Any]:
    """A call as it crosses: ``{"id", "op", "args", "progress"}`` (``progress``: the caller
    wants progress messages; its ``on_progress`` stays on its side).

    >>> call(1, "call_tool", {"name": "a.add", "arguments": {"a": 1}})
    {'id': 1, 'op': 'call_tool', 'args': {'name': 'a.add', 'arguments': {'a': 1}}, 'progress': False}
    """
    if op not in OPS:
        raise Error("argument", "op", f"a host runs {sorted(OPS)}, not {op!r}")
    check_plain(args, op, "argument")
    return {"id": cid, "op": op, "args": dict(args), "progress": progress}


def check_call(message: Any) -> tuple[int, str, dict[str, Any], bool]:
    """The parts of a call a host received; ``argument`` for a malformed one."""
    if (
        not isinstance(message, Mapping)
        or not isinstance(message.get("id"), int)
        or message.get("op") not in OPS
        or not isinstance(message.get("args"), Mapping)
    ):
        raise Error("argument", "message", "a host received a malformed call")
    return message["id"], message["op"], dict(message["args"]), bool(message.get("progress"))


def result(cid: int, value: Any) -> dict[str, Any]:
    """A call's result: its raw JSON (the caller parses it, as a local client does)."""
    return {"id": cid, "ok": value}


def failure(cid: int, error: Error, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """A call's error as data: kind, reason, redacted message, code; ``data`` when it is
    plain (a server's own error payload included), redacted too.

    >>> failure(3, Error("timeout", "deadline", "no answer from k3y-abc in 1 s"), ("k3y-abc",))
    {'id': 3, 'error': {'kind': 'timeout', 'reason': 'deadline', 'message': 'no answer from *** in 1 s', 'code': None, 'data': None}}
    """
    data = error.data
    try:
        check_plain(data, "data")
    except Error:
        data = None
    return {
        "id": cid,
        "error": {
            "kind": error.kind,
            "reason": redact(error.reason, secrets),
            "message": redact(error.message, secrets),
            "code": error.code,
            "data": redact(data, secrets),
        },
    }


def progress(cid: int, params: Mapping[str, Any]) -> dict[str, Any]:
    """A progress notification for a call (its ``notifications/progress`` params)."""
    return {"id": cid, "progress": dict(params)}


def notification(server: str, method: str, params: Any) -> dict[str, Any]:
    """A server notification for the caller's subscribers."""
    return {"note": {"server": server, "method": method, "params": params}}


def error_of(data: Mapping[str, Any]) -> Error:
    """The :class:`~conduit_mcp.Error` a caller raises for a failure message.

    >>> e = error_of(failure(1, Error("unavailable", "server_not_ready", "x"))["error"])
    >>> e.kind, e.reason
    ('unavailable', 'server_not_ready')
    """
    kind = data.get("kind")
    if kind not in KINDS:
        return Error("protocol", "host_reply", "a host sent an error of an unknown kind")
    return Error(
        kind,
        str(data.get("reason")),
        str(data.get("message")),
        code=data.get("code"),
        data=data.get("data"),
    )


def host_lost(host: str, pid: int | None) -> Error:
    """What every call in flight on a lost host raises: it may have run, it is never re-sent.

    >>> str(host_lost("t1-0", 42))[:60]
    "unavailable (host_lost): host 't1-0' (pid 42) was lost with "
    """
    where = f" (pid {pid})" if pid is not None else ""
    return Error(
        "unavailable",
        "host_lost",
        f"host {host!r}{where} was lost with this call in flight; it may have run and is "
        "never sent again: call again if it is safe to repeat (the host restarts from its spec)",
        data={"host": host, "pid": pid},
    )


def decode(op: str, value: Any) -> Any:
    """A result's raw JSON as the caller's type: what the Hub's call returns locally.

    >>> decode("call_tool", {"content": [{"type": "text", "text": "3"}]}).text
    '3'
    """
    if op == "call_tool":
        return parse_call_tool(value)
    if op == "get_prompt":
        return parse_get_prompt(value)
    if op == "read_resource":
        return parse_read_resource(value)
    if op == "complete":
        return parse_complete(value)
    if op in ("subscribe", "unsubscribe"):
        return None
    if op == "set_logging_level":
        return levels_of(value)
    return value


def levels(outcomes: Mapping[str, Error | None], secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """``set_logging_level``'s outcomes as they cross: per server, None or the error's data.

    >>> levels({"a": None, "b": Error("unavailable", "not_supported", "no logging")})["b"]["reason"]
    'not_supported'
    """
    return {
        name: None if error is None else failure(0, error, secrets)["error"]
        for name, error in outcomes.items()
    }


def levels_of(value: Any) -> dict[str, Error | None]:
    """The caller's side of :func:`levels`: per server, None or its
    :class:`~conduit_mcp.Error`.

    >>> levels_of(levels({"a": None, "b": Error("timeout", "deadline", "late")}))
    {'a': None, 'b': Error(kind='timeout', reason='deadline')}
    """
    if not isinstance(value, Mapping):
        raise Error("protocol", "host_reply", "a host sent set_logging_level's outcomes malformed")
    return {str(name): None if data is None else error_of(data) for name, data in value.items()}


def batches(calls: list[dict[str, Any]], size: int = MAX_BATCH) -> list[list[dict[str, Any]]]:
    """Calls waiting to go to one host, cut into messages of at most ``size``.

    >>> [len(b) for b in batches([{}] * 600)]
    [256, 256, 88]
    """
    return [calls[i : i + size] for i in range(0, len(calls), size)]


def lease_expired(last_seen: float, now: float, lease: float) -> bool:
    """A caller that has not polled its host for ``lease`` seconds is gone: the host
    cancels its calls.

    >>> lease_expired(10.0, 12.0, 5.0), lease_expired(10.0, 16.0, 5.0)
    (False, True)
    """
    return now - last_seen > lease


def placement(tenant: str, nodes: list[str], index: int = 0) -> str | None:
    """The node a tenant's ``index``-th host prefers: stable for a tenant while the nodes
    stay the same (a sorted list), spread over them by tenant and index.

    >>> placement("t1", ["n1", "n2"]) == placement("t1", ["n2", "n1"])
    True
    >>> placement("t1", [])
    """
    if not nodes:
        return None
    ordered = sorted(nodes)
    digest = zlib.crc32(tenant.encode()) + index
    return ordered[digest % len(ordered)]


# -- placement by resources and host counts ----------------------------------------------------

#: The keys of a placement entry (``RayEngine(placement={tenant: entry})``,
#: ``cluster.hub(..., placement=entry)``).
PLACEMENT_KEYS: Final = frozenset({"resources", "hosts", "clients_per_host"})


def check_placement(entry: Any, where: str = "placement") -> dict[str, Any]:
    """A placement entry, checked and normalised: ``resources`` (each host asks the engine
    for these: a mapping of names to amounts > 0), ``hosts`` (the tenant's servers split
    over exactly this many hosts, at most one per server) and ``clients_per_host`` (the
    engine's, for this tenant). Plain data only: a callable is refused like anywhere else.

    >>> check_placement({"resources": {"tenant_a": 1}, "hosts": 2})
    {'resources': {'tenant_a': 1.0}, 'hosts': 2}
    >>> try:
    ...     check_placement({"resources": {"tenant_a": 0}})
    ... except Error as e:
    ...     print(e.kind, e.reason)
    config placement
    >>> try:
    ...     check_placement({"node": "n1"}, "placement.acme")
    ... except Error as e:
    ...     print(e.kind, e.reason, e.message)
    config placement placement.acme has no key 'node' (it takes clients_per_host, hosts, resources)
    """
    if entry is None:
        return {}
    if not isinstance(entry, Mapping):
        raise Error("config", "placement", f"{where} must be a mapping (plain data)")
    check_plain(entry, where)
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key not in PLACEMENT_KEYS:
            raise Error(
                "config",
                "placement",
                f"{where} has no key {key!r} (it takes {', '.join(sorted(PLACEMENT_KEYS))})",
            )
        if key == "resources":
            if not isinstance(value, Mapping) or not value:
                raise Error(
                    "config",
                    "placement",
                    f"{where}.resources must be a mapping of resource names to amounts",
                )
            resources: dict[str, float] = {}
            for name, amount in value.items():
                if (
                    not name
                    or isinstance(amount, bool)
                    or not isinstance(amount, (int, float))
                    or not amount > 0
                ):
                    raise Error(
                        "config",
                        "placement",
                        f"{where}.resources[{name!r}] must be an amount > 0",
                    )
                resources[name] = float(amount)
            out["resources"] = resources
        elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise Error("config", "placement", f"{where}.{key} must be an int >= 1")
        else:
            out[key] = value
    return out


def check_placements(table: Any) -> dict[str, dict[str, Any]]:
    """An engine's placement table: tenant (or ``"*"``, every other tenant) to an entry.

    >>> check_placements({"acme": {"hosts": 2}, "*": {"resources": {"pool": 0.5}}})
    {'acme': {'hosts': 2}, '*': {'resources': {'pool': 0.5}}}
    """
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        raise Error("config", "placement", "placement must be a mapping of tenants to entries")
    return {str(t): check_placement(e, f"placement.{t}") for t, e in table.items()}


def placement_of(
    tenant: str, table: Mapping[str, Mapping[str, Any]], override: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A tenant's entry: the hub's own (``cluster.hub(..., placement=)``) over the engine's
    for that tenant, over the engine's ``"*"``.

    >>> table = {"acme": {"hosts": 2}, "*": {"resources": {"pool": 1.0}}}
    >>> placement_of("acme", table, None), placement_of("other", table, {"hosts": 3})
    ({'hosts': 2}, {'hosts': 3})
    >>> placement_of("other", table, None)
    {'resources': {'pool': 1.0}}
    """
    if override is not None:
        return dict(override)
    return dict(table.get(tenant, table.get("*", {})))


def split(names: list[str], size: int, hosts: int | None = None) -> list[list[str]]:
    """The servers of each host, in config order: chunks of at most ``size``, or with
    ``hosts``, exactly that many hosts (fewer when there are fewer servers), as even as can be.

    >>> split(["a", "b", "c"], 2), split(["a", "b", "c", "d", "e"], 1000, hosts=2)
    ([['a', 'b'], ['c']], [['a', 'b', 'c'], ['d', 'e']])
    >>> split([], 10), split(["a"], 10, hosts=3)
    ([[]], [['a']])
    """
    if hosts is None:
        return [names[i : i + size] for i in range(0, len(names), size)] or [[]]
    count = max(1, min(hosts, len(names)))
    base, extra = divmod(len(names), count)
    out, start = [], 0
    for i in range(count):
        end = start + base + (1 if i < extra else 0)
        out.append(names[start:end])
        start = end
    return out


def fit(
    demands: list[Mapping[str, float]],
    nodes: Mapping[str, Mapping[str, float]],
    free: Mapping[str, float],
) -> Error | None:
    """Whether hosts asking ``demands`` can run: each on one node of ``nodes`` (each node's
    total resources; first fit), and all of them within what is ``free`` now in the whole
    cluster. None when they can; else the :class:`~conduit_mcp.Error` to raise at once
    (an engine queues an actor it cannot place forever: never wait for one).

    >>> nodes = {"n1": {"CPU": 1, "pool_a": 2}, "n2": {"CPU": 1}}
    >>> fit([{"pool_a": 1}] * 2, nodes, {"pool_a": 2}) is None
    True
    >>> fit([{"pool_b": 1}], nodes, {}).reason
    'placement_infeasible'
    >>> fit([{"pool_a": 1}] * 3, nodes, {"pool_a": 2}).reason  # more than there is
    'placement_infeasible'
    >>> fit([{"pool_a": 1}], nodes, {"pool_a": 0.5}).reason  # held by other actors now
    'placement_busy'
    """
    left = {n: dict(r) for n, r in nodes.items()}
    for index, demand in enumerate(demands):
        if not demand:
            continue
        found = next(
            (
                n
                for n, have in left.items()
                if all(have.get(k, 0.0) + 1e-9 >= v for k, v in demand.items())
            ),
            None,
        )
        if found is None:
            most = {k: max((r.get(k, 0.0) for r in nodes.values()), default=0.0) for k in demand}
            short = sorted(k for k, v in demand.items() if most[k] + 1e-9 < v)
            why = (
                f"no live node has {', '.join(f'{k}={demand[k]:g}' for k in short)}"
                if short
                else f"the {len(demands)} hosts need more than the nodes have in all"
            )
            return Error(
                "unavailable",
                "placement_infeasible",
                f"host {index} asks for {dict(demand)} and cannot be placed: {why} "
                f"(live nodes: {len(nodes)}); add nodes with those resources, or ask for less",
                data={"resources": dict(demand), "hosts": len(demands)},
            )
        for k, v in demand.items():
            left[found][k] = left[found].get(k, 0.0) - v
    wanted: dict[str, float] = {}
    for demand in demands:
        for k, v in demand.items():
            wanted[k] = wanted.get(k, 0.0) + v
    busy = sorted(k for k, v in wanted.items() if free.get(k, 0.0) + 1e-9 < v)
    if busy:
        return Error(
            "unavailable",
            "placement_busy",
            f"the {len(demands)} hosts need {', '.join(f'{k}={wanted[k]:g}' for k in busy)} "
            f"and only {', '.join(f'{k}={free.get(k, 0.0):g}' for k in busy)} is free now "
            "(other actors hold the rest): stop them, or try again later",
            data={"resources": {k: wanted[k] for k in busy}, "hosts": len(demands)},
        )
    return None
