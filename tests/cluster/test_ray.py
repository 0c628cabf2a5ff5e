"""The cluster on a simulated two-node Ray (``ray.cluster_utils.Cluster``: two raylets on
this machine, every address on 127.0.0.1): the Hub's calls through hosts on all three front
ends, placement by tenant, a host killed under calls in flight, a node removed, batching,
loopback-only sockets, and planted secrets absent from every reply and from Ray's session
directory.

One Ray for the whole module (it takes seconds to start); the tests share it and run in
file order (the node removal last)."""

from __future__ import annotations

import asyncio
import ipaddress
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

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed (pip install 'conduit-mcp[ray]')"
)
psutil = pytest.importorskip("psutil", reason="psutil lists the Ray processes' sockets")
from ray.cluster_utils import Cluster as RayTestCluster  # noqa: E402

import conduit_mcp as mcp  # noqa: E402
from conduit_mcp.cluster import protocol as p  # noqa: E402

pytestmark = pytest.mark.timeout(120)

SERVER = {"command": sys.executable, "args": ["-m", "conduit_mcp.testing"]}
NAMESPACE = "conduit_mcp_tests"
NODE = {
    "num_cpus": 1,
    "object_store_memory": 80 * 1024 * 1024,
    "node_ip_address": "127.0.0.1",
}


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
def rig() -> Iterator[Rig]:
    ray_cluster = RayTestCluster(
        initialize_head=True,
        head_node_args={
            **NODE,
            "include_dashboard": False,
            "_system_config": {
                "health_check_initial_delay_ms": 0,
                "health_check_period_ms": 500,
                "health_check_timeout_ms": 500,
                "health_check_failure_threshold": 3,
            },
        },
    )
    worker = ray_cluster.add_node(**NODE)
    ray.init(address=ray_cluster.address, namespace=NAMESPACE, log_to_driver=False)
    cluster = mcp.Cluster.start(
        mcp.RayEngine(namespace=NAMESPACE, max_restarts=3, caller_lease=2.0)
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


def test_a_reference_is_expanded_on_the_host_and_never_comes_back(rig: Rig) -> None:
    entry = {**SERVER, "env": {"SECRET_TOKEN": "${CLUSTER_T42_TOKEN}"}}
    with rig.cluster.hub("secrets", {"mcpServers": {"a": entry}}) as hub:
        hub.await_ready(timeout=30, servers="all")
        replies = [
            hub.call_tool("a.env", {"name": "SECRET_TOKEN"}),
            hub.call_tool("a.echo", {"text": PLANTED}),
        ]
        assert all(PLANTED not in repr(r.raw) for r in replies)
        assert "***" in repr(replies[0].raw)  # the server saw the value the host expanded
        with pytest.raises(mcp.Error) as caught:
            hub.call_tool("a.error", {"code": -32000, "message": PLANTED, "data": {"k": PLANTED}})
        assert PLANTED not in str(caught.value) and PLANTED not in repr(caught.value.data)
        assert PLANTED not in repr(hub.tools()) + repr(hub.status())
    for node in (rig.ray_cluster.head_node, rig.worker):
        session = Path(node.get_session_dir_path())
        for path in session.rglob("*"):
            if path.is_file() and not path.is_symlink():
                try:
                    assert PLANTED.encode() not in path.read_bytes(), path
                except OSError:  # a socket or a file gone meanwhile
                    pass


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


def test_a_killed_host_fails_its_calls_in_flight_and_comes_back(rig: Rig) -> None:
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
    hub.stop()


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


def test_the_cluster_pages_example_runs_against_this_ray(rig: Rig, tmp_path: Path) -> None:
    """docs/cluster.md's example, as written, in a fresh interpreter that finds this Ray
    through ``RAY_ADDRESS`` (attached: its ``cluster.stop()`` leaves this Ray running)."""
    page = Path(__file__).resolve().parents[2] / "docs" / "cluster.md"
    (block,) = _BLOCK.findall(page.read_text(encoding="utf-8"))
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
    assert done.stdout.splitlines()[-3:] == ["3", "git.echo", "conduit-acme-0 up 2"]
    assert ray.is_initialized() and len(ray.nodes()) >= 2


def test_a_removed_node_moves_its_hosts(rig: Rig) -> None:
    tenant = rig.tenant_on(rig.worker_id, "moving-")
    hub = rig.cluster.hub(tenant, {"mcpServers": {"a": SERVER}})
    hub.await_ready(timeout=30)
    assert rig.cluster.status().hosts[0].node == rig.worker_id
    removed = time.monotonic()
    rig.ray_cluster.remove_node(rig.worker, allow_graceful=False)
    deadline = removed + 40
    while rig.cluster.status().hosts[0].node != rig.head_id:  # each status asks the host
        if time.monotonic() > deadline:
            import faulthandler

            faulthandler.dump_traceback(all_threads=True)
        assert time.monotonic() < deadline, rig.cluster.status()
    moved_in = time.monotonic() - removed
    hub.await_ready(timeout=30)
    assert hub.call_tool("a.add", {"a": 2, "b": 3}).text == "5"
    (host,) = rig.cluster.status().hosts
    assert host.state == "up" and host.restarts == 1 and moved_in < 45, moved_in
    hub.stop()
