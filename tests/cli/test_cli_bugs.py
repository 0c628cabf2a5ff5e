"""The command line on ordinary input: one test per way it used to break (each failed before).

Run through the real script in a subprocess, as a shell user would: what they see is the exit
code and the text, and never a traceback.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

SERVER = [sys.executable, "-m", "conduit_mcp.testing"]


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conduit_mcp", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=50,
        check=False,
    )


def clean_usage_error(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: usage: "), done.stderr
    assert "\nhint: " in done.stderr
    assert "Traceback" not in done.stderr


def test_a_url_option_of_the_servers_own_command_stays_the_servers():
    # The server's command line has a --url of its own (the shell ignores the extra words).
    own = f"exec {shlex.join(SERVER)}"
    done = run("tools", "--", "sh", "-c", own, "sh", "--url", "http://127.0.0.1:9/mcp")
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("add ") for line in done.stdout.splitlines())


def test_call_without_a_tool_name_is_a_usage_error():
    done = run("call", "--", *SERVER)
    clean_usage_error(done)
    assert "TOOL" in done.stderr


def test_an_empty_server_command_is_a_usage_error():
    clean_usage_error(run("tools", "--"))


@pytest.mark.parametrize("arguments", ["{bad json", "[1, 2]", '"text"'])
def test_arguments_that_are_not_a_json_object_are_a_usage_error(arguments, tmp_path: Path):
    marker = tmp_path / "started"
    server = ["sh", "-c", f"touch {shlex.quote(str(marker))}; exec {shlex.join(SERVER)}"]
    done = run("call", "add", arguments, "--", *server)
    clean_usage_error(done)
    assert "ARGUMENTS" in done.stderr
    assert not marker.exists(), "the server was started for a call that could not be made"


def test_bearer_is_sent(make_server):
    with make_server().http_server(require_bearer="t0k") as srv:
        done = run("tools", "--url", srv.url, "--bearer", "t0k")
        assert done.returncode == 0, done.stderr
        assert any(line.startswith("add ") for line in done.stdout.splitlines())
        refused = run("tools", "--url", srv.url, "--bearer", "wrong")
        assert refused.returncode == 3, refused.stderr
        assert refused.stderr.startswith("error: ")
        assert "--bearer" in refused.stderr  # the hint says what to do
        assert "wrong" not in refused.stderr  # and never echoes the token


def test_header_is_sent(make_server):
    with make_server().http_server(require_bearer="t0k") as srv:
        done = run("tools", "--url", srv.url, "--header", "Authorization: Bearer t0k")
        assert done.returncode == 0, done.stderr


def test_subcommand_help_is_help_not_an_error():
    for command in ("tools", "call", "prompts", "prompt", "resources", "read", "ping", "status"):
        done = run(command, "--help")
        assert done.returncode == 0, (command, done.stderr)
        assert done.stdout.startswith(f"usage: conduit-mcp {command}"), done.stdout
        assert done.stderr == ""


def test_an_unknown_subcommand_never_starts_the_server(tmp_path: Path):
    marker = tmp_path / "started"
    server = ["sh", "-c", f"touch {shlex.quote(str(marker))}; exec {shlex.join(SERVER)}"]
    done = run("tols", "--", *server)
    clean_usage_error(done)
    assert "invalid choice: 'tols'" in done.stderr
    assert not marker.exists()


def test_connection_failures_name_the_command_lines_options_not_pythons():
    # They used to say "pass env=... or inherit_env=True", "1 failed attempts" and
    # "(max_reconnects=0)", an option a shell user never set.
    missing = run("tools", "--", "/nonexistent/server")
    assert missing.returncode == 3
    first = missing.stderr.splitlines()[0]
    assert first.startswith("error: closed (spawn_failed): could not start the server")
    assert "--env NAME=VALUE" in first and "--inherit-env" in first
    assert "env=" not in missing.stderr and "inherit_env" not in missing.stderr
    unreachable = run("tools", "--url", "http://127.0.0.1:9/mcp")
    assert unreachable.returncode == 3
    assert unreachable.stderr.startswith("error: closed (max_reconnects): could not connect: ")
    assert "attempts" not in unreachable.stderr and "max_reconnects=" not in unreachable.stderr
    legacy = run("tools", "--protocol", "modern", "--", *SERVER, "--era", "legacy")
    assert legacy.returncode == 3
    assert "--protocol modern forbids" in legacy.stderr
    assert "protocol='" not in legacy.stderr
