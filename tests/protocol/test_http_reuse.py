"""The rules for reusing HTTP connections (conduit_mcp/protocol/http_reuse.py), without
sockets: when a failed request may be sent again, and how long an idle one is kept; and how
the transport reads aiohttp's exceptions into those rules' terms (http_pool.failure_of)."""

from __future__ import annotations

import errno
import itertools

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey
from aiohttp.http_parser import RawResponseMessage
from multidict import CIMultiDict, CIMultiDictProxy

import conduit_mcp as mcp
from conduit_mcp.protocol.http_reuse import (
    DEFAULT_KEEP_ALIVE,
    MAX_RESENDS,
    MIN_IDLE,
    announced_timeout,
    idle_limit,
    may_resend,
)
from conduit_mcp.transports.http_pool import failure_of


def test_only_a_reused_connection_that_ended_before_any_answer_is_sent_again() -> None:
    allowed = []
    for reused, idle, answered, failure in itertools.product(
        (True, False),
        (None, 0.0, 0.49, 0.5, 75.0),
        (True, False),
        ("disconnected", "reset", "other"),
    ):
        if may_resend(reused=reused, idle=idle, answered=answered, failure=failure, resends=0):
            allowed.append((reused, idle, answered, failure))
    assert allowed == [
        (True, idle, False, failure)
        for idle in (0.5, 75.0)
        for failure in ("disconnected", "reset")
    ]
    assert MIN_IDLE == 0.5  # the edge above


def test_resends_are_bounded() -> None:
    ok = {"reused": True, "idle": 5.0, "answered": False, "failure": "reset"}
    assert may_resend(**ok, resends=MAX_RESENDS - 1)  # type: ignore[arg-type]
    assert not may_resend(**ok, resends=MAX_RESENDS)  # type: ignore[arg-type]
    assert not may_resend(**ok, resends=-1)  # type: ignore[arg-type]


def test_default_idle_limit_is_below_the_common_servers_5s() -> None:
    assert 0 < DEFAULT_KEEP_ALIVE < 5.0
    assert mcp.Http("http://127.0.0.1:1/mcp").keep_alive == DEFAULT_KEEP_ALIVE


@pytest.mark.parametrize(
    ("announced", "limit"),
    [(None, 4.0), (75.0, 4.0), (5.0, 4.0), (4.5, 3.5), (2.0, 1.0), (1.0, 0.5), (0.0, 0.0)],
)
def test_idle_limit_takes_the_shorter_with_a_margin(announced: float | None, limit: float) -> None:
    assert idle_limit(4.0, announced) == limit


@pytest.mark.parametrize(
    ("values", "seconds"),
    [
        (["timeout=5"], 5.0),
        (["timeout=5, max=100"], 5.0),
        (["max=100,timeout=1"], 1.0),
        (['timeout="3"'], 3.0),
        (["TIMEOUT = 2.5"], 2.5),
        (["timeout=7", "timeout=2"], 2.0),
        (["timeout=0"], 0.0),
        (["timeout=-1"], None),
        (["timeout=1e9"], None),
        (["timeout=nan", "timeout=inf", "timeout="], None),
        (["timeout=9999999999"], None),  # more than 9 digits: garbage, not a limit
        (["max=5"], None),
        ([""], None),
        ([], None),
    ],
)
def test_keep_alive_header_is_read_leniently(values: list[str], seconds: float | None) -> None:
    assert announced_timeout(values) == seconds


@pytest.mark.parametrize("bad", [0, -1, True, "4", float("nan"), float("inf")])
def test_keep_alive_option_is_checked(bad: object) -> None:
    with pytest.raises(mcp.Error) as info:
        mcp.Http("http://127.0.0.1:1/mcp", keep_alive=bad)  # type: ignore[arg-type]
    assert (info.value.kind, info.value.reason) == ("config", "http.keep_alive")


def test_keep_alive_option_edge_and_repr() -> None:
    spec = mcp.Http("http://127.0.0.1:1/mcp", keep_alive=0.001)
    assert spec.keep_alive == 0.001
    assert "keep_alive" not in repr(spec)


def _partial_head() -> RawResponseMessage:
    headers: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict())
    return RawResponseMessage(
        aiohttp.HttpVersion11, 200, "OK", headers, (), False, None, False, False
    )


def test_aiohttp_failures_are_read_as_the_rules_terms() -> None:
    key = ConnectionKey("127.0.0.1", 1, False, True, None, None, None)
    assert failure_of(aiohttp.ServerDisconnectedError()) == ("disconnected", False)
    # A part of the answer's head had arrived: the server had the request.
    assert failure_of(aiohttp.ServerDisconnectedError(_partial_head())) == (
        "disconnected",
        True,
    )
    for code in (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED):
        assert failure_of(aiohttp.ClientOSError(code, "reset")) == ("reset", False)
    assert failure_of(aiohttp.ClientOSError(errno.ETIMEDOUT, "timed out")) == ("other", False)
    # The body met a closing connection (aiohttp wraps its reset without an errno).
    body = aiohttp.ClientOSError(None, "Can not write request body")
    body.__cause__ = aiohttp.ClientConnectionResetError("Cannot write to closing transport")
    assert failure_of(body) == ("reset", False)
    assert failure_of(aiohttp.ClientConnectionResetError("closing")) == ("reset", False)
    other = aiohttp.ClientOSError(None, "Can not write request body")
    other.__cause__ = ValueError("no")
    assert failure_of(other) == ("other", False)
    assert failure_of(aiohttp.ClientOSError()) == ("other", False)
    refused = aiohttp.ClientConnectorError(key, ConnectionResetError(errno.ECONNRESET, "x"))
    assert failure_of(refused) == ("other", False)  # no connection was made: not a reuse
    assert failure_of(aiohttp.ClientPayloadError("cut")) == ("other", False)
    assert failure_of(TimeoutError()) == ("other", False)
