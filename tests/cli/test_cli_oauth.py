"""``conduit-mcp ... --oauth`` and ``conduit-mcp logout``, as a shell user runs them.

The real script in a subprocess against the test authorization server protecting the
scripted HTTP server, both on loopback. The person's browser is ``BROWSER`` (which Python's
``webbrowser`` honours) set to a small script that records each call and fetches the URL:
the test server approves at once and redirects to the client's listener on 127.0.0.1. The
user's data directory is ``XDG_DATA_HOME`` in the test's folder.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conduit_mcp.testing import AuthServerProcess

pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

BROWSER = """\
import os, sys, urllib.request
with open(os.environ["TEST_BROWSER_LOG"], "a") as log:
    log.write(sys.argv[1] + "\\n")
urllib.request.urlopen(sys.argv[1], timeout=10).close()
"""


class Shell:
    """A user's shell: their data directory, their browser, and the command line."""

    def __init__(self, tmp_path: Path) -> None:
        self.data = tmp_path / "data"
        self.browser_log = tmp_path / "browser.log"
        script = tmp_path / "browser"
        script.write_text(f"#!{sys.executable}\n{BROWSER}")
        script.chmod(0o700)
        self.env = {
            **os.environ,
            "XDG_DATA_HOME": str(self.data),
            "BROWSER": str(script),
            "TEST_BROWSER_LOG": str(self.browser_log),
        }

    @property
    def store(self) -> Path:
        return self.data / "conduit-mcp" / "tokens.json"

    def browser_calls(self) -> list[str]:
        if not self.browser_log.exists():
            return []
        return self.browser_log.read_text().splitlines()

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "conduit_mcp", *args],
            stdin=subprocess.DEVNULL,  # not a terminal: nothing to paste at
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
            env={**self.env, **env},
        )

    def tokens(self) -> list[list[str]]:
        """The (principal, issuer, resource) of every token record in the store."""
        records = json.loads(self.store.read_text())
        return [json.loads(k[len("tokens ") :]) for k in records if k.startswith("tokens ")]


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    return Shell(tmp_path)


@pytest.fixture
def auth(tmp_path: Path) -> Any:
    server = AuthServerProcess(tmp_path / "as", scopes="mcp,write,offline_access")
    yield server
    server.stop()


def test_oauth_authorizes_once_the_next_command_refreshes_and_logout_forgets(
    shell, auth, make_server
):
    with make_server().http_server(require_oauth=auth.issuer) as srv:
        first = shell.run("tools", "--url", srv.url, "--oauth")
        assert first.returncode == 0, first.stderr
        assert any(line.startswith("add ") for line in first.stdout.splitlines())
        # The URL is printed for a headless shell, and the browser was opened with it.
        (opened,) = shell.browser_calls()
        assert f"  {opened}\n" in first.stderr and opened.startswith(auth.endpoint("authorize"))
        # The store: per user, owner-only.
        assert stat.S_IMODE(shell.store.stat().st_mode) == 0o600
        assert stat.S_IMODE(shell.store.parent.stat().st_mode) == 0o700
        assert shell.tokens() == [["default", auth.issuer, srv.url]]

        # The access token has expired: the next command refreshes, no browser.
        assert auth.expire_access_tokens() >= 1
        second = shell.run("call", "add", '{"a": 2, "b": 40}', "--url", srv.url, "--oauth")
        assert (second.returncode, second.stdout) == (0, "42\n"), second.stderr
        assert len(shell.browser_calls()) == 1  # the browser was not opened again
        assert len(auth.events("registered")) == 1  # the kept registration served
        assert "open this URL" not in second.stderr
        assert [e["grant"] for e in auth.events("token")] == [
            "authorization_code",
            "refresh_token",
        ]

        out = shell.run("logout", "--url", srv.url)
        assert (out.returncode, out.stdout) == (0, f"forgot 1 token set for {srv.url}\n")
        assert shell.tokens() == []
        assert stat.S_IMODE(shell.store.stat().st_mode) == 0o600
        # Forgotten: the next command asks the person again.
        third = shell.run("ping", "--url", srv.url, "--oauth")
        assert third.returncode == 0, third.stderr
        assert len(shell.browser_calls()) == 2
        again = shell.run("logout", "--url", srv.url)
        assert again.stdout == f"forgot 1 token set for {srv.url}\n"
        assert shell.run("logout", "--url", srv.url).stdout == f"no tokens kept for {srv.url}\n"


def test_a_headless_shell_prints_the_url_and_the_person_opens_it_elsewhere(
    shell, auth, make_server
):
    with make_server().http_server(require_oauth=auth.issuer) as srv:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "conduit_mcp",
                "ping",
                "--url",
                srv.url,
                "--oauth",
                "--no-browser",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=shell.env,
        )
        try:
            assert proc.stderr is not None
            deadline = time.monotonic() + 30
            url = None
            for _ in range(20):  # bounded: the message is two lines
                line = proc.stderr.readline()
                if line.startswith("  http://") or time.monotonic() > deadline or not line:
                    url = line.strip()
                    break
            assert url and url.startswith(auth.endpoint("authorize")), url
            # The person, on another machine's browser: approve, follow the redirect.
            auth.approve(url, follow=True)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert out.startswith("ok (")
        assert shell.browser_calls() == []  # --no-browser: none was opened


def test_a_pre_registered_client_with_its_secret_from_the_environment_and_scopes(
    shell, auth, make_server
):
    secret = "cli-s3cret-71c2"
    auth.add_client(
        "cli-app",
        client_secret=secret,
        redirect_uris=["http://127.0.0.1/callback"],
        token_endpoint_auth_method="client_secret_basic",
    )
    with make_server().http_server(require_oauth=auth.issuer) as srv:
        args = ["ping", "--url", srv.url, "--oauth", "--client-id", "cli-app"]
        done = shell.run(
            *args,
            "--client-secret-env",
            "CLI_APP_SECRET",
            "--scope",
            "mcp write",
            CLI_APP_SECRET=secret,
        )
        assert done.returncode == 0, done.stderr
        (authorized,) = auth.events("authorized")
        assert authorized["client_id"] == "cli-app"
        assert set(authorized["scope"]) >= {"mcp", "write"}
        (issued,) = auth.events("token")
        assert issued["client_id"] == "cli-app"
        assert auth.requests("/register") == []  # pre-registered: no dynamic registration
        assert secret not in shell.store.read_text()  # a pre-registered secret is never written
        assert secret not in done.stderr + done.stdout


def test_a_401_from_an_oauth_server_hints_at_oauth_and_a_plain_one_at_bearer(
    shell, auth, make_server
):
    with make_server().http_server(require_oauth=auth.issuer) as srv:
        done = shell.run("tools", "--url", srv.url)
        assert done.returncode == 3
        assert done.stderr.startswith("error: auth (unauthorized)")
        assert "hint: the server uses OAuth" in done.stderr and "add --oauth" in done.stderr
    with plain_401_server() as url:  # a Bearer challenge naming no resource metadata
        done = shell.run("tools", "--url", url)
        assert done.returncode == 3
        assert done.stderr.startswith("error: auth (unauthorized)"), done.stderr
        assert "--oauth" not in done.stderr and "--bearer TOKEN" in done.stderr
    assert not shell.data.exists()  # nothing was stored without --oauth


@contextlib.contextmanager
def plain_401_server() -> Iterator[str]:
    """An HTTP endpoint on 127.0.0.1 that refuses every request with a plain Bearer 401."""

    class Refuse(http.server.BaseHTTPRequestHandler):
        def _refuse(self) -> None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="api"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_DELETE = _refuse

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--url", "http://127.0.0.1:9/mcp", "--client-id", "x"], {}, "goes with --oauth"),
        (["--url", "http://127.0.0.1:9/mcp", "--scope", "a"], {}, "goes with --oauth"),
        (["--url", "http://127.0.0.1:9/mcp", "--oauth", "--bearer", "t0k"], {}, "--bearer"),
        (
            ["--url", "http://127.0.0.1:9/mcp", "--oauth", "--header", "Authorization: t0k"],
            {},
            "Authorization",
        ),
        (["--oauth", "--", sys.executable, "-m", "conduit_mcp.testing"], {}, "for HTTP"),
        (
            ["--url", "http://127.0.0.1:9/mcp", "--oauth", "--client-secret-env", "S"],
            {},
            "give the id too",
        ),
        (
            [
                *("--url", "http://127.0.0.1:9/mcp", "--oauth", "--client-id", "x"),
                *("--client-secret-env", "CLI_UNSET_SECRET"),
            ],
            {"CLI_UNSET_SECRET": ""},
            "CLI_UNSET_SECRET: that environment variable is not set",
        ),
    ],
)
def test_oauth_options_that_do_not_add_up_are_usage_errors(shell, args, env, says):
    done = shell.run("tools", *args, **env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: usage: ") and says in done.stderr, done.stderr
    assert "t0k" not in done.stderr and "Traceback" not in done.stderr
    assert shell.browser_calls() == []


def test_logout_without_a_store_says_so_and_needs_a_url(shell):
    done = shell.run("logout", "--url", "https://ada:pw@mcp.example.com/mcp?key=s3cret")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no tokens kept for https://mcp.example.com/mcp (no token")
    assert "s3cret" not in done.stdout and "pw" not in done.stdout
    missing = shell.run("logout")
    assert missing.returncode == 2 and "--url" in missing.stderr


def test_oauth_without_the_extra_is_a_usage_error_saying_how_to_install_it(monkeypatch, tmp_path):
    import importlib.util
    import io

    from conduit_mcp.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "authlib" else real(name, *a)
    )
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    out, err = io.StringIO(), io.StringIO()
    code = main(["tools", "--url", "http://127.0.0.1:9/mcp", "--oauth"], stdout=out, stderr=err)
    assert code == 2
    assert err.getvalue().startswith("error: usage: OAuth needs the oauth extra")
    assert "pip install -e '.[oauth]'" in err.getvalue()


def test_on_a_remote_terminal_the_person_pastes_the_url_the_browser_ended_on(
    shell, auth, make_server
):
    # stdin is a terminal (a pty); the person's browser is on another machine, so the
    # redirect to this machine's 127.0.0.1 never arrives: they paste its URL instead.
    env = {k: v for k, v in shell.env.items() if k not in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY")}
    master, slave = os.openpty()
    with make_server().http_server(require_oauth=auth.issuer) as srv:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "conduit_mcp", "call", "add"),
                '{"a": 2, "b": 3}',
                *("--url", srv.url, "--oauth"),
            ],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        os.close(slave)
        try:
            assert proc.stderr is not None
            said: list[str] = []
            for _ in range(20):  # bounded: three lines of instructions
                line = proc.stderr.readline()
                said.append(line)
                if not line or "no browser here" in line:
                    break
            text = "".join(said)
            assert "paste that page's whole URL here" in text, text
            assert "no browser here (no DISPLAY and no BROWSER)" in text, text
            url = next(w.strip() for w in said if w.startswith("  http://"))
            # A wrong paste first (another authorization's state): refused, try again.
            os.write(master, b"http://127.0.0.1:9/callback?code=x&state=not-it\n")
            refused = proc.stderr.readline()
            assert refused.startswith("conduit-mcp: that URL was refused: auth ("), refused
            assert "(state_mismatch)" in refused or "(issuer_mismatch)" in refused
            assert "not-it" not in refused
            os.write(master, auth.approve(url).encode() + b"\n")  # not followed: pasted
            out, err = proc.communicate(timeout=30)
        finally:
            os.close(master)
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
        assert (proc.returncode, out) == (0, "5\n"), err
        assert shell.tokens() == [["default", auth.issuer, srv.url]]


def test_an_unusable_data_directory_or_store_is_a_usage_error(shell, tmp_path):
    url = "http://127.0.0.1:9/mcp"
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = shell.run("tools", "--url", url, "--oauth", XDG_DATA_HOME=str(blocked))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: usage: cannot create the token store's directory")
    shell.store.parent.mkdir(parents=True)
    shell.store.write_text("not json")
    for args in (("tools", "--url", url, "--oauth"), ("logout", "--url", url)):
        done = shell.run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "is not a JSON object" in done.stderr and "move" in done.stderr
        assert shell.store.read_text() == "not json"  # never overwritten


def test_oauth_for_an_http_entry_of_a_config_file(shell, auth, make_server, tmp_path):
    with make_server().http_server(require_oauth=auth.issuer) as srv:
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"remote": {"url": srv.url}}}))
        done = shell.run("ping", "--config", str(config), "--oauth")
        assert done.returncode == 0, done.stderr
        assert len(shell.browser_calls()) == 1
        assert shell.tokens() == [["default", auth.issuer, srv.url]]
