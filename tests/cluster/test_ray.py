"""The cluster on a simulated two-node Ray (``ray.cluster_utils.Cluster``: two raylets on
this machine, every address on 127.0.0.1): the Hub's calls through hosts on all three front
ends, placement by tenant, a host killed under calls in flight, a node removed, batching,
a caller process killed (its calls cancelled on the host), loopback-only sockets, and planted
secrets (in the hosts' environment and in their secrets file) absent from every reply, the
caller's logs and Ray's session directory.

One Ray for the whole module (it takes seconds to start); the tests share it and run in
file order (the node removal last)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conduit_mcp.cluster.ray_engine import LOOPBACK_ENV

for _key, _value in LOOPBACK_ENV.items():  # before ray is first imported
    os.environ.setdefault(_key, _value)
PLANTED = "t42-pl4nted-Gh0st-v4lue"
os.environ["CLUSTER_T42_TOKEN"] = PLANTED  # the hosts' own environment (the raylets inherit it)
FILED = "t42-f1led-S3cret-in-a-file"  # only in the hosts' secrets file, never in an environment

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed (pip install 'conduit-mcp[ray]')"
)
psutil = pytest.importorskip("psutil", reason="psutil lists the Ray processes' sockets")
from ray.cluster_utils import Cluster as RayTestCluster  # noqa: E402

import conduit_mcp as mcp  # noqa: E402
from conduit_mcp.cluster import protocol as p  # noqa: E402
from conduit_mcp.testing import ScriptedServer  # noqa: E402
from conduit_mcp.testing.waiting import until  # noqa: E402

pytestmark = pytest.mark.timeout(120)

SERVER = {"command": sys.executable, "args": ["-m", "conduit_mcp.testing"]}
NAMESPACE = "conduit_mcp_tests"
NODE = {
    "num_cpus": 1,
    "object_store_memory": 80 * 1024 * 1024,
    "node_ip_address": "127.0.0.1",
}

#: Custom resources of the two nodes (placement by resources): docs/cluster.md's example asks
#: for "tenant_a", which only the worker has.
HEAD_RESOURCES = {"tenant_b": 1.0, "shared": 4.0}
WORKER_RESOURCES = {"tenant_a": 2.0, "shared": 4.0}


class Rig:
    def __init__(self, ray_cluster: Any, cluster: mcp.Cluster, worker: Any) -> None:
        self.ray_cluster = ray_cluster
        self.cluster = cluster
        self.worker = worker
        self.head_id = ray_cluster.head_node.node_id
        self.worker_id = worker.node_id

    def tenant_on(self, node: str, prefix: str) -> str:
        """A tenant name whose first host prefers ``node``."""
        nodes = [self.head_id, self.worker_id]
        return next(
            f"{prefix}{i}" for i in range(100) if p.placement(f"{prefix}{i}", nodes) == node
        )


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    secrets_file = tmp_path_factory.mktemp("secrets") / "t42.json"
    secrets_file.write_text(json.dumps({"CLUSTER_T42_FILED": FILED}), encoding="utf-8")
    ray_cluster = RayTestCluster(
        initialize_head=True,
        head_node_args={
            **NODE,
            "resources": HEAD_RESOURCES,
            "include_dashboard": False,
            "_system_config": {
                "health_check_initial_delay_ms": 0,
                "health_check_period_ms": 500,
                "health_check_timeout_ms": 500,
                "health_check_failure_threshold": 3,
            },
        },
    )
    worker = ray_cluster.add_node(**NODE, resources=WORKER_RESOURCES)
    ray.init(address=ray_cluster.address, namespace=NAMESPACE, log_to_driver=False)
    cluster = mcp.Cluster.start(
        mcp.RayEngine(
            namespace=NAMESPACE,
            max_restarts=3,
            caller_lease=2.0,
            secrets_file=str(secrets_file),
        )
    )
    try:
        yield Rig(ray_cluster, cluster, worker)
    finally:
        cluster.stop()
        attached_left_running = ray.is_initialized()
        ray.shutdown()
        ray_cluster.shutdown()
    assert attached_left_running  # cluster.stop() never stops a Ray it attached to


def test_the_hubs_calls_on_all_three_front_ends(rig: Rig) -> None:
    hub = rig.cluster.hub("calls", {"mcpServers": {"a": SERVER, "b": SERVER}})
    status = hub.await_ready(timeout=30, servers="all")
    assert {n: s.state for n, s in status.items()} == {"a": "ready", "b": "ready"}
    assert hub.call_tool("a.add", {"a": 1, "b": 2}).text == "3"
    assert hub.call_tool(("b", "echo"), {"text": "x"}).text == "x"
    assert {"a.add", "b.echo"} <= {t.name for t in hub.tools()}
    assert hub.tool("a.add") is not None and hub.tool("a.add").input_schema["required"] == [
        "a",
        "b",
    ]
    seen: list[Any] = []
    assert hub.call_tool("b.progress", {"steps": 3}, on_progress=seen.append).text.startswith(
        "done"
    )
    assert [s.progress for s in seen] == [1.0, 2.0, 3.0]

    async def on_loop() -> str:
        return (await hub.aio.call_tool("a.add", {"a": 5, "b": 5})).text

    assert asyncio.run(on_loop()) == "10"
    assert hub.futures.call_tool("a.add", {"a": 2, "b": 2}).get(timeout=20).text == "4"
    with pytest.raises(mcp.Error) as caught:
        hub.call_tool("a.nope", {})
    assert (caught.value.kind, caught.value.reason) == ("argument", "unknown_tool")
    assert "a.add" in str(caught.value.data["closest"]) or caught.value.data["closest"]
    with pytest.raises(mcp.Error) as caught:
        hub.call_tool("a.add", {"f": print})
    assert caught.value.kind == "argument"
    hub.stop()
    assert rig.cluster.engine.find_hosts("calls") == []  # the hosts it started are gone


def test_the_remote_hub_has_the_hubs_call_signatures(rig: Rig) -> None:
    import inspect

    from conduit_mcp.cluster import AsyncRemoteHub, FutureRemoteHub, RemoteHub
    from conduit_mcp.hub.fronts import AsyncHub, FutureHub

    for remote, local in (
        (RemoteHub, mcp.Hub),
        (AsyncRemoteHub, AsyncHub),
        (FutureRemoteHub, FutureHub),
    ):
        for name in (
            "call_tool",
            "get_prompt",
            "read_resource",
            "complete",
            "request",
            "subscribe",
            "unsubscribe",
            "await_ready",
            "set_logging_level",
        ):
            assert (
                inspect.signature(getattr(remote, name)) == inspect.signature(getattr(local, name))
                or name == "await_ready"
            ), (remote, name)


def test_a_callable_or_a_literal_secret_is_refused_before_any_host_starts(rig: Rig) -> None:
    with pytest.raises(mcp.Error) as caught:
        rig.cluster.hub("refused", {"mcpServers": {"a": SERVER}}, on_authorize=print)
    assert (caught.value.kind, caught.value.reason) == ("config", "options.on_authorize")
    with pytest.raises(mcp.Error) as caught:
        rig.cluster.hub("refused", {"mcpServers": {"a": {**SERVER, "env": {"TOKEN": PLANTED}}}})
    assert (caught.value.kind, caught.value.reason) == ("config", "servers.a.env")
    assert PLANTED not in str(caught.value)
    assert rig.cluster.engine.find_hosts("refused") == []


def test_a_reference_is_expanded_on_the_host_and_never_comes_back(
    rig: Rig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's example, ``"Authorization": "Bearer ${T42_GITHUB}"``, against a server that
    requires that bearer, and a stdio server given the value in its environment: the planted
    value reaches the servers (their calls succeed), and is absent from every reply (results,
    errors, progress, notifications, views, status), from every log on the caller's side and
    from every file of Ray's session directory (the hosts' and workers' logs among them)."""
    import logging
    import queue

    caplog.set_level(logging.DEBUG)
    bearer = ScriptedServer(tmp_path, name="bearer").http_server(require_bearer=PLANTED)
    entry = {
        **SERVER,
        "env": {"SECRET_TOKEN": "${CLUSTER_T42_TOKEN}", "FILED_TOKEN": "${CLUSTER_T42_FILED}"},
    }
    http = {"url": bearer.url, "headers": {"Authorization": "Bearer ${CLUSTER_T42_TOKEN}"}}
    seen: list[Any] = []
    notes: queue.Queue[Any] = queue.Queue()
    with bearer, rig.cluster.hub("secrets", {"mcpServers": {"a": entry, "gh": http}}) as hub:
        hub.subscribe_notifications(notes)
        hub.await_ready(timeout=30, servers="all")
        replies = [
            hub.call_tool("a.env", {"name": "SECRET_TOKEN"}),
            hub.call_tool("a.env", {"name": "FILED_TOKEN"}),  # from the host's secrets file
            hub.call_tool("a.echo", {"text": PLANTED}),
            hub.call_tool("gh.echo", {"text": f"x{PLANTED}x"}),  # the bearer was accepted
            hub.call_tool("a.progress", {"steps": 2}, on_progress=seen.append),
            hub.call_tool(
                "a.notify",
                {"method": "notifications/message", "params": {"level": "info", "data": PLANTED}},
            ),
        ]
        assert replies[3].text == "x***x"
        assert all(PLANTED not in repr(r.raw) and FILED not in repr(r.raw) for r in replies)
        # the servers saw the values the host expanded
        assert replies[0].structured_content["value"] == "***"
        assert replies[1].structured_content["value"] == "***"
        with pytest.raises(mcp.Error) as caught:
            hub.call_tool("a.error", {"code": -32000, "message": PLANTED, "data": {"k": PLANTED}})
        assert PLANTED not in str(caught.value) and PLANTED not in repr(caught.value.data)
        failed = hub.call_tool("a.fail", {"message": PLANTED})  # isError: a result
        assert failed.is_error and PLANTED not in repr(failed.raw) and "***" in failed.text
        note = notes.get(timeout=10)  # bounded: the notification the server sent
        assert PLANTED not in repr(note.params) and "***" in repr(note.params)
        assert PLANTED not in repr(seen) and len(seen) == 2
        views = [hub.tools(), hub.status(), hub.restarts(), rig.cluster.status()]
        assert PLANTED not in repr(views) and FILED not in repr(views)
    assert PLANTED not in caplog.text and FILED not in caplog.text
    scanned = 0
    for node in (rig.ray_cluster.head_node, rig.worker):
        session = Path(node.get_session_dir_path())
        for path in session.rglob("*"):
            if path.is_file() and not path.is_symlink():
                try:
                    data = path.read_bytes()
                except OSError:  # a socket or a file gone meanwhile
                    continue
                scanned += 1
                assert PLANTED.encode() not in data and FILED.encode() not in data, path
    assert scanned > 10  # the logs of the raylets, the GCS and the workers among them


def test_a_caller_that_dies_has_its_calls_cancelled_on_the_host(rig: Rig, tmp_path: Path) -> None:
    """A second process attaches to a tenant's hosts (found by name), sends three calls and is
    killed: once it has not polled for ``caller_lease`` (2 s here), the host cancels its calls
    at their server, and leaves the other callers' calls alone."""
    scripted = ScriptedServer(tmp_path, name="lease")
    entry = {"command": sys.executable, "args": scripted.args()}

    def slow_calls() -> list[Any]:
        return [
            e
            for e in scripted.received("tools/call")
            if (e.get("params") or {}).get("name") == "slow"
        ]

    caller_code = (
        "import sys\n"
        "import conduit_mcp as mcp\n"
        f"cluster = mcp.Cluster.start(mcp.RayEngine(namespace={NAMESPACE!r}))\n"
        "hub = cluster.hub('lease')\n"
        "futures = [hub.futures.call_tool('a.slow', {'seconds': 60}) for _ in range(3)]\n"
        "print('sent', flush=True)\n"
        "sys.stdin.readline()\n"  # until the test kills it
    )
    with rig.cluster.hub("lease", {"mcpServers": {"a": entry}}) as hub:
        hub.await_ready(timeout=30)
        env = {**os.environ, "RAY_ADDRESS": rig.ray_cluster.address}
        caller = subprocess.Popen(
            [sys.executable, "-c", caller_code],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while len(slow_calls()) < 3:  # bounded: each turn reads the server's log
                assert caller.poll() is None, caller.communicate(timeout=10)
                assert time.monotonic() < deadline, "the second caller's calls never arrived"
                time.sleep(0.02)
            mine = hub.futures.call_tool("a.slow", {"seconds": 4})  # this caller's, alive
            (host,) = rig.cluster.engine.find_hosts("lease")
            deadline = time.monotonic() + 10
            while host.info()["in_flight"] < 4:
                assert time.monotonic() < deadline, host.info()
        finally:
            caller.kill()
            caller.communicate(timeout=10)
        killed = time.monotonic()
        theirs = [e["id"] for e in slow_calls()[:3]]
        for count in (1, 2, 3):
            scripted.wait_for("cancelled", timeout=15, count=count)
        cancelled_in = time.monotonic() - killed
        assert sorted(scripted.cancelled_ids(), key=str) == sorted(theirs, key=str)
        assert cancelled_in < 2.0 + 3.0, cancelled_in  # the lease, its watch and slack
        assert mine.get(timeout=20).text == "slept 4"  # this caller's call ran to its end
        info = host.info()
        assert info["in_flight"] == 0 and info["callers"] == 1, info  # only this caller left
        assert hub.call_tool("a.add", {"a": 1, "b": 2}).text == "3"


def test_status_placement_and_batching(rig: Rig) -> None:
    head = rig.tenant_on(rig.head_id, "on-head-")
    other = rig.tenant_on(rig.worker_id, "on-worker-")
    hubs = [rig.cluster.hub(t, {"mcpServers": {"a": SERVER, "b": SERVER}}) for t in (head, other)]
    for hub in hubs:
        hub.await_ready(timeout=30, servers="all")
    futures = [hubs[0].futures.call_tool("a.add", {"a": i, "b": 0}) for i in range(64)]
    assert [int(f.get(timeout=30).text) for f in futures] == list(range(64))
    status = rig.cluster.status()
    assert set(status.nodes) == {rig.head_id, rig.worker_id}
    assert status.placement[head] == ("conduit-" + head + "-0",)
    on_head, on_worker = status.host(f"conduit-{head}-0"), status.host(f"conduit-{other}-0")
    assert on_head is not None and on_worker is not None
    assert (on_head.node, on_worker.node) == (rig.head_id, rig.worker_id), (
        status,
        rig.head_id,
        rig.worker_id,
        head,
        other,
    )
    assert on_head.state == "up" and on_head.clients == 2 and on_head.ready == 2
    assert on_head.pid != on_worker.pid and psutil.pid_exists(on_head.pid)
    assert on_head.calls >= 64 and on_head.messages < on_head.calls / 2  # batched
    for hub in hubs:
        hub.stop()


def test_a_killed_host_fails_its_calls_in_flight_and_comes_back(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="conduit_mcp.cluster")
    hub = rig.cluster.hub("kill", {"mcpServers": {"a": SERVER, "b": SERVER}})
    hub.await_ready(timeout=30, servers="all")
    (before,) = rig.cluster.status().hosts
    futures = [hub.futures.call_tool("a.slow", {"seconds": 30}) for _ in range(8)]
    deadline = time.monotonic() + 10
    while rig.cluster.engine.find_hosts("kill")[0].info()["in_flight"] < 8:
        assert time.monotonic() < deadline
    killed = time.monotonic()
    os.kill(before.pid, signal.SIGKILL)
    outcomes = []
    for future in futures:
        try:
            future.get(timeout=15)
            outcomes.append("answered")
        except mcp.Error as e:
            outcomes.append((e.kind, e.reason))
    failed_in = time.monotonic() - killed
    assert outcomes == [("unavailable", "host_lost")] * 8  # none lost in silence
    assert failed_in < 5.0, failed_in
    hub.await_ready(timeout=30, servers="all")  # its clients, rebuilt from the spec
    assert hub.call_tool("b.add", {"a": 1, "b": 1}).text == "2"
    (after,) = rig.cluster.status().hosts
    assert after.pid != before.pid and after.restarts == 1 and after.clients == 2
    # A real loss is logged, with how many calls it took.
    assert "lost with 8 call(s) in flight" in caplog.text
    hub.stop()


def test_a_hub_stopped_on_purpose_logs_no_loss(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="conduit_mcp.cluster")
    hub = rig.cluster.hub("quiet", {"mcpServers": {"a": SERVER}})
    hub.await_ready(timeout=30, servers="all")
    assert hub.call_tool("a.add", {"a": 1, "b": 2}).text == "3"
    threads = [t for channel in hub._core.channels for t in channel._threads]
    hub.stop()
    # Its hosts were stopped under the channels' standing polls: wait for those to end,
    # which is when a loss would have been logged.
    until(lambda: not any(t.is_alive() for t in threads), what="the channels' threads to end")
    assert rig.cluster.engine.find_hosts("quiet") == []
    assert [r.getMessage() for r in caplog.records if r.name == "conduit_mcp.cluster"] == []


def _node_of(rig: Rig, resource: str) -> str:
    (node,) = [
        n["NodeID"] for n in ray.nodes() if n.get("Alive") and resource in n.get("Resources", {})
    ]
    return node


def _free(resource: str) -> float:
    return float(ray.available_resources().get(resource, 0.0))


def _all_free() -> None:
    """Wait until every custom resource is free again: a stopped host gives its share back
    once Ray has reaped its process, a moment after the stop returns."""
    totals = {k: HEAD_RESOURCES.get(k, 0.0) + WORKER_RESOURCES.get(k, 0.0)
              for k in {*HEAD_RESOURCES, *WORKER_RESOURCES}}  # fmt: skip
    until(lambda: all(_free(k) == v for k, v in totals.items()), what="the resources free")


def test_hosts_placed_by_resources_land_on_the_nodes_that_have_them(rig: Rig) -> None:
    """A tenant pinned to 2 hosts that ask for ``tenant_a`` (only the worker has it): both
    on the worker, even for a tenant whose node affinity would pick the head; two tenants
    asking for ``tenant_b`` share the head; a fraction of ``shared`` lets hosts share it."""
    _all_free()
    tenant = rig.tenant_on(rig.head_id, "res-a-")  # by tenant it would go to the head
    servers = {"mcpServers": {"a": SERVER, "b": SERVER, "c": SERVER}}
    hub = rig.cluster.hub(tenant, servers, placement={"resources": {"tenant_a": 1}, "hosts": 2})
    try:
        status = rig.cluster.status()
        assert status.placement[tenant] == (f"conduit-{tenant}-0", f"conduit-{tenant}-1")
        hosts = [h for h in status.hosts if h.tenant == tenant]
        assert [h.node for h in hosts] == [rig.worker_id] * 2, (status, rig.worker_id)
        assert [h.resources for h in hosts] == [{"tenant_a": 1.0}] * 2
        assert [h.clients for h in hosts] == [2, 1]  # a, b | c: config order, as even as can be
        assert hub.host_of("c") == f"conduit-{tenant}-1"
        hub.await_ready(timeout=30, servers="all")
        assert hub.call_tool("c.add", {"a": 1, "b": 2}).text == "3"
        until(lambda: _free("tenant_a") == 0.0, what="Ray to count tenant_a as taken")
        # Both units are held now: a third host asking for one is refused at once.
        started = time.monotonic()
        with pytest.raises(mcp.Error) as caught:
            rig.cluster.hub("res-more", {"mcpServers": {"a": SERVER}},
                            placement={"resources": {"tenant_a": 1}})  # fmt: skip
        assert (caught.value.kind, caught.value.reason) == ("unavailable", "placement_busy")
        assert time.monotonic() - started < 5.0
        assert rig.cluster.engine.find_hosts("res-more") == []
    finally:
        hub.stop()
    # Two tenants share the head's one unit of tenant_b (half each); the engine's table
    # places them, "*" the rest.
    engine = mcp.RayEngine(
        namespace=NAMESPACE,
        placement={
            "res-b1": {"resources": {"tenant_b": 0.5}},
            "res-b2": {"resources": {"tenant_b": 0.5}},
            "*": {"resources": {"shared": 0.25}, "clients_per_host": 1},
        },
    )
    with mcp.Cluster.start(engine) as shared:
        assert not engine.started and not engine.connected  # attached to the rig's Ray
        hubs = [shared.hub(t, {"mcpServers": {"a": SERVER}}) for t in ("res-b1", "res-b2")]
        other = shared.hub("res-any", {"mcpServers": {"a": SERVER, "b": SERVER}})
        status = shared.status()
        by_tenant = {h.tenant: h for h in status.hosts if h.tenant != "res-any"}
        assert {t: h.node for t, h in by_tenant.items()} == {
            "res-b1": _node_of(rig, "tenant_b"),
            "res-b2": _node_of(rig, "tenant_b"),
        }
        spread = [h for h in status.hosts if h.tenant == "res-any"]
        assert len(spread) == 2 and all(h.resources == {"shared": 0.25} for h in spread)
        assert all(h.node in (rig.head_id, rig.worker_id) for h in spread)
        for hub in [*hubs, other]:
            hub.await_ready(timeout=30, servers="all")
        assert other.call_tool("b.add", {"a": 2, "b": 2}).text == "4"
    assert ray.is_initialized()  # the attached engine left the rig's Ray running
    for tenant in ("res-b1", "res-b2", "res-any"):
        assert rig.cluster.engine.find_hosts(tenant) == []


@pytest.mark.parametrize(
    ("placement", "why"),
    [
        ({"resources": {"gpu_pool": 1}}, "no live node has gpu_pool=1"),
        ({"resources": {"tenant_a": 3}}, "no live node has tenant_a=3"),  # the worker has 2
        ({"resources": {"tenant_a": 1}, "hosts": 3}, "more than the nodes have"),
        ({"resources": {"tenant_a": 1, "tenant_b": 1}}, "cannot be placed"),  # not on one node
    ],
)
def test_an_unsatisfiable_placement_is_refused_at_once(
    rig: Rig, placement: dict[str, Any], why: str
) -> None:
    servers = {"mcpServers": {"a": SERVER, "b": SERVER, "c": SERVER}}
    started = time.monotonic()
    with pytest.raises(mcp.Error) as caught:
        rig.cluster.hub("unplaced", servers, placement=placement)
    assert time.monotonic() - started < 5.0  # never a wait for Ray to schedule
    assert (caught.value.kind, caught.value.reason) == ("unavailable", "placement_infeasible")
    assert why in caught.value.message, caught.value.message
    assert caught.value.data["resources"] == {
        k: float(v) for k, v in placement["resources"].items()
    }
    assert rig.cluster.engine.find_hosts("unplaced") == []
    assert "unplaced" not in rig.cluster.hubs()


def test_a_host_not_placed_in_time_is_given_up(rig: Rig) -> None:
    """The bounded wait behind the check: a host whose resources another actor took between
    the check and the start stays queued in Ray; it is given up after placement_timeout."""
    _all_free()  # an earlier test's hosts give their share back once Ray has reaped them
    holder = rig.cluster.hub("res-hold", {"mcpServers": {"a": SERVER}},
                             placement={"resources": {"tenant_b": 1}})  # fmt: skip
    engine = rig.cluster.engine
    spec = p.HostSpec("conduit-res-late-0", "res-late", {"mcpServers": {"a": SERVER}}, {},
                      {"tenant_b": 1.0})  # fmt: skip
    handle = engine.start_host(spec, 0)  # as if the check had passed a moment ago
    try:
        started = time.monotonic()
        with pytest.raises(mcp.Error) as caught:
            engine.wait_placed(handle, 1.0)
        assert (caught.value.kind, caught.value.reason) == ("unavailable", "placement_timeout")
        assert 1.0 <= time.monotonic() - started < 5.0
    finally:
        killed = time.monotonic()
        handle.kill()  # a host never placed: no shutdown message waited for
        assert time.monotonic() - killed < 3.0
        holder.stop()
    until(lambda: _free("tenant_b") == 1.0, what="tenant_b to be free again")
    assert engine.find_hosts("res-late") == []


def test_set_logging_level_on_a_cluster_hub(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    """The Hub's set_logging_level on the remote hub's three front ends: each host asks its
    members, the outcomes come back per server in config order, a bad level is refused on
    the caller's side, and a host killed and started again gets the level again."""
    quiet = {**SERVER, "args": [*SERVER["args"], "--no-logging"]}
    config = {"mcpServers": {"a": SERVER, "b": quiet, "c": SERVER, "gone": {"command": "/no/such"}}}
    hub = rig.cluster.hub("levels", config, protocol="legacy", placement={"hosts": 2})
    try:
        assert len(hub.hosts()) == 2 and hub.host_of("a") != hub.host_of("gone")
        hub.await_ready(timeout=30, servers=["a", "b", "c"])
        outcomes = hub.set_logging_level("warning")
        assert list(outcomes) == ["a", "b", "c", "gone"]
        assert {n: e and (e.kind, e.reason) for n, e in outcomes.items()} == {
            "a": None,
            "b": ("unavailable", "not_supported"),
            "c": None,
            "gone": ("unavailable", "server_not_ready"),
        }

        async def on_loop() -> dict[str, Any]:
            return await hub.aio.set_logging_level("error", timeout=10)

        assert asyncio.run(on_loop())["a"] is None
        assert hub.futures.set_logging_level("debug").get(timeout=30)["c"] is None
        for bad in (
            lambda: hub.set_logging_level("loud"),  # type: ignore[arg-type]
            lambda: hub.futures.set_logging_level("loud"),  # type: ignore[arg-type]
            lambda: asyncio.run(hub.aio.set_logging_level("loud")),  # type: ignore[arg-type]
        ):
            with pytest.raises(mcp.Error) as caught:
                bad()
            assert (caught.value.kind, caught.value.reason) == ("argument", "level")
        with pytest.raises(mcp.Error) as caught:
            hub.set_logging_level("info", timeout=-1)
        assert (caught.value.kind, caught.value.reason) == ("argument", "timeout")
        # The server suppresses what is under the level (its "log" tool says which), and a
        # host started again from its spec (which holds no level) gets it again.
        assert hub.set_logging_level("error")["a"] is None
        assert hub.call_tool("a.log", {"level": "warning"}).text == "suppressed"
        host = rig.cluster.status().host(hub.host_of("a") or "")
        assert host is not None and host.pid is not None
        os.kill(host.pid, signal.SIGKILL)
        until(
            lambda: (rig.cluster.status().host(host.name) or host).pid not in (None, host.pid),
            what="the host of a to come back",
            timeout=60,
        )
        hub.await_ready(timeout=30, servers=["a"])
        # A new server logs everything until its host's Hub sets the level again.
        until(
            lambda: hub.call_tool("a.log", {"level": "warning"}).text == "suppressed",
            what="the level to be set again on the restarted host",
            timeout=20,
        )
        assert hub.call_tool("a.log", {"level": "critical"}).text == "logged"
        assert (rig.cluster.status().host(host.name) or host).restarts == 1
    finally:
        hub.stop()
    with pytest.raises(mcp.Error) as caught:
        hub.set_logging_level("info")
    assert (caught.value.kind, caught.value.reason) == ("closed", "stopped")


def test_every_socket_of_ray_and_the_hosts_is_on_loopback(rig: Rig) -> None:
    with rig.cluster.hub("sockets", {"mcpServers": {"a": SERVER}}) as hub:
        hub.await_ready(timeout=30)
        me = psutil.Process()
        processes = [me, *me.children(recursive=True)]
        assert len(processes) > 5  # the raylets, GCS, workers, the host and its server
        seen, offending = 0, []
        for process in processes:
            try:
                connections = process.net_connections(kind="inet")
            except psutil.Error:
                continue
            for c in connections:
                for address in (c.laddr, c.raddr):
                    if not address:
                        continue
                    seen += 1
                    ip = ipaddress.ip_address(address.ip.split("%")[0])
                    mapped = getattr(ip, "ipv4_mapped", None)
                    if not (ip.is_loopback or (mapped is not None and mapped.is_loopback)):
                        offending.append((process.pid, address))
        assert seen > 10 and offending == []


_BLOCK = re.compile(r"<!--\s*docs-test:\s*setup=ray.*?-->\s*\n```python\n(.*?)^```", re.S | re.M)
#: A ``print(...)  # output`` line of an example: the output it must print.
_PRINTED = re.compile(r"^\s*print\(.*\)  # (.+)$", re.M)


def _page_blocks() -> list[str]:
    page = Path(__file__).resolve().parents[2] / "docs" / "cluster.md"
    return _BLOCK.findall(page.read_text(encoding="utf-8"))


def test_the_cluster_page_has_its_ray_examples() -> None:
    blocks = _page_blocks()
    assert len(blocks) == 3  # the tour, placement by resources, set_logging_level
    assert all(_PRINTED.findall(b) for b in blocks)


@pytest.mark.parametrize("index", range(3))
def test_the_cluster_pages_example_runs_against_this_ray(
    rig: Rig, tmp_path: Path, index: int
) -> None:
    """docs/cluster.md's examples, as written, in a fresh interpreter that finds this Ray
    through ``RAY_ADDRESS`` (attached: its ``cluster.stop()`` leaves this Ray running); each
    prints what its ``print(...)  # output`` comments say."""
    block = _page_blocks()[index]
    env = {**os.environ, "RAY_ADDRESS": rig.ray_cluster.address}
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    wanted = _PRINTED.findall(block)
    assert done.stdout.splitlines()[-len(wanted) :] == wanted
    assert ray.is_initialized() and len(ray.nodes()) >= 2


def test_cluster_stop_stops_a_ray_it_started(rig: Rig, tmp_path: Path) -> None:
    """In a fresh interpreter with no ``RAY_ADDRESS``: ``RayEngine()`` starts a Ray of its
    own (not this module's), on loopback, and ``cluster.stop()`` stops it: its processes
    are gone. (That it never stops one it attached to: the rig's teardown.)"""
    code = (
        "import json, psutil, ray\n"
        "import conduit_mcp as mcp\n"
        "cluster = mcp.Cluster.start(mcp.RayEngine(namespace='own'))\n"
        "kids = [c.pid for c in psutil.Process().children(recursive=True)]\n"
        "gcs = ray.get_runtime_context().gcs_address\n"
        "print(json.dumps({'started': cluster.engine.started, 'kids': kids, 'gcs': gcs}))\n"
        "cluster.stop()\n"
        "print(json.dumps({'initialized': ray.is_initialized()}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = (json.loads(line) for line in done.stdout.splitlines()[-2:])
    assert first["started"] is True and second == {"initialized": False}
    assert first["gcs"].startswith("127.0.0.1:") and first["gcs"] != rig.ray_cluster.address
    assert len(first["kids"]) >= 2  # its GCS and raylet, at least
    deadline = time.monotonic() + 30
    while left := [pid for pid in first["kids"] if _alive(pid)]:
        assert time.monotonic() < deadline, f"still running after cluster.stop(): {left}"
        time.sleep(0.05)  # bounded: process exits give no event here


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_removed_node_moves_its_hosts(rig: Rig) -> None:
    """A host placed by tenant (node affinity) is started again by the cluster on a live
    node; one placed by resources is started again by Ray on a node that has them (here
    ``shared``: the head's was held while it was placed, so it went to the worker)."""
    _all_free()
    tenant = rig.tenant_on(rig.worker_id, "moving-")
    hub = rig.cluster.hub(tenant, {"mcpServers": {"a": SERVER}})
    holder = rig.cluster.hub("moving-hold", {"mcpServers": {"a": SERVER}},
                             placement={"resources": {"tenant_b": 1, "shared": 4}})  # fmt: skip
    by_resources = rig.cluster.hub("moving-res", {"mcpServers": {"a": SERVER}},
                                   placement={"resources": {"shared": 1}})  # fmt: skip
    holder.stop()  # the head's "shared" is free again: the host can move there
    for each in (hub, by_resources):
        each.await_ready(timeout=30)
    nodes = {h.tenant: h.node for h in rig.cluster.status().hosts}
    assert nodes == {tenant: rig.worker_id, "moving-res": rig.worker_id}, nodes
    removed = time.monotonic()
    rig.ray_cluster.remove_node(rig.worker, allow_graceful=False)
    deadline = removed + 40

    def moved() -> bool:  # each status asks the hosts
        return all(h.node == rig.head_id for h in rig.cluster.status().hosts)

    while not moved():
        if time.monotonic() > deadline:
            import faulthandler

            faulthandler.dump_traceback(all_threads=True)
        assert time.monotonic() < deadline, rig.cluster.status()
    moved_in = time.monotonic() - removed
    for each in (hub, by_resources):
        each.await_ready(timeout=30)
        assert each.call_tool("a.add", {"a": 2, "b": 3}).text == "5"
    hosts = rig.cluster.status().hosts
    assert all(h.state == "up" and h.restarts == 1 for h in hosts), hosts
    assert moved_in < 45, moved_in
    assert [h.resources for h in hosts if h.tenant == "moving-res"] == [{"shared": 1.0}]
    hub.stop()
    by_resources.stop()


def test_a_callers_batches_go_over_a_compiled_graph_and_a_kill_still_fails_them(
    rig: Rig,
) -> None:
    """The first caller of a host gets its compiled graph (after a few calls over the
    actor task); a second caller of the same host stays on the task path (one graph per
    actor); a host killed under calls sent over the graph fails each one ``host_lost``,
    none sent twice, and the caller compiles a graph to the host started again."""
    # compiled=True is opt-in (a Ray 2.60 abort window, docs/cluster.md "Batching"): an
    # engine of its own on the rig's Ray.
    graphs = mcp.Cluster.start(
        mcp.RayEngine(namespace=NAMESPACE, max_restarts=3, caller_lease=2.0, compiled=True)
    )
    hub = graphs.hub("graph", {"mcpServers": {"a": SERVER}})
    try:
        hub.await_ready(timeout=30, servers="all")
        (channel,) = hub._core.channels
        handle = channel.handle

        def compiled() -> bool:
            hub.call_tool("a.add", {"a": 1, "b": 2})
            return handle._graph_state == "ready"

        until(compiled, what="the caller's compiled graph", timeout=30)
        assert hub.call_tool("a.add", {"a": 2, "b": 2}).text == "4"  # over the graph
        # A second caller, attached by name (its own engine on this Ray).
        second_cluster = mcp.Cluster.start(mcp.RayEngine(namespace=NAMESPACE, compiled=True))
        other = second_cluster.hub("graph")
        try:
            assert other.call_tool("a.add", {"a": 1, "b": 1}).text == "2"
            (second,) = other._core.channels
            until(
                lambda: second.handle._graph_state == "off",
                what="the second caller refused the host's one graph",
                timeout=30,
            )
            assert other.call_tool("a.add", {"a": 3, "b": 1}).text == "4"
        finally:
            other.stop()
            second_cluster.stop()
        (before,) = graphs.status().hosts
        futures = [hub.futures.call_tool("a.slow", {"seconds": 30}) for _ in range(4)]
        until(
            lambda: graphs.engine.find_hosts("graph")[0].info()["in_flight"] >= 4,
            what="4 calls in flight",
        )
        killed = time.monotonic()
        os.kill(before.pid, signal.SIGKILL)
        outcomes = []
        for future in futures:
            try:
                future.get(timeout=15)
                outcomes.append("answered")
            except mcp.Error as e:
                outcomes.append((e.kind, e.reason))
        assert outcomes == [("unavailable", "host_lost")] * 4
        assert time.monotonic() - killed < 5.0
        hub.await_ready(timeout=30, servers="all")
        handle = channel.handle
        until(compiled, what="a graph to the host started again", timeout=30)
        assert hub.call_tool("a.add", {"a": 5, "b": 5}).text == "10"
    finally:
        hub.stop()
        graphs.stop()
