"""Telemetry of a client over streamable HTTP: the span names the server's address and port,
and no credential, session id or header value reaches a span or a metric attribute."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind

pytestmark = pytest.mark.timeout(30)

SECRET = "tok-5ecret-ab12cd"


def _everything(otel) -> str:
    text = []
    for span in otel.spans():
        text.append(
            repr(
                (
                    span.name,
                    dict(span.attributes),
                    span.status.description,
                    [(e.name, dict(e.attributes)) for e in span.events],
                )
            )
        )
    for name in otel.metrics():
        text.extend(repr(p.attributes) for p in otel.points(name))
    return "\n".join(text)


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_http_span_names_server_and_never_credentials(make_server, start_client, otel, era):
    server = make_server()
    with server.http_server(require_bearer=SECRET) as srv:
        client = start_client(srv.spec(bearer=SECRET, headers={"X-Api-Key": SECRET}), protocol=era)
        assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
        span = otel.span("tools/call add")
        assert span.kind is SpanKind.CLIENT
        attrs = dict(span.attributes)
        assert attrs["network.transport"] == "tcp"
        assert (attrs["server.address"], attrs["server.port"]) == ("127.0.0.1", srv.port)
        session = [e for e in server.events("http") if e.get("session")]
        client.stop()
    assert (len(session) > 0) == (era == "legacy")
    captured = _everything(otel)
    assert SECRET not in captured
    for event in session:
        assert event["session"] not in captured
