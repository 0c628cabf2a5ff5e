"""A stdio server's environment: the minimal one plus ``env`` by default, never a parent secret.

Asked of a real scripted server process through its ``env`` tool (it answers
``os.environ.get(name)``), through the library and through the command line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

import conduit_mcp as mcp
from conduit_mcp.transports.stdio_spec import DEFAULT_INHERITED_ENV_VARS

pytestmark = pytest.mark.timeout(60)

SECRET_NAME = "CONDUIT_TEST_PARENT_SECRET"
SECRET = "sk-parent-3f9a1c"


@pytest.fixture
def parent_secret(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(SECRET_NAME, SECRET)
    monkeypatch.setenv("HOME", os.environ.get("HOME", "/root"))
    yield


def server_env(spec: mcp.Stdio, *names: str) -> dict[str, str | None]:
    with mcp.Client.start(spec, max_reconnects=0) as client:
        client.await_ready(timeout=20)
        return {
            name: client.call_tool("env", {"name": name}, timeout=10).structured_content["value"]
            for name in names
        }


def scripted(**kw: object) -> mcp.Stdio:
    return mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"], **kw)  # type: ignore[arg-type]


def test_the_official_clients_list_of_variables():
    from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS as OFFICIAL

    assert list(DEFAULT_INHERITED_ENV_VARS) == list(OFFICIAL)


def test_no_parent_secret_reaches_a_server_by_default(parent_secret: None):
    seen = server_env(scripted(env={"GIVEN": "yes"}), SECRET_NAME, "GIVEN", "HOME", "PATH")
    assert seen[SECRET_NAME] is None
    assert seen["GIVEN"] == "yes"  # env is added
    assert (seen["HOME"], seen["PATH"]) == (os.environ["HOME"], os.environ["PATH"])


def test_env_overrides_the_minimal_environment(parent_secret: None):
    seen = server_env(scripted(env={"HOME": "/srv/home"}), "HOME")
    assert seen == {"HOME": "/srv/home"}


def test_inherit_env_opts_into_the_whole_parent_environment(parent_secret: None):
    seen = server_env(scripted(inherit_env=True, env={"GIVEN": "yes"}), SECRET_NAME, "GIVEN")
    assert seen == {SECRET_NAME: SECRET, "GIVEN": "yes"}


def test_an_exported_shell_function_is_left_out(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SHELL", "() { echo pwned; }")
    assert "SHELL" not in scripted().environment()
    with pytest.raises(mcp.Error) as info:
        scripted(inherit_env="yes")
    assert (info.value.kind, info.value.reason) == ("config", "stdio.inherit_env")


def test_the_command_line_passes_no_parent_secret():
    env = {**os.environ, SECRET_NAME: SECRET}
    argv = [sys.executable, "-m", "conduit_mcp", "call", "env", f'{{"name": "{SECRET_NAME}"}}']
    server = ["--", sys.executable, "-m", "conduit_mcp.testing"]
    done = subprocess.run([*argv, *server], env=env, capture_output=True, text=True, timeout=50)
    assert (done.returncode, done.stdout) == (0, "\n"), done.stderr
    given = subprocess.run(
        [*argv, "--env", f"{SECRET_NAME}=given", *server],
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert (given.returncode, given.stdout) == (0, "given\n"), given.stderr
    inherited = subprocess.run(
        [*argv, "--inherit-env", *server], env=env, capture_output=True, text=True, timeout=50
    )
    assert (inherited.returncode, inherited.stdout) == (0, f"{SECRET}\n"), inherited.stderr
