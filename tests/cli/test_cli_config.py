"""``--config FILE --server NAME``: the ``mcpServers`` file desktop MCP hosts use, read by the
Hub's loader (``conduit_mcp.load_config``). Several servers without ``--server``:
test_cli_hub.py."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from conduit_mcp.cli import main

pytestmark = pytest.mark.timeout(60)


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def write(tmp_path: Path, document: Any) -> str:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return str(path)


def scripted(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "conduit_mcp.testing"], **extra}


def test_a_stdio_entry_runs_with_its_args_env_and_cwd(tmp_path: Path):
    workdir = tmp_path / "srv"
    workdir.mkdir()
    config = write(
        tmp_path,
        {
            "mcpServers": {
                "files": scripted(env={"GREETING": "hello"}, cwd=str(workdir)),
                "other": {"command": "/nonexistent/never-started"},
            }
        },
    )
    code, out, err = cli(
        "call", "env", '{"name": "GREETING"}', "--config", config, "--server", "files"
    )
    assert (code, out) == (0, "hello\n"), err
    code, out, err = cli("call", "cwd", "--config", config, "--server", "files")
    assert (code, out.strip()) == (0, os.path.realpath(workdir)), err
    # --env adds to (and overrides) the entry's env
    code, out, _ = cli(
        "call",
        "env",
        '{"name": "GREETING"}',
        "--env",
        "GREETING=hi",
        "--config",
        config,
        "--server",
        "files",
    )
    assert (code, out) == (0, "hi\n")


def test_a_single_server_needs_no_name(tmp_path: Path):
    config = write(tmp_path, {"mcpServers": {"only": scripted()}})
    code, out, err = cli("call", "add", '{"a": 1, "b": 2}', "--config", config)
    assert (code, out) == (0, "3\n"), err


def test_an_http_entry_with_headers(make_server, tmp_path: Path):
    with make_server().http_server(require_bearer="t0k") as srv:
        config = write(
            tmp_path,
            {
                "mcpServers": {
                    "remote": {"url": srv.url, "headers": {"Authorization": "Bearer t0k"}}
                }
            },
        )
        code, out, err = cli("tools", "--config", config, "--server", "remote")
        assert code == 0, err
        assert any(line.startswith("add ") for line in out.splitlines())
        # "type" as VS Code writes it, and the "servers" key of its mcp.json
        vscode = write(
            tmp_path,
            {"servers": {"r": {"type": "http", "url": srv.url}}},
        )
        code, _, err = cli("tools", "--config", vscode, "--bearer", "t0k")
        assert code == 0, err


@pytest.mark.parametrize(
    ("document", "server", "says"),
    [
        ("{not json", None, "is not valid JSON"),
        ({"servers": []}, None, "'servers' must be an object of servers"),
        ({"other": 1}, None, 'the config has no "mcpServers" object'),
        ({"mcpServers": {"a": scripted()}}, "b", "has no server 'b'"),
        ({"mcpServers": {"a": scripted(disabled=True)}}, "a", "server 'a' is disabled"),
        ({"mcpServers": {"a": scripted(disabled=True)}}, None, "has no enabled server"),
        ({"mcpServers": {}}, None, "has no enabled server"),
        ({"mcpServers": {"a": {"args": []}}}, "a", "(servers.a.command): server 'a': an entry"),
        ({"mcpServers": {"a": scripted(), "b": {"args": []}}}, "a", "(servers.b.command)"),
        ({"mcpServers": {"a.b": scripted()}}, None, "the name contains the separator '.'"),
        ({"mcpServers": {"a": {"command": "x", "args": "--flag"}}}, "a", "'args' must be a list"),
        ({"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}}, "a", "'env' must map names"),
        ({"mcpServers": {"a": {"url": "ftp://x"}}}, "a", "http:// or https://"),
        ({"mcpServers": {"a": {"type": "websocket", "url": "ws://x/"}}}, "a", "(servers.a.type)"),
        ({"mcpServers": {"a": scripted(conduit={"protocl": "x"})}}, "a", "did you mean protocol"),
        ({"mcpServers": {"a": scripted(args="${NOT_SET_ANYWHERE}")}}, "a", "'args' must be"),
        ({"mcpServers": {"a": scripted(env={"K": "${NOT_SET_ANYWHERE}"})}}, "a", "is not set"),
    ],
)
def test_a_bad_file_or_entry_is_a_usage_error_naming_it(tmp_path, document, server, says):
    config = write(tmp_path, document)
    code, out, err = cli("tools", "--config", config, *(["--server", server] if server else []))
    assert code == 2 and out == ""
    assert err.startswith("error: usage: --config ") and says in err, err


def test_a_missing_file_and_conflicting_options_are_usage_errors(tmp_path: Path):
    code, _, err = cli("tools", "--config", str(tmp_path / "nope.json"))
    assert code == 2 and "nope.json: cannot read the file" in err and "hint" not in err
    config = write(tmp_path, {"mcpServers": {"a": scripted()}})
    code, _, err = cli("tools", "--config", config, "--url", "http://127.0.0.1:9/mcp")
    assert code == 2 and "give one server, not --url and --config" in err
    code, _, err = cli("tools", "--config", config, "--bearer", "t0k")
    assert code == 2 and "does not take them" in err and "t0k" not in err
    code, _, err = cli("tools", "--server", "a")
    assert code == 2 and "give the file too" in err
