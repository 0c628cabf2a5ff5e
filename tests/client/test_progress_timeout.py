"""Progress that keeps a call alive (docs/connecting.md, "Progress that keeps a call alive"), through the public API
against the scripted server over stdio and Streamable HTTP, in both eras.

``reset_timeout_on_progress=True`` restarts a call's ``timeout`` on each progress report:
a call that runs past its timeout but reports within every one of them completes; one that
falls silent fails ``timeout``/``deadline`` a ``timeout`` after its last report (the server
asked to cancel); ``max_total_timeout`` ends it whatever it reports. The timings have wide
margins (a report every 0.15 s against a 0.6 s timeout) so a loaded machine cannot flake them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pykka
import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 0.6
#: Reports every 0.15 s for 1.35 s: more than twice the timeout in all.
STEADY = {"steps": 9, "delay": 0.15}
FAST = {"request_timeout": 5.0, "backoff_base": 0.05, "backoff_max": 0.2}
COMBOS = [
    pytest.param("stdio", "legacy", id="stdio-legacy"),
    pytest.param("stdio", "modern", id="stdio-modern"),
    pytest.param("http", "legacy", id="http-legacy"),
    pytest.param("http", "modern", id="http-modern"),
]


@pytest.fixture
def connect(make_server, serve_http, start_client):
    """``connect(transport, era, **options)``: a ready client and its scripted server."""

    def start(transport: str, era: str, **options: Any) -> tuple[mcp.Client, Any]:
        if transport == "stdio":
            server = make_server(era=era)
            spec = server.stdio()
        else:
            server, proc = serve_http(era=era)
            spec = proc.spec()
        client = start_client(spec, **{**FAST, **options})
        assert client.await_ready(timeout=10).era == era
        return client, server

    return start


class Heard:
    """An ``on_progress`` that notes when the last report ran (the caller's thread)."""

    def __init__(self) -> None:
        self.count = 0
        self.last = 0.0

    def __call__(self, progress: mcp.Progress) -> None:
        self.count += 1
        self.last = time.monotonic()


def cancelled(server: Any, transport: str, era: str) -> str:
    """Why the server heard the last call was cancelled: ``timeout``, or over modern HTTP,
    where cancelling is closing the call's stream, that close."""
    call_id = server.received("tools/call")[-1]["id"]
    entry = server.wait_for(
        lambda e: (
            e.get("method") == "notifications/cancelled" and e["params"]["requestId"] == call_id
        ),
        timeout=5,
    )
    reason: str = entry["params"]["reason"]
    if (transport, era) == ("http", "modern"):
        assert reason == "client closed the response stream"
        return "timeout"
    return reason


@pytest.mark.parametrize(("transport", "era"), COMBOS)
def test_a_call_that_reports_progress_outlives_its_timeout(connect, transport, era):
    client, _ = connect(transport, era)
    heard = Heard()
    started = time.monotonic()
    result = client.call_tool(
        "progress", STEADY, timeout=TIMEOUT, reset_timeout_on_progress=True, on_progress=heard
    )
    elapsed = time.monotonic() - started
    assert result.text == "done 9 steps"
    assert heard.count == 9
    assert elapsed > 2 * TIMEOUT  # it ran past its timeout, twice over


@pytest.mark.parametrize(("transport", "era"), COMBOS)
def test_a_call_that_falls_silent_ends_a_timeout_after_its_last_report(connect, transport, era):
    client, server = connect(transport, era)
    heard = Heard()
    with pytest.raises(mcp.Error) as err:
        client.call_tool(
            "progress",
            {"steps": 4, "delay": 0.15, "silence": 20},
            timeout=TIMEOUT,
            reset_timeout_on_progress=True,
            on_progress=heard,
        )
    after_last = time.monotonic() - heard.last
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    assert heard.count == 4
    assert TIMEOUT - 0.1 <= after_last < TIMEOUT + 0.6
    assert cancelled(server, transport, era) == "timeout"


@pytest.mark.parametrize(
    ("transport", "era"),
    [
        pytest.param("stdio", "legacy", id="stdio-legacy"),
        pytest.param("http", "modern", id="http-modern"),
    ],
)
def test_max_total_timeout_ends_a_call_whatever_it_reports(connect, transport, era):
    client, server = connect(transport, era)
    heard = Heard()
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool(
            "progress",
            {"steps": 100, "delay": 0.15},
            timeout=TIMEOUT,
            max_total_timeout=1.5,
            reset_timeout_on_progress=True,
            on_progress=heard,
        )
    elapsed = time.monotonic() - started
    assert (err.value.kind, err.value.reason) == ("timeout", "max_total_timeout")
    assert "max_total_timeout" in err.value.message
    assert 1.4 <= elapsed < 2.5
    assert heard.count >= 5  # it kept reporting to the end
    assert cancelled(server, transport, era) == "timeout"


def test_without_reset_the_same_call_is_cut_off_at_its_timeout(connect):
    """The control: progress alone does not keep a call alive (the default)."""
    client, _ = connect("stdio", "legacy")
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("progress", STEADY, timeout=TIMEOUT, on_progress=Heard())
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    assert time.monotonic() - started < TIMEOUT + 0.6


def test_the_client_option_asks_for_progress_without_a_callback(connect):
    client, server = connect("stdio", "modern", reset_timeout_on_progress=True)
    assert client.call_tool("progress", STEADY, timeout=TIMEOUT).text == "done 9 steps"
    meta = server.received("tools/call")[-1]["params"]["_meta"]
    assert "progressToken" in meta  # asked for, though no on_progress was given
    # The per-call keyword overrides the option: off, the call is cut off again.
    with pytest.raises(mcp.Error) as err:
        client.call_tool("progress", STEADY, timeout=TIMEOUT, reset_timeout_on_progress=False)
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    assert "progressToken" not in server.received("tools/call")[-1]["params"].get("_meta", {})
    # Only the calls with the keyword follow the option: a list page asks for no progress.
    client.list_tools()
    listed = server.received("tools/list")[-1].get("params") or {}
    assert "progressToken" not in listed.get("_meta", {})


def test_a_raw_request_keeps_alive_too(connect):
    client, _ = connect("http", "legacy")
    result = client.request(
        "tools/call",
        {"name": "progress", "arguments": STEADY},
        timeout=TIMEOUT,
        reset_timeout_on_progress=True,
    )
    assert result["content"][0]["text"] == "done 9 steps"


def test_a_bad_keyword_is_an_argument_error(connect):
    client, server = connect("stdio", "legacy")
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 2}, reset_timeout_on_progress="yes")  # type: ignore[arg-type]
    assert (err.value.kind, err.value.reason) == ("argument", "reset_timeout_on_progress")
    assert server.received("tools/call") == []  # nothing was sent


def test_asyncio_keeps_alive_and_ends_on_silence(connect):
    client, server = connect("http", "modern")

    async def run() -> tuple[str, mcp.Error, float]:
        done = await client.aio.call_tool(
            "progress", STEADY, timeout=TIMEOUT, reset_timeout_on_progress=True
        )
        last = [0.0]

        def note(progress: mcp.Progress) -> None:
            last[0] = time.monotonic()

        try:
            await client.aio.call_tool(
                "progress",
                {"steps": 3, "delay": 0.15, "silence": 20},
                timeout=TIMEOUT,
                reset_timeout_on_progress=True,
                on_progress=note,
            )
        except mcp.Error as exc:
            return done.text, exc, time.monotonic() - last[0]
        raise AssertionError("the silent call completed")

    text, exc, after_last = asyncio.run(run())
    assert text == "done 9 steps"
    assert (exc.kind, exc.reason) == ("timeout", "deadline")
    assert TIMEOUT - 0.1 <= after_last < TIMEOUT + 0.6
    assert cancelled(server, "http", "modern") == "timeout"


def test_futures_keep_alive_and_end_on_silence(connect):
    client, _ = connect("stdio", "modern")
    done = client.futures.call_tool(
        "progress", STEADY, timeout=TIMEOUT, reset_timeout_on_progress=True
    )
    assert done.get(timeout=10).text == "done 9 steps"

    class Listener(pykka.ThreadingActor):
        def __init__(self) -> None:
            super().__init__()
            self.last = 0.0
            self.seen = threading.Event()

        def on_receive(self, message: Any) -> Any:
            self.last = time.monotonic()
            self.seen.set()

    listener = Listener.start()
    try:
        silent = client.futures.call_tool(
            "progress",
            {"steps": 3, "delay": 0.15, "silence": 20},
            timeout=TIMEOUT,
            reset_timeout_on_progress=True,
            on_progress=listener,
        )
        with pytest.raises(mcp.Error) as err:
            silent.get(timeout=10)
        failed_at = time.monotonic()
        last = listener.proxy().last.get(timeout=5)
    finally:
        listener.stop()
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    assert TIMEOUT - 0.1 <= failed_at - last < TIMEOUT + 0.6
