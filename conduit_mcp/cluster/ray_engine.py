"""The Ray engine: hosts are async Ray actors (``pip install 'conduit-mcp[ray]'``).

``ray`` is imported only when an engine opens, so ``import conduit_mcp`` never needs it.
Each host is a named actor (``conduit-<tenant>-<index>`` in the engine's namespace: the
registry a second caller finds it by), created with ``max_task_retries=0`` (a call that may
have run is never sent again) and ``max_restarts`` from the options (Ray rebuilds the host
from its spec: the actor's constructor arguments). A host placed by resources (the
``placement`` option) asks Ray for them and runs where Ray finds them (Ray moves it when its
node is lost); any other runs on the node its tenant maps to (node affinity); when that node
is gone, the cluster starts the host again from its spec on a
node that is alive (``Cluster``'s respawn: Ray cannot restart an actor bound to a dead node).
Soft affinity would do that by itself, but Ray 2.60 spilled soft-placed actors to another
node while the preferred one was alive and idle (seen on the two-node test cluster), so the
placement would not hold.

A caller's batches (``submit``) go over a Ray compiled graph when it has one (the first
caller of a host; Ray runs one graph per actor), compiled in the background; the actor task
is the path meanwhile and whenever there is none (docs/cluster.md, "Batching").

Loopback: a Ray this engine starts has every node and worker address on 127.0.0.1
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray resolve its node address to the loopback
one, read when ``ray`` is first imported), no dashboard, no usage stats, one CPU and a small
object store. A Ray the application started is attached to and left as it is.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..errors import Error
from . import protocol as p
from .engine import HostLost

log = logging.getLogger("conduit_mcp.cluster")

#: Environment a Ray this engine starts needs, set before ``ray`` is first imported.
LOOPBACK_ENV: Mapping[str, str] = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # node address: get_localhost_ip()
    "RAY_USAGE_STATS_ENABLED": "0",
}


def import_ray(loopback: bool = True) -> Any:
    """``ray``, imported now (after the loopback environment when it is first imported).

    Raises:
        Error: ``config``/``ray`` when the extra is not installed.
    """
    import sys

    if loopback and "ray" not in sys.modules:
        for key, value in LOOPBACK_ENV.items():
            os.environ.setdefault(key, value)
    try:
        import ray
    except ImportError:
        raise Error(
            "config",
            "ray",
            "the Ray engine needs Ray: pip install 'conduit-mcp[ray]'",
        ) from None
    return ray


def _host_actor(ray: Any) -> Any:
    """The host's actor class (made once Ray is imported; Ray pickles it to its workers)."""

    class RayHost:
        def __init__(
            self, spec: dict[str, Any], lease: float, secrets_file: str | None = None
        ) -> None:
            from conduit_mcp.cluster.host import HostCore

            self.core = HostCore(spec, lease=lease, secrets_file=secrets_file)
            self.node = ray.get_runtime_context().get_node_id()
            # The one caller whose compiled graph runs on this host (Ray runs one graph
            # per actor: a second one compiles but hangs), and the loop the graph's
            # thread hands its batches to.
            self.graph_owner: str | None = None
            self.loop: asyncio.AbstractEventLoop | None = None

        async def claim_graph(self, owner: str) -> bool:
            self.loop = asyncio.get_running_loop()
            if self.graph_owner not in (None, owner):
                return False
            self.graph_owner = owner
            return True

        async def release_graph(self, owner: str) -> None:
            if self.graph_owner == owner:
                self.graph_owner = None

        def submit_graph(self, args: tuple[str, Any, float]) -> Any:
            """``submit`` from the compiled graph's thread, run on the host's loop; first
            the caller's own trip (``("", owner, 0)``): whether this host (not one started
            again meanwhile, which has no claim) is the one it claimed."""
            caller, calls, linger = args
            loop = self.loop
            if not caller:
                return loop is not None and calls == self.graph_owner
            if loop is None:
                raise RuntimeError("the host's graph was not claimed")
            return asyncio.run_coroutine_threadsafe(
                self.core.submit(caller, calls, linger), loop
            ).result()

        async def submit(
            self, caller: str, calls: list[dict[str, Any]], linger: float
        ) -> list[dict[str, Any]]:
            return await self.core.submit(caller, calls, linger)

        async def poll(self, caller: str, wait: float) -> list[dict[str, Any]]:
            return await self.core.poll(caller, wait)

        async def leave(self, caller: str) -> int:
            return self.core.leave(caller)

        async def notes(self, caller: str, methods: Any, servers: Any) -> None:
            self.core.notes(caller, methods, servers)

        async def info(self) -> dict[str, Any]:
            self.core.begin()
            return {**self.core.info(), "node": self.node}

        async def views(self) -> dict[str, Any]:
            return self.core.views()

        async def await_ready(self, timeout: float, servers: Any) -> dict[str, Any]:
            return await self.core.await_ready(timeout, servers)

        async def shutdown(self) -> None:
            self.core.stop()

    return ray.remote(RayHost)


def _restarting(exc: Exception) -> bool:
    """An ActorDiedError of an actor Ray will start again (its text says so)."""
    text = str(exc)
    return "restart" in text and "max_restarts" not in text and "will not be restarted" not in text


#: The compiled graph's channel size at first (bytes): grown by Ray for a bigger message.
GRAPH_BUFFER = 64 * 1024

#: How much longer than its own wait a poll may take before the host counts as lost.
POLL_SLACK = 15.0


def _teardown(graph: Any) -> None:
    try:
        graph.teardown()
    except Exception:
        pass


class RayHandle:
    """The caller's handle of one host actor: each method one Ray message, a host that died
    under it raised as :class:`~conduit_mcp.cluster.engine.HostLost`."""

    def __init__(self, engine: RayEngine, name: str, actor: Any, pending: bool = False) -> None:
        self.engine = engine
        self.name = name
        self.actor = actor
        # Not known to be placed yet (asks for resources): kill() does not wait for it.
        self.pending = pending
        # The fast path for submit: a Ray compiled graph (caller -> host.submit_graph ->
        # caller over shared-memory channels, no task submission), compiled in the
        # background on the first submit; the actor task is the path meanwhile, and for
        # good once the graph cannot be had (another caller holds the host's one graph,
        # compiling failed) or failed once.
        self._graph: Any = None
        self._graph_state = "none" if engine.compiled else "off"  # compiling, ready, off
        self._graph_lock = threading.Lock()
        self._owner = uuid.uuid4().hex

    def _get(self, ref: Any, timeout: float | None = None) -> Any:
        ray = self.engine.ray
        try:
            return ray.get(ref, timeout=timeout)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError) as exc:
            raise self._lost(exc) from exc
        except ray.exceptions.GetTimeoutError:
            raise Error("timeout", "host_busy", f"host {self.name!r} did not answer") from None

    def _lost(self, exc: Exception) -> HostLost:
        """The HostLost a Ray actor error means."""
        errors = self.engine.ray.exceptions
        if isinstance(exc, errors.ActorUnavailableError):  # restarting, or unreachable
            return HostLost(self.name, permanent=False)
        if isinstance(exc, errors.ActorDiedError):
            return HostLost(self.name, permanent=not _restarting(exc))
        if isinstance(exc, errors.ActorUnschedulableError):  # its node is gone
            return HostLost(self.name, permanent=True)
        return HostLost(self.name, permanent=False)

    def _read(self, method: str, timeout: float, *args: Any) -> Any:
        """A message that changes nothing on the host, sent again while the host restarts
        (until ``timeout``): reads are safe to repeat, calls never are."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return self._get(getattr(self.actor, method).remote(*args), timeout=max(left, 0.05))
            except HostLost as exc:
                if exc.permanent or time.monotonic() + 0.05 > deadline:
                    raise
                time.sleep(0.05)  # bounded: the host is restarting; Ray gives no event for it

    def submit(self, caller: str, calls: list[dict[str, Any]], linger: float) -> Any:
        graph = self._graph
        if graph is None:
            if self._graph_state == "none":
                self._compile_later()
            return self._get(self.actor.submit.remote(caller, calls, linger))
        ray = self.engine.ray
        try:
            ref = graph.execute((caller, calls, linger))
        except Exception:  # not written (the graph closed: its host died): the task path
            self._drop_graph(again=True)
            return self._get(self.actor.submit.remote(caller, calls, linger))
        try:
            return ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnschedulableError) as exc:
            self._drop_graph(again=True)  # the host died under it: host_lost
            raise self._lost(exc) from exc
        except Exception:
            # The graph broke (a timeout, an error in it): the batch may have run, so it
            # fails (never sent again); the next ones take the actor task path.
            self._drop_graph()
            raise

    def _compile_later(self) -> None:
        with self._graph_lock:
            if self._graph_state != "none":
                return
            self._graph_state = "compiling"
        self.engine._background(self._compile, f"conduit-cluster-graph-{self.name}")

    def _compile(self) -> None:
        ray = self.engine.ray
        graph = None
        try:
            if not ray.get(self.actor.claim_graph.remote(self._owner), timeout=10.0):
                raise RuntimeError("another caller holds the host's compiled graph")
            from ray.dag import InputNode

            with InputNode() as given:
                dag = self.actor.submit_graph.bind(given)
            # Small channels (Ray's default is 1 MB each, pinned in the object store while
            # the graph lives); a bigger batch or reply grows them.
            graph = dag.experimental_compile(_buffer_size_bytes=GRAPH_BUFFER)
            # One trip at once: the caller's ends of the graph's channels are registered
            # at their first use, and Ray 2.60 aborts the process (a failed RAY_CHECK) when
            # its graph is torn down after the host died with them not yet registered.
            if ray.get(graph.execute(("", self._owner, 0.0)), timeout=10.0) is not True:
                raise ray.exceptions.RayActorError()  # compiled to a host started again
        except Exception as exc:
            log.debug("cluster: no compiled graph to host %s (%s)", self.name, exc)
            died = isinstance(exc, ray.exceptions.RayActorError)  # tried again once back
            with self._graph_lock:
                if self._graph_state == "compiling":
                    self._graph_state = "none" if died else "off"
            if graph is not None:
                _teardown(graph)
            return
        with self._graph_lock:
            if self._graph_state == "compiling":
                self._graph, self._graph_state = graph, "ready"
                self.engine._graphs.add(self)
                log.debug("cluster: a compiled graph to host %s", self.name)
                return
        _teardown(graph)  # dropped meanwhile (left, killed)

    def _drop_graph(self, again: bool = False) -> None:
        """Stop using the graph (torn down in the background); ``again``: its host died,
        and the next submit compiles one to the host started again."""
        with self._graph_lock:
            graph, self._graph = self._graph, None
            if self._graph_state == "ready" or not again:
                self._graph_state = "none" if again else "off"
        self.engine._graphs.discard(self)
        if graph is not None:
            self.engine._background(lambda: _teardown(graph), f"conduit-cluster-drop-{self.name}")

    def poll(self, caller: str, wait: float) -> Any:
        # Bounded: a poll Ray holds on to for an actor it cannot place (its node is gone)
        # would otherwise never return; a host that silent counts as lost.
        try:
            return self._get(self.actor.poll.remote(caller, wait), timeout=wait + POLL_SLACK)
        except HostLost:
            self._drop_graph(again=True)
            raise
        except Error:
            self._drop_graph(again=True)
            raise HostLost(self.name, permanent=False) from None

    def leave(self, caller: str) -> Any:
        self._release_graph()
        return self._get(self.actor.leave.remote(caller), timeout=10.0)

    def _close_graph(self) -> Any:
        """Tear this caller's graph down for good (it returns whether there was one)."""
        with self._graph_lock:
            graph, self._graph, self._graph_state = self._graph, None, "off"
        self.engine._graphs.discard(self)
        if graph is not None:
            _teardown(graph)
        return graph is not None

    def _release_graph(self) -> None:
        """Tear this caller's graph down and give the host's one graph back."""
        if self._close_graph():
            try:
                self.engine.ray.get(self.actor.release_graph.remote(self._owner), timeout=5.0)
            except Exception:
                pass

    def notes(self, caller: str, methods: Any, servers: Any) -> None:
        self._read("notes", 30.0, caller, methods, servers)

    def info(self, timeout: float = 30.0) -> dict[str, Any]:
        result: dict[str, Any] = self._get(self.actor.info.remote(), timeout=timeout)
        return result

    def views(self) -> dict[str, Any]:
        result: dict[str, Any] = self._read("views", 30.0)
        return result

    def await_ready(self, timeout: float, servers: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        result: dict[str, Any] = self._read("info", timeout)
        left = max(deadline - time.monotonic(), 0.05)
        result = self._read("await_ready", left + 30.0, left, servers)
        return result

    def kill(self) -> None:
        """Stop the host for good (its servers closed first, when it answers)."""
        ray = self.engine.ray
        self._close_graph()
        if not self.pending:
            try:
                ray.get(self.actor.shutdown.remote(), timeout=10.0)
            except Exception:
                pass
        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:
            pass


class RayEngine:
    """Hosts as async Ray actors. Give it to :meth:`conduit_mcp.Cluster.start`.

    Args:
        address: a Ray cluster to attach to (``ray.init(address=...)``; ``RAY_ADDRESS``
            too); without it, the application's Ray when ``ray.is_initialized()``, else a
            local Ray this engine starts (and ``cluster.stop()`` stops).
        namespace: where the hosts' names live (the registry).
        max_restarts: how often Ray starts a host again after its process died.
        clients_per_host: a tenant's servers are split over hosts of at most this many.
        caller_lease: a caller that stops polling a host this long has its calls cancelled.
        secrets_file: a JSON object of strings on the hosts' machines (a host-side provider):
            each host reads it itself and expands ``${VAR}`` from it over its environment;
            its values never cross the engine.
        linger: a batch waits up to this long on the host for its calls, so fast calls come
            back in the submit's reply (one message each way).
        placement: per tenant (``"*"``: every tenant not named), where its hosts go, as
            plain data: ``{"resources": {"tenant_a": 1}}`` (each host asks Ray for these
            resources, so it runs only on a node that has them; ``CPU``, ``GPU`` and
            ``memory`` are Ray's own), ``"hosts": n`` (the tenant's servers split over
            exactly ``n`` hosts), ``"clients_per_host": n`` (this tenant's own split).
            ``cluster.hub(..., placement=...)`` overrides it for one hub. A placement no
            live node can satisfy is refused at once (``unavailable``/
            ``placement_infeasible`` or ``placement_busy``), never queued.
        placement_timeout: how long a host placed by resources may take to start before it
            is given up (``unavailable``/``placement_timeout``; its hub's hosts are stopped).
        compiled: a caller's batches to a host go over a Ray compiled graph (shared-memory
            channels: a sequential call's round trip about 0.2 ms instead of an actor
            task's 1.1-1.3 ms on the test VM), compiled in the background at its first
            batch; the actor task carries them meanwhile, and whenever the graph cannot be
            had: Ray runs one graph per actor, so only the first caller of a host gets it.
            Off by default (``False``: actor tasks only): Ray 2.60's compiled graphs are
            experimental, and a host that dies in the one round trip that first uses a new
            graph can make Ray abort the caller's process (docs/cluster.md, "Batching").
        num_cpus, object_store_memory: the local Ray's size (ignored when attaching).
        init: more keywords for the local ``ray.init``.

    The options are checked when the engine is made; Ray is imported only when it opens
    (:meth:`conduit_mcp.Cluster.start`), so a bad option costs no Ray:

    >>> import conduit_mcp as mcp
    >>> engine = mcp.RayEngine(namespace="gateway", clients_per_host=500, caller_lease=5)
    >>> engine
    <RayEngine namespace='gateway' started=False>
    >>> engine.clients_per_host, engine.caller_lease, engine.max_restarts
    (500, 5.0, 3)
    >>> mcp.RayEngine(placement={"acme": {"resources": {"tenant_a": 1}, "hosts": 2}}).placement
    {'acme': {'resources': {'tenant_a': 1.0}, 'hosts': 2}}
    >>> try:
    ...     mcp.RayEngine(clients_per_host=0)
    ... except mcp.Error as e:
    ...     print(e.kind, e.reason)
    config clients_per_host
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        namespace: str = "conduit_mcp",
        max_restarts: int = 3,
        clients_per_host: int = 1000,
        caller_lease: float = 10.0,
        linger: float = 0.005,
        num_cpus: int = 1,
        object_store_memory: int = 80 * 1024 * 1024,
        init: Mapping[str, Any] | None = None,
        secrets_file: str | None = None,
        placement: Mapping[str, Mapping[str, Any]] | None = None,
        placement_timeout: float = 30.0,
        compiled: bool = False,
    ) -> None:
        self.placement = p.check_placements(placement)
        if (
            isinstance(placement_timeout, bool)
            or not isinstance(placement_timeout, (int, float))
            or not placement_timeout > 0
        ):
            raise Error(
                "config", "placement_timeout", "placement_timeout must be a number of seconds > 0"
            )
        self.placement_timeout = float(placement_timeout)
        self.compiled = bool(compiled)
        if not isinstance(max_restarts, int) or max_restarts < -1:
            raise Error("config", "max_restarts", "max_restarts must be an int >= 0 (-1: always)")
        if not isinstance(clients_per_host, int) or clients_per_host < 1:
            raise Error("config", "clients_per_host", "clients_per_host must be an int >= 1")
        for key, value in (("caller_lease", caller_lease), ("linger", linger)):
            if (
                not isinstance(value, (int, float))
                or value < 0
                or (key == "caller_lease" and value == 0)
            ):
                raise Error("config", key, f"{key} must be a number of seconds > 0")
        if secrets_file is not None and not isinstance(secrets_file, str):
            raise Error("config", "secrets_file", "secrets_file must be a path (a str)")
        self.secrets_file = secrets_file
        self.address = address
        self.namespace = namespace
        self.max_restarts = max_restarts
        self.clients_per_host = clients_per_host
        self.caller_lease = float(caller_lease)
        self.linger = float(linger)
        self.num_cpus = num_cpus
        self.object_store_memory = object_store_memory
        self.init = dict(init or {})
        self.ray: Any = None
        self.started = False  # a Ray this engine started (stop() shuts it down)
        self.connected = False  # a driver connection this engine made (stop() drops it)
        self._actor: Any = None
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []  # compiling or tearing a graph down
        self._graphs: set[RayHandle] = set()  # handles with a compiled graph open

    def __repr__(self) -> str:
        return f"<RayEngine namespace={self.namespace!r} started={self.started}>"

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Attach to a Ray or start one; on the main thread (Ray's processes die with the
        thread that started them). :meth:`conduit_mcp.Cluster.start` calls it.

        From another thread it is refused before Ray is imported:

        >>> import threading
        >>> import conduit_mcp as mcp
        >>> seen = []
        >>> def open_it() -> None:
        ...     try:
        ...         mcp.RayEngine().open()
        ...     except mcp.Error as e:
        ...         seen.append((e.kind, e.reason))
        >>> thread = threading.Thread(target=open_it)
        >>> thread.start(); thread.join(timeout=10)
        >>> seen
        [('config', 'main_thread')]
        """
        if threading.current_thread() is not threading.main_thread():
            raise Error(
                "config",
                "main_thread",
                "Cluster.start runs ray.init, which must run on the main thread "
                "(Ray's processes die with the thread that started them)",
            )
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        ray = self.ray = import_ray(loopback=address is None)
        if ray.is_initialized():
            self.started = self.connected = False
        elif address is not None:
            ray.init(address=address, namespace=self.namespace, log_to_driver=False)
            self.connected = True
        else:
            ray.init(
                **{
                    # "local": a Ray of its own even when another runs on this machine
                    # (without it, ray.init joins the machine's latest Ray, found in /tmp/ray)
                    "address": "local",
                    "_node_ip_address": "127.0.0.1",
                    "num_cpus": self.num_cpus,
                    "include_dashboard": False,
                    "object_store_memory": self.object_store_memory,
                    "namespace": self.namespace,
                    "log_to_driver": False,
                    **self.init,
                }
            )
            self.started = self.connected = True
        self._actor = _host_actor(ray)

    def close(self) -> None:
        """Stop the Ray this engine started, or drop the connection it made; a Ray the
        application started is left as it is. :meth:`conduit_mcp.Cluster.stop` calls it.

        >>> import conduit_mcp as mcp
        >>> engine = mcp.RayEngine()
        >>> engine.close()  # never opened: nothing to stop
        >>> engine.started, engine.connected
        (False, False)
        """
        self._close_graphs()
        if self.ray is not None and self.connected and self.ray.is_initialized():
            self.ray.shutdown()
        self.connected = False

    def _background(self, work: Any, name: str) -> None:
        """Run a graph's compile or teardown on a thread :meth:`close` waits for (one
        that touched Ray after ``ray.shutdown`` would make Ray end the process)."""
        thread = threading.Thread(target=work, name=name, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _close_graphs(self) -> None:
        """Tear down the compiled graphs still open, and wait (bounded) for the threads
        compiling or tearing one down."""
        deadline = time.monotonic() + 30.0
        for _ in range(3):  # a compile that ends meanwhile adds a graph: look again
            with self._lock:
                threads, self._threads = list(self._threads), []
            for thread in threads:
                thread.join(timeout=max(deadline - time.monotonic(), 0.0))
            for handle in list(self._graphs):
                handle._close_graph()
            if not threads:
                return

    @property
    def secure(self) -> bool:
        """Ray's token authentication and TLS are both on: literals may cross.

        Off, a literal credential in a config's ``headers`` or ``env`` is refused:

        >>> import os
        >>> import conduit_mcp as mcp
        >>> os.environ.get("RAY_USE_TLS", "0") in ("0", "") and mcp.RayEngine().secure
        False
        """
        if os.environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
            return False
        try:
            from ray._private.authentication.authentication_utils import is_token_auth_enabled
        except ImportError:
            return False
        return bool(is_token_auth_enabled())

    # -- hosts --------------------------------------------------------------------------------

    def nodes(self) -> list[str]:
        """The ids of the Ray nodes alive now (none before the engine opens).

        >>> import conduit_mcp as mcp
        >>> mcp.RayEngine().nodes()
        []
        """
        if self.ray is None:
            return []
        return [n["NodeID"] for n in self.ray.nodes() if n.get("Alive")]

    def host_name(self, tenant: str, index: int) -> str:
        """The name of a tenant's ``index``-th host: its named actor in the engine's
        namespace, by which another caller finds it (``cluster.hub(tenant)``).

        >>> import conduit_mcp as mcp
        >>> mcp.RayEngine().host_name("acme", 0)
        'conduit-acme-0'
        """
        return f"conduit-{tenant}-{index}"

    def _opened(self) -> Any:
        if self.ray is None or self._actor is None:
            raise Error(
                "closed",
                "not_open",
                "the engine is not open: Cluster.start(engine) opens it",
            )
        return self.ray

    def start_host(self, spec: p.HostSpec, index: int) -> RayHandle:
        """Create the host's actor, placed by tenant (node affinity to the node
        :func:`conduit_mcp.cluster.protocol.placement` picks); :meth:`conduit_mcp.Cluster.hub`
        calls it, then waits for the host with :meth:`wait_alive`. An engine not open
        starts nothing:

        >>> import conduit_mcp as mcp
        >>> from conduit_mcp.cluster.protocol import HostSpec
        >>> try:
        ...     mcp.RayEngine().start_host(HostSpec("conduit-acme-0", "acme", {}, {}), 0)
        ... except mcp.Error as e:
        ...     print(e.kind, e.reason)
        closed not_open
        """
        self._opened()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options: dict[str, Any] = {
            "name": spec.name,
            "namespace": self.namespace,
            "max_restarts": self.max_restarts,
            "max_task_retries": 0,
            "num_cpus": 0,
            "max_concurrency": 10_000,
        }
        if spec.resources:  # Ray places it on a node that has them (and moves it with them)
            custom = dict(spec.resources)
            for key, option in (("CPU", "num_cpus"), ("GPU", "num_gpus"), ("memory", "memory")):
                if key in custom:
                    amount = custom.pop(key)
                    options[option] = int(amount) if key == "memory" else amount
            if custom:
                options["resources"] = custom
        else:
            node = p.placement(spec.tenant, self.nodes(), index)
            if node is not None:
                options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        try:
            actor = self._actor.options(**options).remote(
                spec.to_data(), self.caller_lease, self.secrets_file
            )
        except ValueError as exc:  # the name is taken
            raise Error(
                "config",
                "tenant",
                f"a host named {spec.name!r} already runs in namespace {self.namespace!r}: "
                "stop its hub first, or attach to it with cluster.hub(tenant)",
            ) from exc
        return RayHandle(self, spec.name, actor, pending=bool(spec.resources))

    def check_fit(self, demands: list[Mapping[str, float]]) -> None:
        """Refuse hosts that no live node can take now, before any starts: Ray would queue
        each such actor forever (an infeasible one, or one waiting for resources other
        actors hold). Each node's total resources from ``ray.nodes()``, what is free from
        ``ray.available_resources()``; :func:`conduit_mcp.cluster.protocol.fit` decides.

        >>> import conduit_mcp as mcp
        >>> mcp.RayEngine().check_fit([])  # nothing asks for resources: nothing to check

        Raises:
            Error: ``unavailable``/``placement_infeasible`` (no live node has them, or the
                hosts need more than the nodes have), ``unavailable``/``placement_busy``
                (other actors hold them now).
        """
        if not any(demands):
            return
        ray = self._opened()
        nodes = {n["NodeID"]: dict(n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive")}
        error = p.fit(list(demands), nodes, dict(ray.available_resources()))
        if error is not None:
            raise error

    def wait_placed(self, handle: RayHandle, timeout: float) -> None:
        """Wait (at most ``timeout``) for a host placed by resources to start: the
        bounded wait behind :meth:`check_fit` (resources taken meanwhile by another actor
        would leave it queued forever). An engine not open waits for nothing:

        >>> import conduit_mcp as mcp
        >>> try:
        ...     mcp.RayEngine().wait_placed(None, 1.0)
        ... except mcp.Error as e:
        ...     print(e.kind, e.reason)
        closed not_open

        Raises:
            Error: ``unavailable``/``placement_timeout``.
        """
        ray = self._opened()
        try:
            ray.get(handle.actor.__ray_ready__.remote(), timeout=timeout)
            handle.pending = False
        except ray.exceptions.GetTimeoutError:
            raise Error(
                "unavailable",
                "placement_timeout",
                f"host {handle.name!r} was not placed within {timeout:g} s (placement_timeout): "
                "no node had the resources it asks for free; other actors may hold them",
                data={"host": handle.name},
            ) from None
        except ray.exceptions.RayError:
            return  # it started and died: wait_alive says what became of it

    def find_hosts(self, tenant: str) -> list[RayHandle]:
        """The hosts of a tenant another caller started, found by name (a host started
        again after its node died carries a generation: ``conduit-t-0.r1``).

        >>> import conduit_mcp as mcp
        >>> try:
        ...     mcp.RayEngine().find_hosts("acme")
        ... except mcp.Error as e:
        ...     print(e.kind, e.reason)
        closed not_open
        """
        self._opened()
        prefix = f"conduit-{tenant}-"
        latest: dict[int, tuple[int, str]] = {}
        for name in self.ray.util.list_named_actors(all_namespaces=False):
            if not name.startswith(prefix):
                continue
            index_text, _, generation = name[len(prefix) :].partition(".r")
            if not index_text.isdigit() or (generation and not generation.isdigit()):
                continue
            index, gen = int(index_text), int(generation or 0)
            if index not in latest or latest[index][0] < gen:
                latest[index] = (gen, name)
        found = []
        for index in sorted(latest):
            name = latest[index][1]
            try:
                actor = self.ray.get_actor(name, namespace=self.namespace)
            except ValueError:
                continue
            found.append(RayHandle(self, name, actor))
        return found

    def wait_alive(self, handle: RayHandle, timeout: float) -> dict[str, Any]:
        """The host's info once it answers (a restart in progress is waited for): its
        ``pid``, ``node``, ``clients``, ``ready``, ``in_flight``, ``servers``, and ``error``
        when its Hub refused the spec.

        >>> import conduit_mcp as mcp
        >>> try:
        ...     mcp.RayEngine().wait_alive(None, 1.0)
        ... except mcp.Error as e:
        ...     print(e.kind, e.reason)
        closed not_open
        """
        self._opened()
        result: dict[str, Any] = handle._read("info", timeout)
        handle.pending = False
        return result
