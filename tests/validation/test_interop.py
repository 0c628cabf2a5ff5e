"""Output and argument checks against the official ``mcp`` 2.3.0 servers (``schema_peer.py``
beside this file): the schemas its ``MCPServer`` derives from return types (``$defs`` and local
``$ref``), and a low-level ``Server`` whose tools break their own declared schemas. Both eras.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import conduit_mcp as mcp

pytestmark = [pytest.mark.timeout(90), pytest.mark.interop]

PEER = str(Path(__file__).with_name("schema_peer.py"))
ERAS = ["modern", "legacy"]


def peer(which: str) -> mcp.Stdio:
    return mcp.Stdio(sys.executable, [PEER, which])


@pytest.mark.parametrize("protocol", ERAS)
def test_schemas_derived_by_the_official_server_check_its_results(start_client, protocol):
    client = start_client(peer("mcpserver"), protocol=protocol)
    assert client.status().era == protocol
    result = client.call_tool("square", {"side": 2})  # never listed: listed first
    assert result.structured_content["corners"][2] == {"x": 2, "y": 2}
    schema = client.tool("square").output_schema
    assert "$defs" in schema  # the local $ref resolved
    checking = start_client(peer("mcpserver"), protocol=protocol, validate_arguments=True)
    with pytest.raises(mcp.Error) as caught:
        checking.call_tool("square", {"side": "two"})
    assert caught.value.data == {"tool": "square", "path": "/side", "keyword": "type"}


@pytest.mark.parametrize("protocol", ERAS)
def test_an_official_server_that_breaks_its_schema(start_client, protocol):
    client = start_client(peer("lowlevel"), protocol=protocol)
    assert client.call_tool("honest", {"n": 4}).structured_content == {"count": 4}
    with pytest.raises(mcp.Error) as caught:
        client.call_tool("liar", {"n": 4})
    assert (caught.value.kind, caught.value.reason) == ("protocol", "invalid_structured_content")
    assert caught.value.data == {"tool": "liar", "path": "/count", "keyword": "type"}
    with pytest.raises(mcp.Error) as caught:
        client.call_tool("silent", {"n": 4})
    assert caught.value.reason == "invalid_structured_content"
    # the client goes on
    assert client.call_tool("honest", {"n": 5}).structured_content == {"count": 5}
    lenient = start_client(peer("lowlevel"), protocol=protocol, validate_output=False)
    assert lenient.call_tool("liar", {"n": 4}).structured_content == {"count": "4"}
