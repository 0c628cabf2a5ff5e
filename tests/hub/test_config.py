"""``conduit_mcp.load_config``: the ``mcpServers`` document, read once, every error naming the
server and the key, and no value of ``env`` or ``headers`` ever shown."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.hub import transports

pytestmark = pytest.mark.timeout(30)

SECRET = "s3cret-value-never-shown"


def servers(**entries: Any) -> dict[str, Any]:
    return {"mcpServers": entries}


def fails(source: Any, reason: str, **kw: Any) -> mcp.Error:
    with pytest.raises(mcp.Error) as info:
        mcp.load_config(source, **kw)
    assert (info.value.kind, info.value.reason) == ("config", reason), str(info.value)
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
    return info.value


def test_a_path_a_json_string_and_a_mapping_give_the_same_config(tmp_path: Path) -> None:
    document = servers(
        files={"command": "python", "args": ["-m", "files"], "env": {"K": "v"}, "cwd": "/srv"},
        remote={"url": "http://127.0.0.1:8000/mcp", "headers": {"X-Key": "k"}},
    )
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(document))
    configs = [
        mcp.load_config(document),
        mcp.load_config(json.dumps(document)),
        mcp.load_config(path),
        mcp.load_config(str(path)),
    ]
    assert all(c == configs[0] for c in configs)
    files, remote = configs[0].servers.values()
    assert (files.type, files.command, files.args, dict(files.env), files.cwd) == (
        "stdio",
        "python",
        ("-m", "files"),
        {"K": "v"},
        "/srv",
    )
    assert (remote.type, remote.url, dict(remote.headers)) == (
        "http",
        "http://127.0.0.1:8000/mcp",
        {"X-Key": "k"},
    )


def test_vs_code_servers_key_and_types() -> None:
    cfg = mcp.load_config(
        {
            "servers": {
                "a": {"type": "stdio", "command": "x"},
                "b": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
                "c": {"transport": "http", "url": "http://127.0.0.1:1/mcp"},
                "d": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
            }
        }
    )
    assert [e.type for e in cfg.servers.values()] == ["stdio", "streamable-http", "http", "sse"]


def test_expansion_from_the_environment_with_defaults() -> None:
    env = {"TOKEN": SECRET, "ROOT": "/data"}
    cfg = mcp.load_config(
        servers(
            files={
                "command": "${ROOT}/bin/server",
                "args": ["--root", "${ROOT}", "--level=${LEVEL:-info}"],
                "env": {"API_KEY": "${TOKEN}", "EMPTY": "${NOPE:-}"},
            },
            remote={
                "url": "http://${HOST:-127.0.0.1}:${PORT:-8000}/mcp",
                "headers": {"Authorization": "Bearer ${TOKEN}"},
                "conduit": {"request_timeout": 5, "auth": {"bearer": "${TOKEN}"}},
            },
        ),
        environ=env,
    )
    files, remote = cfg.servers["files"], cfg.servers["remote"]
    assert files.command == "/data/bin/server"
    assert files.args == ("--root", "/data", "--level=info")
    assert dict(files.env) == {"API_KEY": SECRET, "EMPTY": ""}
    assert remote.url == "http://127.0.0.1:8000/mcp"
    assert remote.headers["Authorization"] == f"Bearer {SECRET}"
    assert remote.conduit["auth"] == {"bearer": SECRET}
    # the values are in no repr
    assert SECRET not in repr(cfg) and SECRET not in repr(files) and SECRET not in repr(remote)


def test_an_unset_variable_names_the_server_the_key_and_the_variable_only() -> None:
    error = fails(
        servers(files={"command": "x", "env": {"K": f"{SECRET}-${{MISSING_VAR}}"}}),
        "servers.files.env",
        environ={},
    )
    assert "${MISSING_VAR}" in error.message and "files" in error.message
    fails(
        servers(remote={"url": "http://h/mcp", "headers": {"X": f"{SECRET}${{NOPE}}"}}),
        "servers.remote.headers",
        environ={},
    )


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"command": 3}, "servers.s.command"),
        ({"command": ""}, "servers.s.command"),
        ({"command": "x", "args": "--flag"}, "servers.s.args"),
        ({"command": "x", "args": [1]}, "servers.s.args"),
        ({"command": "x", "env": {"K": 1}}, "servers.s.env"),
        ({"command": "x", "env": [SECRET]}, "servers.s.env"),
        ({"command": "x", "cwd": 3}, "servers.s.cwd"),
        ({"url": 3}, "servers.s.url"),
        ({"url": "http://h/mcp", "headers": {"X": 2}}, "servers.s.headers"),
        ({"url": "http://h/mcp", "headers": SECRET}, "servers.s.headers"),
        ({"url": "http://h/mcp", "env": {"K": SECRET}}, "servers.s.env"),
        ({"command": "x", "headers": {"X": SECRET}}, "servers.s.headers"),
        ({"command": "x", "url": "http://h/mcp"}, "servers.s.url"),
        ({"type": "websocket", "url": "ws://h"}, "servers.s.type"),
        ({"type": "http", "transport": "sse", "url": "http://h"}, "servers.s.type"),
        ({"type": "http", "command": "x"}, "servers.s.url"),
        ({"args": ["x"]}, "servers.s.command"),
        ({"command": "x", "disabled": "yes"}, "servers.s.disabled"),
        ({"command": "x", "conduit": [1]}, "servers.s.conduit"),
        ("not an object", "servers.s"),
    ],
)
def test_every_bad_entry_names_the_server_and_the_key(entry: Any, reason: str) -> None:
    fails(servers(s=entry), reason)


def test_a_server_name_with_the_separator_is_refused() -> None:
    error = fails(servers(**{"files.v2": {"command": "x"}}), "servers.files.v2")
    assert "separator" in error.message
    # with another separator the dot is fine, and that separator is refused instead
    assert (
        "files.v2"
        in mcp.load_config(servers(**{"files.v2": {"command": "x"}}), separator="__").servers
    )
    fails(servers(files__v2={"command": "x"}), "servers.files__v2", separator="__")


def test_the_document_itself(tmp_path: Path) -> None:
    fails(str(tmp_path / "missing.json"), "config")
    (tmp_path / "bad.json").write_text('{"mcpServers": {"a": {"env": {"K": "' + SECRET)
    error = fails(str(tmp_path / "bad.json"), "config")
    assert "line" in error.message
    fails('{"mcpServers": [1]}', "config")
    fails("{}", "config")
    fails(42, "config")


def test_disabled_entries_are_listed_apart_and_unknown_keys_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="conduit_mcp.hub"):
        cfg = mcp.load_config(
            servers(
                on={"command": "x", "autoApprove": ["read"], "alwaysAllow": []},
                off={"command": "y", "disabled": True},
            )
        )
    assert list(cfg.servers) == ["on"] and cfg.disabled == ("off",)
    assert dict(cfg.servers["on"].extra) == {"autoApprove": ["read"], "alwaysAllow": []}
    ignored = [r for r in caplog.records if "ignoring keys" in r.getMessage()]
    assert len(ignored) == 1 and "autoApprove" in ignored[0].getMessage()


def test_conduit_options_split_between_the_client_and_the_transport() -> None:
    cfg = mcp.load_config(
        servers(
            files={"command": "x", "conduit": {"protocol": "legacy", "inherit_env": True}},
            remote={
                "url": "http://127.0.0.1:1/mcp",
                "conduit": {"max_in_flight": 7, "connect_timeout": 2, "auth": {"bearer": SECRET}},
            },
        )
    )
    spec, config = transports.build(cfg.servers["files"])
    assert isinstance(spec, mcp.Stdio) and spec.inherit_env is True
    assert config.protocol.mode == "legacy" or config.protocol is not None
    spec, config = transports.build(cfg.servers["remote"], {"request_timeout": 3})
    assert isinstance(spec, mcp.Http) and spec.bearer == SECRET and spec.connect_timeout == 2
    assert (config.max_in_flight, config.request_timeout) == (7, 3)
    assert SECRET not in repr(spec)


@pytest.mark.parametrize(
    ("conduit", "reason"),
    [
        ({"max_in_flite": 3}, "servers.s.conduit.max_in_flite"),
        ({"max_in_flight": 0}, "servers.s.conduit.max_in_flight"),
        ({"verify": "/tmp"}, "servers.s.conduit.verify"),  # an HTTP option on a stdio entry
        ({"inherit_env": "yes"}, "servers.s.conduit.inherit_env"),
    ],
)
def test_a_bad_conduit_option_names_it(conduit: dict[str, Any], reason: str) -> None:
    cfg = mcp.load_config(servers(s={"command": "x", "env": {"K": SECRET}, "conduit": conduit}))
    with pytest.raises(mcp.Error) as info:
        transports.build(cfg.servers["s"])
    assert (info.value.kind, info.value.reason) == ("config", reason), str(info.value)
    assert SECRET not in str(info.value)


def test_a_misspelt_conduit_option_gets_the_closest_names() -> None:
    cfg = mcp.load_config(servers(s={"command": "x", "conduit": {"request_timout": 3}}))
    with pytest.raises(mcp.Error) as info:
        transports.build(cfg.servers["s"])
    assert "request_timeout" in info.value.message


def test_a_bad_url_names_the_server_and_never_shows_its_secrets() -> None:
    cfg = mcp.load_config(servers(r={"url": f"ftp://user:{SECRET}@h/?k={SECRET}"}))
    with pytest.raises(mcp.Error) as info:
        transports.build(cfg.servers["r"])
    assert (info.value.kind, info.value.reason) == ("config", "servers.r.url")
    assert SECRET not in str(info.value)


def test_an_sse_entry_builds_the_sse_transport_with_its_headers() -> None:
    cfg = mcp.load_config(
        servers(old={"type": "sse", "url": "http://127.0.0.1:1/sse", "headers": {"X-K": "v"}})
    )
    spec, _ = transports.build(cfg.servers["old"])
    assert isinstance(spec, mcp.Sse)
    assert spec.url == "http://127.0.0.1:1/sse"


def test_oauth_per_server_tells_one_callback_which_server_needs_a_person() -> None:
    asked: list[tuple[str, str]] = []
    cfg = mcp.load_config(
        servers(
            a={"url": "https://a.example/mcp", "conduit": {"auth": {"oauth": {"loopback": True}}}},
            b={"url": "https://b.example/mcp", "conduit": {"auth": {"oauth": {"loopback": True}}}},
        )
    )
    for name in ("a", "b"):
        spec, _ = transports.build(
            cfg.servers[name], on_authorize=lambda s, u: asked.append((s, u))
        )
        assert isinstance(spec.auth, mcp.OAuth)
        spec.auth.on_authorize(f"https://as.example/authorize?for={name}")
    assert asked == [
        ("a", "https://as.example/authorize?for=a"),
        ("b", "https://as.example/authorize?for=b"),
    ]
    bad = mcp.load_config(
        servers(c={"url": "https://c/mcp", "conduit": {"auth": {"oauth": {"nope": 1}}}})
    )
    with pytest.raises(mcp.Error) as info:
        transports.build(bad.servers["c"])
    assert info.value.reason == "servers.c.conduit.auth"
