"""What a hostile server can put in a log message (docs/telemetry.md, "Server logs"): it
never forges a record, names a logger, breaks a line, injects a format, or makes a record
unbounded; a flood of log messages is bounded like every notification."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.protocol.server_logs import MAX_LOGGER, MAX_TEXT

pytestmark = pytest.mark.timeout(60)

FORGED = "ok\n2026-12-02 00:00:00 CRITICAL root: forged\r\x1b[2K\x1b[31mred\u2028\u202eevil\x00"


def send(client: mcp.Client, params: Any, count: int = 1) -> None:
    """Have the scripted server send ``notifications/message`` with exactly these params."""
    client.call_tool(
        "notify", {"method": "notifications/message", "params": params, "count": count}
    )


@pytest.fixture
def hostile(make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]) -> mcp.Client:
    client = start_client(make_server().stdio(), protocol="legacy", name="hostile")
    client.await_ready(10)
    return client


def test_control_characters_and_forged_lines_stay_on_one_escaped_line(
    hostile: mcp.Client, capture: Callable[[str], Any]
) -> None:
    records = capture("conduit_mcp.server.hostile")
    stream = io.StringIO()
    out = logging.StreamHandler(stream)
    out.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    logging.getLogger("conduit_mcp.server.hostile").addHandler(out)
    try:
        send(hostile, {"level": "info", "logger": "db\nCRITICAL root: x", "data": FORGED})
        record = records.next()
    finally:
        logging.getLogger("conduit_mcp.server.hostile").removeHandler(out)
    text = record.getMessage()
    assert text == (
        "db\\nCRITICAL root: x: ok\\n2026-12-02 00:00:00 CRITICAL root: forged\\r\\x1b[2K"
        "\\x1b[31mred\\u2028\\u202eevil\\x00"
    )
    assert stream.getvalue().count("\n") == 1  # one record, one line
    assert record.mcp_logger == "db\\nCRITICAL root: x"  # type: ignore[attr-defined]
    # The raw value is kept, for a handler that encodes it itself.
    assert record.mcp_data == FORGED  # type: ignore[attr-defined]


def test_percent_formats_in_the_data_are_only_text(
    hostile: mcp.Client, capture: Callable[[str], Any]
) -> None:
    records = capture("conduit_mcp.server.hostile")
    send(hostile, {"level": "warning", "data": "%s %d %(secret)s %%"})
    record = records.next()
    assert record.msg == "%s" and record.getMessage() == "%s %d %(secret)s %%"
    send(hostile, {"level": "warning", "data": {"%(x)s": ["%s", 1, None, True]}})
    assert records.next().getMessage() == '{"%(x)s":["%s",1,null,true]}'


def test_the_server_never_chooses_the_python_logger(
    hostile: mcp.Client, capture: Callable[[str], Any]
) -> None:
    ours = capture("conduit_mcp.server.hostile")
    theirs = [capture(name) for name in ("conduit_mcp.connection", "conduit_mcp", "root.x")]
    before = set(logging.Logger.manager.loggerDict)
    for name in ("conduit_mcp.connection", "root", "", "..", "a" * 10_000):
        send(hostile, {"level": "error", "logger": name, "data": "x"})
    got = [ours.next() for _ in range(5)]
    assert {r.name for r in got} == {"conduit_mcp.server.hostile"}
    assert all(t.queue.empty() for t in theirs[:1])
    # Only our own records reached the parents (propagated from the client's logger).
    assert all(r.name == "conduit_mcp.server.hostile" for r in list(theirs[1].queue.queue))
    # No logger was made for a server's name (logging would keep each one forever).
    assert set(logging.Logger.manager.loggerDict) - before == set()
    long = got[-1]
    assert long.mcp_logger == "a" * MAX_LOGGER + "... (cut: 10000 characters in all)"  # type: ignore[attr-defined]


def test_huge_data_is_cut_at_the_limit(hostile: mcp.Client, capture: Callable[[str], Any]) -> None:
    records = capture("conduit_mcp.server.hostile")
    send(hostile, {"level": "error", "data": "x" * MAX_TEXT})
    send(hostile, {"level": "error", "data": "y" * (MAX_TEXT + 1)})
    send(hostile, {"level": "error", "data": ["z" * 100] * 1000})
    exact, over, nested = (records.next().getMessage() for _ in range(3))
    assert exact == "x" * MAX_TEXT
    assert over == "y" * MAX_TEXT + f"... (cut: {MAX_TEXT + 1} characters in all)"
    assert nested.startswith('["zzz') and nested.endswith(" characters in all)")
    assert len(nested) < MAX_TEXT + 40


@pytest.mark.parametrize(
    ("params", "levelno", "text"),
    [
        ({"level": "fatal", "data": "x"}, logging.WARNING, "[fatal] x"),
        (
            {"level": "x\n" * 40, "data": "d"},
            logging.WARNING,
            "[" + "x\\n" * 10 + "x\\... (cut: 80 characters in all)] d",
        ),
        ({"level": 50, "data": "x"}, logging.WARNING, "[?] x"),
        ({"data": "no level"}, logging.WARNING, "[?] no level"),
        ({"level": "error", "logger": 7, "data": None}, logging.ERROR, ""),
        ({"level": "info", "logger": "l", "data": 3.5}, logging.INFO, "l: 3.5"),
    ],
)
def test_broken_params_still_make_one_bounded_record(
    hostile: mcp.Client,
    capture: Callable[[str], Any],
    params: dict[str, Any],
    levelno: int,
    text: str,
) -> None:
    records = capture("conduit_mcp.server.hostile")
    send(hostile, params)
    record = records.next()
    assert record.levelno == levelno
    assert record.getMessage().startswith(text)
    assert "\n" not in record.getMessage()
    assert hostile.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}


def test_a_logging_handler_that_raises_breaks_nothing(
    hostile: mcp.Client, capture: Callable[[str], Any]
) -> None:
    class Boom(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            raise RuntimeError("handler down")

        def handleError(self, record: logging.LogRecord) -> None:
            raise RuntimeError("and its error handler too")

    records = capture("conduit_mcp.server.hostile")  # before Boom: it sees every record
    lg = logging.getLogger("conduit_mcp.server.hostile")
    boom = Boom()
    lg.addHandler(boom)
    try:
        send(hostile, {"level": "error", "data": "first"})
        send(hostile, {"level": "error", "data": "second"})
        assert records.next().getMessage() == "first"
        assert records.next().getMessage() == "second"
    finally:
        lg.removeHandler(boom)
    assert hostile.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}


def test_a_log_flood_into_a_slow_handler_is_bounded_and_stops_with_the_client(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client]
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    seen: list[str] = []
    threads: set[threading.Thread] = set()
    first = threading.Event()

    class Slow(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())
            threads.add(threading.current_thread())
            first.set()
            time.sleep(0.001)  # a slow handler (its own work, not a wait for an event)

    lg = logging.getLogger("conduit_mcp.server.flooded")
    slow = Slow()
    lg.addHandler(slow)
    lg.setLevel(logging.INFO)
    try:
        server = make_server(extra_args=["--flood-tools"])
        client = start_client(
            server.stdio(),
            protocol="legacy",
            name="flooded",
            meter_provider=provider,
            max_subscriber_backlog=100,
        )
        flood = 50_000
        client.call_tool("flood", {"what": "notification", "count": flood}, timeout=30)
        assert first.wait(10)
        assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
        client.stop()
        count = len(seen)
        assert threads and not [t for t in threads if t.is_alive()]
        assert len(seen) == count  # nothing logged after stop() returned
        dropped = _dropped(reader)
        assert count + dropped >= flood * 0.99
        assert count < flood // 2
    finally:
        lg.removeHandler(slow)
        lg.setLevel(logging.NOTSET)
        provider.shutdown()


def _dropped(reader: Any) -> int:
    data = reader.get_metrics_data()
    total = 0
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == "mcp.client.dropped":
                    for point in metric.data.data_points:
                        if point.attributes.get("kind") in ("notification", "inbound"):
                            total += point.value
    return total
