"""Server logs through the public API (docs/telemetry.md, "Server logs"):
``set_logging_level`` on the three front ends, in both eras, and ``notifications/message`` to
Python logging on ``conduit_mcp.server.<client name>`` and to a handler's ``handle_log``,
never from the connection's thread."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(60)

META_LEVEL = "io.modelcontextprotocol/logLevel"
PY_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class Logs(mcp.Handler):
    def __init__(self) -> None:
        self.seen: queue.Queue[tuple[str, Any, str | None, str]] = queue.Queue()

    def handle_log(self, level: str, data: Any, logger: str | None, ctx: Any) -> None:
        self.seen.put((level, data, logger, threading.current_thread().name))


def connection_threads() -> set[str]:
    """The threads the connection runs on: the shared actor pool's (otp/pooled.py), which
    serves only library actors that never run user code."""
    return {t.name for t in threading.enumerate() if t.name.startswith("conduit-mcp-actor-")}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_server_log_reaches_python_logging_and_handle_log_off_the_connection(
    make_server: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
    era: str,
) -> None:
    records = capture(f"conduit_mcp.server.logs-{era}")
    handler = Logs()
    client = start_client(make_server().stdio(), protocol=era, name=f"logs-{era}", handler=handler)
    client.await_ready(10)
    assert client.set_logging_level("warning") is None
    result = client.call_tool("log", {"level": "error", "data": "disk full", "logger": "db"})
    assert result.text == "logged"
    record = records.next()
    assert (record.name, record.levelno, record.getMessage()) == (
        f"conduit_mcp.server.logs-{era}",
        logging.ERROR,
        "db: disk full",
    )
    assert (record.mcp_client, record.mcp_level, record.mcp_logger, record.mcp_data) == (  # type: ignore[attr-defined]
        f"logs-{era}",
        "error",
        "db",
        "disk full",
    )
    level, data, logger, thread = handler.seen.get(timeout=10)
    assert (level, data, logger) == ("error", "disk full", "db")
    # Neither the logging handler nor handle_log ran on the connection's thread.
    conn = connection_threads()
    assert conn and thread not in conn and not (records.threads & conn)
    # Below the level set: the server sends nothing.
    assert client.call_tool("log", {"level": "info", "data": "quiet"}).text == "suppressed"


def test_every_level_maps_to_its_python_level(
    make_server: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
) -> None:
    records = capture("conduit_mcp.server.levels")
    client = start_client(make_server().stdio(), protocol="legacy", name="levels")
    client.set_logging_level("debug")
    for level in PY_LEVELS:
        client.call_tool("log", {"level": level, "data": level})
    got = [records.next() for _ in PY_LEVELS]
    assert [(r.mcp_level, r.levelno) for r in got] == list(PY_LEVELS.items())  # type: ignore[attr-defined]
    # Python has no notice, alert or emergency: the text says which it was.
    assert [r.getMessage() for r in got] == [
        "scripted: debug",
        "scripted: info",
        "[notice] scripted: notice",
        "scripted: warning",
        "scripted: error",
        "scripted: critical",
        "[alert] scripted: alert",
        "[emergency] scripted: emergency",
    ]


@pytest.mark.parametrize("level", ["WARN", "fatal", "", 3, None, ["info"]])
def test_an_unknown_level_is_an_argument_error_and_nothing_is_sent(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client], level: Any
) -> None:
    server = make_server()
    client = start_client(server.stdio(), protocol="legacy")
    client.await_ready(10)
    with pytest.raises(mcp.Error) as info:
        client.set_logging_level(level)
    assert (info.value.kind, info.value.reason) == ("argument", "level")
    assert "debug, info, notice, warning, error, critical, alert, emergency" in str(info.value)
    client.call_tool("add", {"a": 1, "b": 2})
    assert server.received("logging/setLevel") == []


def test_a_legacy_server_without_the_logging_capability_is_refused(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]
) -> None:
    server = make_server(extra_args=["--no-logging"])
    client = start_client(server.stdio(), protocol="legacy")
    assert client.await_ready(10).era == "legacy"
    with pytest.raises(mcp.Error) as info:
        client.set_logging_level("info")
    assert (info.value.kind, info.value.reason) == ("unavailable", "not_supported")
    assert "logging capability" in str(info.value)
    client.call_tool("add", {"a": 1, "b": 2})
    assert server.received("logging/setLevel") == []
    [call] = server.received("tools/call")
    assert META_LEVEL not in ((call["params"] or {}).get("_meta") or {})


def test_a_modern_server_without_the_capability_still_gets_the_level(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]
) -> None:
    """Modern, the level is only a ``_meta`` field, and servers that log without declaring
    ``logging`` are common (the official SDK's): it is never refused there."""
    server = make_server(era="modern", extra_args=["--no-logging"])
    client = start_client(server.stdio(), protocol="modern")
    client.set_logging_level("info")
    client.call_tool("add", {"a": 1, "b": 2})
    [call] = server.received("tools/call")
    assert call["params"]["_meta"][META_LEVEL] == "info"


def test_modern_requests_carry_the_level_once_set_and_a_calls_own_wins(
    make_server: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
) -> None:
    records = capture("conduit_mcp.server.modern-meta")
    server = make_server(era="modern")
    client = start_client(server.stdio(), protocol="modern", name="modern-meta")
    assert client.call_tool("log", {"level": "emergency"}).text == "suppressed"
    client.set_logging_level("notice")
    assert server.received("logging/setLevel") == []  # the era has none: answered locally
    assert client.call_tool("log", {"level": "notice", "data": "n"}).text == "logged"
    assert client.call_tool("log", {"level": "info"}).text == "suppressed"
    client.list_tools()
    client.call_tool("log", {"level": "debug", "data": "own"}, meta={META_LEVEL: "debug"})
    calls = server.received("tools/call")
    levels = [c["params"]["_meta"].get(META_LEVEL) for c in calls]
    assert levels == [None, "notice", "notice", "debug"]
    # the first call's schema check listed before the level was set; this listing is after
    listed = server.received("tools/list")
    assert listed[0]["params"].get("_meta", {}).get(META_LEVEL) is None
    assert listed[-1]["params"]["_meta"][META_LEVEL] == "notice"
    assert [records.next().getMessage() for _ in range(2)] == [
        "[notice] scripted: n",
        "scripted: own",
    ]


def test_legacy_level_is_set_again_on_every_new_session(
    make_server: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
) -> None:
    records = capture("conduit_mcp.server.again")
    server = make_server()
    client = start_client(server.stdio(), protocol="legacy", name="again")
    client.set_logging_level("error")
    with pytest.raises(mcp.Error):
        client.call_tool("crash", {}, timeout=10)
    server.wait_for("initialize", count=2, timeout=10)
    client.await_ready(10)
    sent = server.wait_for("logging/setLevel", count=2, timeout=10)
    assert sent["params"] == {"level": "error"} and sent["pid"] == server.pids()[1]
    # The new process logs at the level set before the crash, not its default (debug).
    assert client.call_tool("log", {"level": "warning"}).text == "suppressed"
    assert client.call_tool("log", {"level": "error", "data": "back"}).text == "logged"
    assert records.next().getMessage() == "scripted: back"


def test_a_level_set_before_ready_waits_for_the_handshake(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]
) -> None:
    server = make_server(extra_args=["--startup-delay", "0.3"])
    client = start_client(server.stdio(), protocol="legacy")
    client.set_logging_level("critical", timeout=10)
    assert server.received("logging/setLevel")[0]["params"] == {"level": "critical"}


def test_the_asyncio_and_futures_front_ends(
    make_server: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
) -> None:
    records = capture("conduit_mcp.server.fronts")
    server = make_server()
    client = start_client(server.stdio(), protocol="legacy", name="fronts")

    async def main() -> None:
        await client.aio.set_logging_level("info")
        with pytest.raises(mcp.Error) as info:
            await client.aio.set_logging_level("verbose")
        assert info.value.reason == "level"
        await client.aio.call_tool("log", {"level": "info", "data": "from aio"})

    asyncio.run(main())
    assert records.next().getMessage() == "scripted: from aio"
    assert client.futures.set_logging_level("error").get(timeout=10) is None
    with pytest.raises(mcp.Error) as info:
        client.futures.set_logging_level(7)
    assert info.value.reason == "level"
    assert [r["params"]["level"] for r in server.received("logging/setLevel")] == [
        "info",
        "error",
    ]


def test_nothing_is_logged_when_the_logger_is_off(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]
) -> None:
    """A disabled level costs no record (and a record is never made from the server's
    data just to be dropped); enabling it later takes effect at once."""
    lg = logging.getLogger("conduit_mcp.server.off")
    records: list[logging.LogRecord] = []
    got = threading.Event()

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)
            got.set()

    keep = Keep()
    lg.addHandler(keep)
    lg.setLevel(logging.CRITICAL)
    try:
        client = start_client(make_server().stdio(), protocol="legacy", name="off")
        client.set_logging_level("debug")
        client.call_tool("log", {"level": "error", "data": "dropped"})
        client.call_tool("log", {"level": "critical", "data": "kept"})
        # Messages are logged in arrival order: had the first been, it would be first.
        assert got.wait(10)
        assert [r.getMessage() for r in records] == ["scripted: kept"]
        got.clear()
        lg.setLevel(logging.DEBUG)
        client.call_tool("log", {"level": "debug", "data": "later"})
        assert got.wait(10)
        assert [r.getMessage() for r in records] == ["scripted: kept", "scripted: later"]
    finally:
        lg.removeHandler(keep)
        lg.setLevel(logging.NOTSET)


def test_raw_requests_of_setlevel_are_kept_too(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]
) -> None:
    server = make_server(era="modern")
    client = start_client(server.stdio(), protocol="modern")
    assert client.request("logging/setLevel", {"level": "warning"}) == {}
    client.call_tool("add", {"a": 1, "b": 2})
    [call] = server.received("tools/call")
    assert call["params"]["_meta"][META_LEVEL] == "warning"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_over_streamable_http(
    make_server: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
    era: str,
) -> None:
    """Over HTTP a log message arrives on the call's own response stream (modern) or the
    session's (legacy): the same record, the same handler call."""
    records = capture(f"conduit_mcp.server.http-{era}")
    handler = Logs()
    proc = make_server(era=era).http_server()
    try:
        client = start_client(proc.spec(), protocol=era, name=f"http-{era}", handler=handler)
        assert client.await_ready(10).era == era
        client.set_logging_level("debug")
        assert client.call_tool("log", {"level": "critical", "data": {"n": 1}}).text == "logged"
        record = records.next()
        assert (record.levelno, record.getMessage()) == (
            logging.CRITICAL,
            'scripted: {"n":1}',
        )
        level, data, logger, _ = handler.seen.get(timeout=10)
        assert (level, data, logger) == ("critical", {"n": 1}, "scripted")
        client.stop()
    finally:
        proc.kill()


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_log_level_option_asks_from_the_start(
    make_server: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
    era: str,
) -> None:
    records = capture(f"conduit_mcp.server.option-{era}")
    server = make_server(era=era)
    client = start_client(server.stdio(), protocol=era, name=f"option-{era}", log_level="error")
    assert client.call_tool("log", {"level": "warning"}).text == "suppressed"
    assert client.call_tool("log", {"level": "error", "data": "first"}).text == "logged"
    assert records.next().getMessage() == "scripted: first"
    if era == "legacy":
        [sent] = server.received("logging/setLevel")
        assert sent["params"] == {"level": "error"}
    else:
        calls = server.received("tools/call")
        assert [c["params"]["_meta"][META_LEVEL] for c in calls] == ["error", "error"]
    client.set_logging_level("debug")  # replaces it
    assert client.call_tool("log", {"level": "debug", "data": "d"}).text == "logged"


def test_the_log_level_option_is_checked(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]
) -> None:
    for bad in ("WARN", 10, ""):
        with pytest.raises(mcp.Error) as info:
            start_client(make_server().stdio(), log_level=bad)
        assert (info.value.kind, info.value.reason) == ("config", "log_level")


def test_the_log_level_option_skips_a_legacy_server_without_logging(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]
) -> None:
    server = make_server(extra_args=["--no-logging"])
    client = start_client(server.stdio(), protocol="legacy", log_level="info")
    assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
    assert server.received("logging/setLevel") == []
