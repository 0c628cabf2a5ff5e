"""A task survives what a long call cannot (docs/tasks.md, "Surviving the connection" and
"Surviving a restart"): an HTTP connection cut mid-poll (the server restarted on its port
with its durable task state), a crashed connection actor, and a client process killed with
SIGKILL and started again with the same SQLite task store. Task ids never reach a repr, a
log record or an error text."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import ScriptedServer

pytestmark = pytest.mark.timeout(60)

JOB = {"seconds": 1.0, "poll_ms": 100, "text": "survived"}


def first_get(server: ScriptedServer) -> None:
    server.wait_for(lambda e: e.get("method") == "tasks/get", timeout=10)


def test_an_http_connection_cut_mid_poll(
    make_server: Callable[..., Any], tmp_path: Path, start_client: Callable[..., mcp.Client]
) -> None:
    server = make_server(era="modern", durable=tmp_path / "tasks.json")
    proc = server.http_server()
    try:
        # reconnects for as long as the restart takes
        client = start_client(mcp.Http(proc.url), backoff=lambda a: 0.1, max_reconnects=200)
        client.await_ready(timeout=20)
        handle = client.start_task("task_job", JOB)
        first_get(server)
        proc.kill()  # every connection cut; the task state stays in its file
        proc.restart()
        assert handle.result(timeout=20).text == "survived"
        assert client.status().state == "ready"
    finally:
        proc.kill()


def test_a_connection_actor_crash_mid_poll(
    crashable: Callable[[], Any],
    serve_http: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
) -> None:
    server, proc = serve_http(era="modern")
    client = start_client(mcp.Http(proc.url))
    client.await_ready(timeout=20)
    result: list[Any] = []
    caller = threading.Thread(
        target=lambda: result.append(client.call_tool("task_job", JOB, timeout=20))
    )
    caller.start()
    first_get(server)
    runtime = client._runtime()
    old = runtime.registry.get("connection")
    old.tell(crashable())
    caller.join(timeout=20)
    assert runtime.registry.get("connection") is not old  # it did crash and come back
    assert result and result[0].text == "survived"  # call_tool stayed pending, then ended


CHILD = textwrap.dedent(
    """
    import sys, time
    import conduit_mcp as mcp
    url, db, mode = sys.argv[1:4]
    client = mcp.Client.start(mcp.Http(url), task_store=mcp.SqliteTaskStore(db))
    client.await_ready(timeout=20)
    if mode == "start":
        handle = client.start_task("task_job", {"seconds": 1.5, "poll_ms": 100, "text": "kept"})
        print("started", flush=True)
        time.sleep(60)
    else:
        records = client.tasks.unfinished()
        print(len(records), records[0]["tool"], records[0]["status"], flush=True)
        print(client.tasks.resume(records[0]).result(timeout=20).text, flush=True)
        print(len(client.tasks.unfinished()), flush=True)
        client.stop()
    """
)


def test_a_process_killed_with_sigkill_resumes_from_the_sqlite_store(
    serve_http: Callable[..., Any], tmp_path: Path
) -> None:
    server, proc = serve_http(era="modern")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    db = tmp_path / "store" / "tasks.db"
    env = {**os.environ, **server.env()}
    first = subprocess.Popen(
        [sys.executable, str(script), proc.url, str(db), "start"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert first.stdout is not None
    assert first.stdout.readline().strip() == "started"
    first_get(server)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert oct(db.stat().st_mode & 0o777) == "0o600"
    assert oct(db.parent.stat().st_mode & 0o777) == "0o700"
    second = subprocess.run(
        [sys.executable, str(script), proc.url, str(db), "resume"],
        capture_output=True,
        text=True,
        env=env,
        timeout=40,
        check=False,
    )
    assert second.returncode == 0, second.stderr
    lines = second.stdout.splitlines()
    assert lines[0] == "1 task_job working"
    assert lines[1] == "kept"
    assert lines[2] == "0"  # ended: no longer in the store


def test_task_ids_never_in_a_repr_a_log_or_an_error(
    serve_http: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    caplog.set_level(logging.DEBUG, logger="conduit_mcp")
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    _server, proc = serve_http(era="modern")
    client = start_client(
        mcp.Http(proc.url), backoff=lambda a: 0.1, max_reconnects=200, tracer_provider=tracing
    )
    client.await_ready(timeout=20)
    seen: list[str] = []
    handle = client.start_task("task_job", {"seconds": 30, "poll_ms": 50})
    task_id = handle.record["task_id"]
    seen += [repr(handle), str(handle), repr(client.tasks), repr(client)]
    failed = client.start_task("task_job", {"seconds": 0.1, "poll_ms": 50, "outcome": "failed"})
    failed_id = failed.record["task_id"]
    with pytest.raises(mcp.Error) as err:
        failed.result(timeout=10)
    seen += [str(err.value), repr(err.value), err.value.message]
    proc.kill()  # the task is lost with the server
    proc.restart()
    with pytest.raises(mcp.Error) as lost:
        handle.result(timeout=20)
    assert lost.value.reason == "task_lost"
    seen += [str(lost.value), repr(lost.value), repr(handle)]
    spans = exporter.get_finished_spans()
    assert any(span.name == "tools/call task_job" for span in spans)
    seen += [span.to_json() for span in spans]
    text = "\n".join(seen) + "\n" + caplog.text
    assert task_id and failed_id
    assert task_id not in text and failed_id not in text
