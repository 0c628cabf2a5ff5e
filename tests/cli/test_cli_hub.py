"""``--config FILE`` without ``--server``: every server of the file through a Hub.

Run through the real script in a subprocess, as a shell user would: what they see is the
output, the stderr and the exit code. The servers are the scripted test server
(``python -m conduit_mcp.testing``) under two names, each told its name through its ``env``,
and an entry whose command does not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(90)

#: Longer than any of these commands takes; a command that waited for the dead server's
#: deadline (--timeout 120 below) would be killed by it and fail the test.
RUN_LIMIT = 60


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conduit_mcp", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT,
        check=False,
        env={**os.environ, **(env or {})},
    )


def scripted(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "conduit_mcp.testing"],
        "env": {"WHO": name, **extra.pop("env", {})},
        **extra,
    }


def write(tmp_path: Path, servers: dict[str, Any]) -> str:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


@pytest.fixture
def config(tmp_path: Path) -> str:
    return write(
        tmp_path,
        {
            "alpha": scripted("alpha"),
            "beta": scripted("beta"),
            "dead": {"command": str(tmp_path / "no-such-server")},
            "off": {"command": "never-run", "disabled": True},
        },
    )


def test_tools_lists_every_server_qualified_and_names_the_dead_one(config: str):
    done = run("tools", "--config", config, "--timeout", "120")
    names = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert "alpha.add" in names and "beta.add" in names and "alpha.echo" in names
    assert not any(n.startswith(("dead.", "off.")) for n in names)
    # The dead server is said once, in the command line's words, and the exit code says so.
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("server 'dead'") == 1
    assert "spawn_failed" in done.stderr and "check the entry's command" in done.stderr
    assert "Traceback" not in done.stderr


def test_tools_json_carries_the_server(config: str):
    done = run("tools", "--config", config, "--json")
    tools = json.loads(done.stdout)
    by_name = {t["name"]: t for t in tools}
    assert by_name["beta.add"]["server"] == "beta"
    assert "inputSchema" in by_name["alpha.add"]


def test_call_routes_to_the_named_server(config: str):
    for server in ("alpha", "beta"):
        done = run("call", f"{server}.env", '{"name": "WHO"}', "--config", config)
        assert (done.returncode, done.stdout) == (0, f"{server}\n"), done.stderr
    done = run("call", "alpha.add", '{"a": 2, "b": 3}', "--config", config, "--json")
    assert json.loads(done.stdout)["structuredContent"] == {"sum": 5}


def test_call_to_the_dead_server_fails_at_once_in_cli_words(config: str):
    done = run("call", "dead.add", '{"a": 1, "b": 2}', "--config", config, "--timeout", "120")
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith("error: closed (spawn_failed): server 'dead': could not start")
    assert "Traceback" not in done.stderr


def test_call_names_that_name_nothing(config: str):
    done = run("call", "alpha.ad", "{}", "--config", config)
    assert done.returncode == 2
    assert "unknown_tool" in done.stderr and "'alpha.add'" in done.stderr
    assert "conduit-mcp tools --config FILE" in done.stderr
    done = run("call", "alpa.add", "{}", "--config", config)
    assert done.returncode == 2 and "no server 'alpa'; did you mean 'alpha'?" in done.stderr
    done = run("call", "add", "{}", "--config", config)
    assert done.returncode == 2 and "name the tool as SERVER.TOOL" in done.stderr
    assert "servers: alpha, beta, dead (disabled: off)" in done.stderr
    done = run("call", "off.add", "{}", "--config", config)
    assert done.returncode == 2 and "no server 'off'" in done.stderr


def test_status_is_a_table_of_the_servers(config: str):
    done = run("status", "--config", config, "--timeout", "120")
    assert done.returncode == 3  # not every server is ready
    rows = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert rows["SERVER"].split() == ["SERVER", "STATE", "PROTOCOL", "TOOLS", "DETAIL"]
    assert rows["alpha"].split()[1:3] == ["ready", "modern"]
    assert rows["dead"].split()[1] == "closed" and "spawn_failed" in rows["dead"]
    assert rows["off"].split()[1] == "disabled"
    assert done.stderr == ""
    document = json.loads(run("status", "--config", config, "--json").stdout)
    assert document["beta"]["status"]["state"] == "ready" and document["beta"]["tools"] > 0
    assert "spawn_failed" in document["dead"]["error"]
    assert document["off"] == {"status": None, "disabled": True}


def test_status_of_healthy_servers_exits_0_and_typed_protocol_wins(tmp_path: Path):
    config = write(
        tmp_path,
        {"a": scripted("a"), "b": scripted("b", conduit={"protocol": "legacy"})},
    )
    done = run("status", "--config", config)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()}
    assert rows["a"][2] == "modern" and rows["b"][2] == "legacy"  # the entry's own option
    done = run("status", "--config", config, "--protocol", "legacy")
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()}
    assert rows["a"][2] == rows["b"][2] == "legacy"


def test_one_server_options_are_refused_with_several(config: str):
    done = run("tools", "--config", config, "--bearer", "s3cret-token")
    assert done.returncode == 2
    assert "--bearer set up one server's connection" in done.stderr
    assert "--server NAME" in done.stderr and "s3cret-token" not in done.stderr
    done = run("tools", "--config", config, "--env", "K=s3cret-value", "--inherit-env")
    assert "--env, --inherit-env set up" in done.stderr and "s3cret-value" not in done.stderr


def test_env_expansion_and_no_secret_in_what_is_printed(tmp_path: Path):
    config = write(
        tmp_path,
        {
            "a": scripted("a", env={"TOKEN": "${HUB_TEST_TOKEN}", "MODE": "${HUB_MODE:-plain}"}),
            "remote": {
                "url": "http://127.0.0.1:9/mcp?key=q-s3cret",
                "headers": {"Authorization": "Bearer ${HUB_TEST_TOKEN}"},
            },
        },
    )
    env = {"HUB_TEST_TOKEN": "t0k-s3cret"}
    done = run("call", "a.env", '{"name": "TOKEN"}', "--config", config, env=env)
    assert (done.returncode, done.stdout) == (0, "t0k-s3cret\n"), done.stderr
    done = run("call", "a.env", '{"name": "MODE"}', "--config", config, env=env)
    assert done.stdout == "plain\n"
    for command in ("status", "tools"):
        done = run(command, "--config", config, "--timeout", "20", env=env)
        assert done.returncode == 3  # nobody listens on 127.0.0.1:9
        shown = done.stdout + done.stderr
        assert "remote" in shown and "s3cret" not in shown, shown
    # Unset and no default: an error naming the variable, the server and the key.
    done = run("tools", "--config", config)
    assert done.returncode == 2
    assert "(servers.a.env): server 'a': ${HUB_TEST_TOKEN} is not set" in done.stderr


def test_server_picks_one_entry_with_its_own_options(tmp_path: Path):
    config = write(
        tmp_path,
        {"a": scripted("a"), "b": scripted("b", conduit={"protocol": "legacy"}), "x": {"url": 1}},
    )
    # One bad entry spoils the file for every command: the loader reads it whole.
    done = run("tools", "--config", config, "--server", "a")
    assert done.returncode == 2 and "(servers.x.url)" in done.stderr
    config = write(
        tmp_path, {"a": scripted("a"), "b": scripted("b", conduit={"protocol": "legacy"})}
    )
    done = run("status", "--config", config, "--server", "b")
    assert done.returncode == 0, done.stderr
    assert "era           legacy" in done.stdout  # the entry's "conduit" options apply
    done = run("tools", "--config", config, "--server", "a")
    names = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert "add" in names and not any("." in n for n in names)  # one server: its own names


def test_a_failing_server_shows_its_stderr_and_a_hanging_one_its_deadline(tmp_path: Path):
    config = write(
        tmp_path,
        {
            "alpha": scripted("alpha"),
            "exits": {
                "command": sys.executable,
                "args": [
                    "-c",
                    "import sys; sys.stderr.write('fatal: no database\\n'); sys.exit(3)",
                ],
            },
            "hangs": {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]},
        },
    )
    done = run("tools", "--config", config, "--timeout", "3")
    assert done.returncode == 3
    assert "alpha.add" in done.stdout  # the others are listed all the same
    assert "server 'exits': could not connect" in done.stderr, done.stderr
    assert "server 'exits' stderr (last lines):\n  | fatal: no database" in done.stderr
    assert "server 'hangs': the server was not ready within 3 s" in done.stderr


def test_prompts_resources_read_and_ping_over_every_server(config: str):
    done = run("prompts", "--config", config)
    names = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert {"alpha.greet", "beta.greet"} <= set(names) and done.returncode == 3
    done = run("prompt", "beta.greet", '{"name": "Ada"}', "--config", config)
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "user: Hello, Ada!")
    # Both servers list the same URIs: one is shown and read, and the user is told whose.
    done = run("resources", "--config", config)
    assert "test://static/hello" in done.stdout
    assert "note: 'test://static/hello' is listed by alpha, beta; alpha's is shown" in done.stderr
    done = run("read", "test://static/hello", "--config", config)
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hello, world!\n", "")
    done = run("read", "test://nope", "--config", config)
    assert done.returncode == 2 and "unknown_resource" in done.stderr
    assert "server 'dead'" in done.stderr  # it might have been the one that lists it
    done = run("ping", "--config", config, "--json")
    pinged = json.loads(done.stdout)
    assert pinged["alpha"]["ok"] and pinged["beta"]["ok"] and not pinged["dead"]["ok"]
