"""``Cluster``: tenants' hubs on hosts an engine runs (docs/cluster.md).

``Cluster.start(engine)`` attaches the engine (Ray: the application's own cluster, one at
``address=``, or a local one it starts); ``cluster.hub(tenant, config)`` checks the config
on the caller's side (plain data only, credentials as ``${VAR}`` references), starts the
tenant's hosts from their specs and returns a :class:`~conduit_mcp.cluster.RemoteHub`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import Error
from ..hub.config import _document
from . import protocol as p
from .channel import Channel
from .engine import HostLost
from .remote import RemoteHub, _Core

log = logging.getLogger("conduit_mcp.cluster")


@dataclass(frozen=True)
class HostStatus:
    """One host, as :meth:`Cluster.status` shows it."""

    name: str
    tenant: str
    state: str
    """``up``, ``restarting`` (its process died; the engine starts it again) or ``down``."""
    pid: int | None
    node: str | None
    """The engine's id of the node the host runs on."""
    restarts: int
    """Restarts this caller saw (a new process id after a loss)."""
    clients: int
    """Its hub's members (one client per server)."""
    ready: int
    """How many of them are ready."""
    in_flight: int
    """This caller's calls not yet answered."""
    messages: int = 0
    """Messages this caller sent the host with calls (batches: fewer than its calls when
    many were in flight)."""
    calls: int = 0
    """Calls this caller sent the host."""
    resources: Mapping[str, float] = field(default_factory=dict)
    """The engine's resources the host asked for (its placement; empty: by tenant)."""


@dataclass(frozen=True)
class ClusterStatus:
    """Every host of this cluster object's hubs, and where each tenant's are."""

    hosts: tuple[HostStatus, ...]
    placement: Mapping[str, tuple[str, ...]]
    """Per tenant, its hosts' names."""
    nodes: tuple[str, ...]
    """The engine's live nodes."""

    def host(self, name: str) -> HostStatus | None:
        """One host by name (None when absent)."""
        return next((h for h in self.hosts if h.name == name), None)


class Cluster:
    """Tenants' hubs on an engine's hosts. Start it with :meth:`start`; stop it with
    :meth:`stop` (a Ray it started is stopped, one it attached to never is).

    ``cluster.hub(tenant, config)`` checks the config on the caller's side before any host
    starts: plain data only (a callable is refused, naming its key), credentials as
    ``${VAR}`` references each host expands from its own environment (a literal where a
    reference could stand is refused, naming the key, never the value). docs/cluster.md
    runs the whole tour on Ray; the checks need no engine running:

    >>> import conduit_mcp as mcp
    >>> cluster = mcp.Cluster(mcp.RayEngine())  # not started: Cluster.start opens the engine
    >>> server = {"command": "conduit-mcp-example-server"}
    >>> try:
    ...     cluster.hub("acme", {"mcpServers": {"gh": {**server, "env": {"TOKEN": "t-123"}}}})
    ... except mcp.Error as e:
    ...     print(e.kind, e.reason, "t-123" in str(e))
    config servers.gh.env False
    >>> try:
    ...     cluster.hub("acme", {"mcpServers": {"gh": server}}, on_authorize=print)
    ... except mcp.Error as e:
    ...     print(e.kind, e.reason)
    config options.on_authorize
    >>> cluster.hubs(), cluster.status().hosts
    ({}, ())
    >>> cluster.stop()
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._hubs: dict[str, tuple[RemoteHub, list[Any], bool]] = {}
        self._lock = threading.Lock()
        self.stopped = False

    def __repr__(self) -> str:
        return f"<conduit_mcp.Cluster {self.engine!r} tenants={sorted(self._hubs)}>"

    @classmethod
    def start(cls, engine: Any) -> Cluster:
        """Attach ``engine`` (e.g. :class:`~conduit_mcp.RayEngine`); on the main thread.

        ``ray.init`` must run on the main thread (Ray's processes die with the thread that
        started them); from another thread the engine is refused before Ray is imported:

        >>> import threading
        >>> import conduit_mcp as mcp
        >>> seen = []
        >>> def start() -> None:
        ...     try:
        ...         mcp.Cluster.start(mcp.RayEngine())
        ...     except mcp.Error as e:
        ...         seen.append((e.kind, e.reason))
        >>> thread = threading.Thread(target=start)
        >>> thread.start(); thread.join(timeout=10)
        >>> seen
        [('config', 'main_thread')]

        Raises:
            Error: ``config``/``ray`` without the extra; ``config``/``main_thread``.
        """
        engine.open()
        return cls(engine)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def hub(
        self,
        tenant: str,
        config: Any = None,
        *,
        timeout: float = 120.0,
        placement: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> RemoteHub:
        """The tenant's hub: its servers on hosts of at most ``clients_per_host`` each
        (or ``placement``'s).

        ``placement`` (plain data, over the engine's entry for this tenant): ``resources``
        each host asks the engine for (``{"tenant_a": 1}``: only nodes that have them take
        the hosts), ``hosts`` (exactly that many hosts), ``clients_per_host``. Checked
        before any host starts, against the live nodes: hosts no node can take now are
        refused at once, never left queued. Attaching (no ``config``) ignores it: the hosts
        run where their starter placed them.

        ``config`` is what :meth:`conduit_mcp.Hub.start` takes (a mapping, JSON text, a
        path: read here, never expanded here: each host expands ``${VAR}`` from its own
        environment); ``options`` are the Hub's and the clients' options, plain values only.
        Without ``config``, attaches to the tenant's hosts another caller started (found by
        name). Returns once every host runs (its servers connect on their own: see
        ``await_ready``).

        The config is checked here, before any host starts: a literal credential where a
        ``${VAR}`` reference could stand is refused, naming the key and never the value; a
        reference crosses as written and the host expands it:

        >>> import conduit_mcp as mcp
        >>> cluster = mcp.Cluster(mcp.RayEngine())  # not started: nothing runs
        >>> entry = {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer k-1"}}
        >>> try:
        ...     cluster.hub("t42", {"mcpServers": {"gh": entry}})
        ... except mcp.Error as e:
        ...     print(e.kind, e.reason, "k-1" in str(e))
        config servers.gh.headers False
        >>> try:
        ...     cluster.hub("t42", {"mcpServers": {"gh": {**entry, "conduit": {"backoff": max}}}})
        ... except mcp.Error as e:
        ...     print(e.kind, e.reason)
        config servers.gh.conduit.backoff

        >>> try:
        ...     cluster.hub("t42", {"mcpServers": {"gh": {"command": "srv"}}}, placement={"hosts": 0})
        ... except mcp.Error as e:
        ...     print(e.kind, e.reason)
        config placement

        Raises:
            Error: ``config`` naming the key (a callable, a literal credential in
                ``headers``/``env``, a bad entry the host's Hub refused, a bad
                ``placement``); ``argument``/``tenant`` for a tenant with a hub here
                already, or none to attach to; ``unavailable``/``placement_infeasible``
                (no live node has the resources, or the hosts need more than there is),
                ``placement_busy`` (other actors hold them now), ``placement_timeout`` (a
                host not placed within the engine's ``placement_timeout``).
        """
        engine = self.engine
        if self.stopped:
            raise Error("closed", "stopped", "the cluster was stopped")
        if tenant in self._hubs:
            raise Error(
                "argument", "tenant", f"tenant {tenant!r} has a hub on this cluster already"
            )
        if config is None:
            handles = engine.find_hosts(tenant)
            if not handles:
                raise Error(
                    "argument", "tenant", f"no hosts of tenant {tenant!r} run in this engine"
                )
            owned = False
            specs: list[p.HostSpec] = []
            infos = [engine.wait_alive(h, timeout) for h in handles]
            placement_of = {
                name: handles[i] for i, info in enumerate(infos) for name in info.get("servers", ())
            }
            separator = str(options.get("separator", "."))
        else:
            document = _document(config)
            servers = p.servers_of(document)
            spec0 = p.HostSpec(
                engine.host_name(tenant, 0), tenant, {"mcpServers": servers}, options
            )
            p.check_spec(spec0)
            p.check_secrets(document, engine.secure)
            entry = p.placement_of(
                tenant,
                getattr(engine, "placement", {}),
                None if placement is None else p.check_placement(placement),
            )
            names = list(servers)
            size = int(entry.get("clients_per_host", engine.clients_per_host))
            chunks = p.split(names, size, entry.get("hosts"))
            resources = dict(entry.get("resources", {}))
            specs = [
                p.HostSpec(
                    engine.host_name(tenant, i),
                    tenant,
                    {"mcpServers": {n: servers[n] for n in chunk}},
                    options,
                    resources,
                )
                for i, chunk in enumerate(chunks)
            ]
            if resources:
                engine.check_fit([s.resources for s in specs])
            handles = []
            try:
                for i, spec in enumerate(specs):
                    handles.append(engine.start_host(spec, i))
                if resources:
                    for handle in handles:
                        engine.wait_placed(handle, engine.placement_timeout)
                infos = [engine.wait_alive(h, timeout) for h in handles]
            except BaseException:
                for handle in handles:
                    handle.kill()
                raise
            for info in infos:
                if info.get("error") is not None:
                    for handle in handles:
                        handle.kill()
                    raise p.error_of(info["error"])
            owned = True
            placement_of = {n: handles[i] for i, chunk in enumerate(chunks) for n in chunk}
            separator = str(options.get("separator", "."))
        respawns: list[Any] = [None] * len(handles)
        if owned:
            respawns = [self._respawner(spec, i) for i, spec in enumerate(specs)]
        channels = [
            Channel(h, engine.linger, engine.wait_alive, info, respawns[i])
            for i, (h, info) in enumerate(zip(handles, infos, strict=True))
        ]
        by_handle = {id(h): c for h, c in zip(handles, channels, strict=True)}
        placement = {name: by_handle[id(h)] for name, h in placement_of.items()}
        core = _Core(tenant, channels, placement, separator)
        hub = RemoteHub(core, on_stop=self._stopped_hub)
        with self._lock:
            self._hubs[tenant] = (hub, handles, owned)
        return hub

    def _respawner(self, spec: p.HostSpec, index: int) -> Any:
        """Start a host that died with its node again, from its spec, on a live node."""

        generation = [0]

        def respawn(last: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
            engine = self.engine
            if self.stopped or last.get("node") in engine.nodes():
                raise HostLost(spec.name, permanent=True)  # died for another reason: stays down
            with self._lock:
                found = self._hubs.get(spec.tenant)
            if found is not None:
                found[1][index].kill()  # the old actor, so that its name is free
            # A new name: Ray keeps the old one while the dead actor's record lingers.
            generation[0] += 1
            again = replace(spec, name=f"{spec.name}.r{generation[0]}")
            handle = engine.start_host(again, index)
            info = engine.wait_alive(handle, 120.0)
            with self._lock:
                found = self._hubs.get(spec.tenant)
                if found is not None:
                    found[1][index] = handle
            log.warning("cluster: host %s started again on another node", spec.name)
            return handle, info

        return respawn

    def _stopped_hub(self, hub: RemoteHub) -> None:
        with self._lock:
            found = self._hubs.pop(hub.tenant, None)
        if found is not None and found[2]:
            for handle in found[1]:
                handle.kill()

    def hubs(self) -> dict[str, RemoteHub]:
        """Every tenant's hub on this cluster object (a hub leaves when it stops).

        >>> import conduit_mcp as mcp
        >>> mcp.Cluster(mcp.RayEngine()).hubs()
        {}
        """
        return {t: h for t, (h, _, _) in self._hubs.items()}

    def status(self) -> ClusterStatus:
        """Every host (process id, node, state, restarts, clients), the placement by tenant
        and the live nodes: one message per host.

        A :class:`ClusterStatus` of :class:`HostStatus` entries (with no hub yet, none):

        >>> import conduit_mcp as mcp
        >>> status = mcp.Cluster(mcp.RayEngine()).status()
        >>> status.hosts, dict(status.placement), status.host("conduit-acme-0")
        ((), {}, None)
        >>> import dataclasses
        >>> [f.name for f in dataclasses.fields(mcp.cluster.HostStatus)]  # each host's
        ['name', 'tenant', 'state', 'pid', 'node', 'restarts', 'clients', 'ready', 'in_flight', 'messages', 'calls', 'resources']
        """
        hosts = []
        placement: dict[str, tuple[str, ...]] = {}
        for tenant, (hub, handles, _) in list(self._hubs.items()):
            channels = hub._core.channels
            placement[tenant] = tuple(h.name for h in handles)
            for handle, channel in zip(handles, channels, strict=True):
                try:
                    info = handle.info(timeout=5.0)
                    state = "up"
                except HostLost as exc:
                    info, state = {}, "down" if exc.permanent else "restarting"
                except Error:
                    info, state = {}, "restarting"
                if channel.down is not None:
                    state = "down"
                hosts.append(
                    HostStatus(
                        name=handle.name,
                        tenant=tenant,
                        state=state,
                        pid=info.get("pid", channel.pid),
                        node=info.get("node"),
                        restarts=channel.restarts,
                        clients=int(info.get("clients", 0)),
                        ready=int(info.get("ready", 0)),
                        in_flight=channel.in_flight(),
                        messages=channel.messages,
                        calls=channel.calls,
                        resources=dict(
                            info.get("resources") or channel.info.get("resources") or {}
                        ),
                    )
                )
        return ClusterStatus(tuple(hosts), placement, tuple(self.engine.nodes()))

    def stop(self) -> None:
        """Stop every hub (the hosts this cluster started are killed), then the engine: a
        Ray it started is stopped, one it attached to is left running. Idempotent;
        ``close`` is the same, and a cluster used as a context manager stops on exit.

        >>> import conduit_mcp as mcp
        >>> with mcp.Cluster(mcp.RayEngine()) as cluster:
        ...     pass
        >>> cluster.stopped
        True
        >>> cluster.stop()  # again: nothing to do
        >>> try:
        ...     cluster.hub("acme", {"mcpServers": {}})
        ... except mcp.Error as e:
        ...     print(e.kind, e.reason)
        closed stopped
        """
        if self.stopped:
            return
        self.stopped = True
        for hub, _, _ in list(self._hubs.values()):
            hub.stop()
        self.engine.close()

    close = stop
