"""A process forked from one that already ran a client can run its own client (gunicorn
``--preload``, Celery's prefork pool, ``multiprocessing`` with the fork start method)."""

from __future__ import annotations

import multiprocessing
import sys
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import ScriptedServer

pytestmark = pytest.mark.timeout(60)


def _child(workdir: str, out: Any) -> None:
    try:
        server = ScriptedServer(workdir, era="both")
        with mcp.Client.start(server.stdio(), name="in-child", request_timeout=10) as client:
            status = client.await_ready(timeout=5)
            out.put((status.state, client.call_tool("add", {"a": 2, "b": 3}).text))
    except BaseException as exc:  # the parent reports it
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def _run_in_forked_child(workdir: str) -> tuple[str, str]:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_child, args=(workdir, out))
    proc.start()
    try:
        return out.get(timeout=30)
    finally:
        proc.join(timeout=10)
        if proc.is_alive():
            proc.kill()


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
@pytest.mark.parametrize("parent_has_a_client", [False, True])
def test_a_forked_child_connects(tmp_path, make_server, parent_has_a_client) -> None:
    parent = None
    if parent_has_a_client:
        # the same name as the child's: the child's directory of clients starts empty
        parent = mcp.Client.start(make_server().stdio(), name="in-child")
        assert parent.await_ready(timeout=5).state == "ready"
    try:
        assert _run_in_forked_child(str(tmp_path / "child")) == ("ready", "5")
        if parent is not None:  # the parent's client is unharmed
            assert parent.call_tool("add", {"a": 1, "b": 1}).text == "2"
    finally:
        if parent is not None:
            parent.stop()


def _child_registry(out: Any) -> None:
    import pykka

    out.put(len(pykka.ActorRegistry.get_all()))


def test_a_forked_child_forgets_the_parents_actors(make_server) -> None:
    with mcp.Client.start(make_server().stdio()) as parent:
        parent.await_ready(timeout=5)
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        proc = ctx.Process(target=_child_registry, args=(out,))
        proc.start()
        try:
            assert out.get(timeout=20) == 0
        finally:
            proc.join(timeout=10)
