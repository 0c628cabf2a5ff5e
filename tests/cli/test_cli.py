"""``conduit-mcp``: every subcommand against the scripted server, readable output and --json,
exit codes, the progress bar, and the server's stderr when it cannot start.

Most tests run ``main(argv)`` in this process with captured output (the same code the script
runs); the ones about what a shell user sees (tracebacks, the demo) run the real script.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from conduit_mcp.cli import main

pytestmark = pytest.mark.timeout(60)

SERVER = ["--", sys.executable, "-m", "conduit_mcp.testing"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command line in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "conduit_mcp", *args],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


class Ran:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


def cli(*args: str) -> Ran:
    """``main(argv)`` in this process, stdout and stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return Ran(code, out.getvalue(), err.getvalue())


def test_demo_prints_the_negotiated_era_and_a_tool_result():
    done = run("demo")
    assert done.returncode == 0, done.stderr
    assert "era=modern version=2026-07-28" in done.stdout
    assert "progress 3/3" in done.stdout
    assert "add(20, 22) = 42" in done.stdout
    # then over streamable HTTP: the cache answered the second listing, and a change
    # notification refreshed it
    assert "1 tools/list sent" in done.stdout
    assert "notification: notifications/tools/list_changed" in done.stdout
    assert "tool('hello_http') -> hello_http" in done.stdout
    # then one OAuth flow against the test authorization server, and a restart that refreshes
    assert "tokens by authorization_code; add(1, 2) = 3" in done.stdout
    assert "restarted with the kept tokens: refresh_token, the person was asked 1 time" in (
        done.stdout
    )


def test_tools_is_a_table_with_the_first_line_of_each_description():
    done = cli("tools", *SERVER)
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert lines[0].split() == ["NAME", "DESCRIPTION"]
    add = next(line for line in lines if line.startswith("add "))
    assert add.split(None, 1)[1] == "Add two numbers."
    assert lines[0].index("DESCRIPTION") == add.index("Add two numbers.")  # aligned columns


def test_tools_json_is_the_raw_list():
    done = cli("tools", "--json", *SERVER)
    assert done.code == 0, done.err
    tools = json.loads(done.out)
    add = next(t for t in tools if t["name"] == "add")
    assert add["inputSchema"]["type"] == "object"


def test_call_prints_the_text_content_and_json_prints_the_result():
    done = cli("call", "add", '{"a": 2, "b": 40}', *SERVER)
    assert (done.code, done.out) == (0, "42\n"), done.err
    raw = cli("call", "add", '{"a": 2, "b": 40}', "--json", *SERVER)
    assert json.loads(raw.out)["structuredContent"] == {"sum": 42}


def test_call_reads_arguments_from_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"text": "from stdin"}'))
    done = cli("call", "echo", "-", *SERVER)
    assert (done.code, done.out) == (0, "from stdin\n"), done.err


def test_progress_is_drawn_on_stderr_and_never_on_stdout():
    done = cli("call", "progress", '{"steps": 3}', *SERVER)
    assert done.code == 0, done.err
    assert done.out == "done 3 steps\n"
    steps = [line for line in done.err.splitlines() if line.startswith("progress")]
    assert steps == [
        "progress [######..............] 1/3 step 1",
        "progress [#############.......] 2/3 step 2",
        "progress [####################] 3/3 step 3",
    ]
    quiet = cli("call", "progress", '{"steps": 3}', "--no-progress", *SERVER)
    assert (quiet.code, quiet.err) == (0, "")


def test_exit_codes_tool_error_1_server_error_4_timeout_4():
    failed = cli("call", "fail", *SERVER)
    assert failed.code == 1
    assert failed.err == "tool error: failure requested\n"
    unknown = cli("call", "no_such_tool", *SERVER)
    assert unknown.code == 4
    assert unknown.err.startswith("error: server (invalid_params) [-32602]: ")
    assert "hint: check the tool's name" in unknown.err
    # Long enough for the server to start on a loaded machine (not ready in time is exit 3),
    # so the deadline that ends it is the call's.
    slow = cli("call", "never", "--timeout", "1.5", *SERVER)
    assert slow.code == 4, slow.err
    assert slow.err.startswith("error: timeout (")
    assert "--timeout (now 1.5 s)" in slow.err


def test_prompts_prompt_resources_read_ping_status():
    prompts = cli("prompts", *SERVER)
    assert prompts.code == 0 and prompts.out.splitlines()[0].split() == [
        "NAME",
        "ARGUMENTS",
        "DESCRIPTION",
    ]
    assert any(line.split()[:2] == ["greet", "name"] for line in prompts.out.splitlines())
    prompt = cli("prompt", "greet", '{"name": "Ada"}', *SERVER)
    assert prompt.code == 0, prompt.err
    assert "Ada" in prompt.out and prompt.out.splitlines()[-1].startswith("user: ")
    resources = cli("resources", *SERVER)
    assert resources.code == 0
    rows = {line.split()[0] for line in resources.out.splitlines()[1:]}
    assert {"test://static/hello", "test://item/{id}"} <= rows
    read = cli("read", "test://static/hello", "--json", *SERVER)
    assert read.code == 0
    assert json.loads(read.out)["contents"][0]["uri"] == "test://static/hello"
    ping = cli("ping", *SERVER)
    assert ping.code == 0 and ping.out.startswith("ok (")
    status = cli("status", "--json", "--protocol", "legacy", *SERVER)
    assert status.code == 0, status.err
    shown = json.loads(status.out)
    assert (shown["status"]["era"], shown["status"]["version"]) == ("legacy", "2025-11-25")
    assert shown["serverInfo"]["name"] == "scripted"


def test_the_servers_stderr_is_shown_when_it_fails_to_start():
    script = "import sys; sys.stderr.write('fatal: set MY_API_KEY first\\n'); sys.exit(1)"
    done = run("tools", "--", sys.executable, "-c", script)
    assert done.returncode == 3
    assert done.stderr.startswith("error: ")
    assert "  | fatal: set MY_API_KEY first" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_server_is_a_clear_error_not_a_traceback():
    done = run("tools", "--", "/nonexistent/server")
    assert done.returncode == 3
    assert done.stderr.startswith("error: ")
    assert "\nhint: " in done.stderr
    assert "Traceback" not in done.stderr


def test_tools_and_call_on_an_http_server(make_server):
    with make_server(era="legacy").http_server() as srv:
        tools = cli("tools", "--url", srv.url)
        assert tools.code == 0, tools.err
        assert any(line.startswith("add ") for line in tools.out.splitlines())
        call = cli("call", "add", '{"a": 2, "b": 40}', "--json", "--url", srv.url)
        assert call.code == 0, call.err
        assert json.loads(call.out)["structuredContent"] == {"sum": 42}
    bad = cli("tools", "--url", "ftp://nowhere")
    assert bad.code == 2
    assert bad.err.startswith("error: usage: Http url must be an http:// or https:// URL")


def test_help_documents_every_command_and_the_exit_codes():
    done = run("--help")
    assert done.returncode == 0
    for command in ("tools", "call", "prompts", "prompt", "resources", "read", "ping", "status"):
        assert command in done.stdout
    assert "exit codes:" in done.stdout and "3    no connection" in done.stdout
    call = run("call", "--help")
    assert call.returncode == 0
    assert "TOOL" in call.stdout and "--bearer" in call.stdout and "exit codes:" in call.stdout


def test_verbose_logs_the_clients_loggers_on_stderr_and_quiet_by_default():
    quiet = run("ping", *SERVER)
    assert quiet.returncode == 0 and quiet.stderr == ""
    loud = run("ping", "-vv", *SERVER)
    assert loud.returncode == 0, loud.stderr
    assert "conduit_mcp.connection DEBUG connection discovering -> ready" in loud.stderr
    assert "pykka" not in loud.stderr  # only the client's own loggers


def test_a_server_that_never_answers_ends_at_the_timeout_with_a_hint():
    done = cli("tools", "--timeout", "1", "--", sys.executable, "-c", "import time; time.sleep(60)")
    assert done.code == 3
    assert done.err.startswith("error: timeout (")
    assert "--timeout (now 1 s)" in done.err


def test_bad_options_are_usage_errors_before_anything_starts():
    for args, says in [
        (("--protocol", "1999-01-01"), "protocol"),
        (("--timeout", "0"), "must be a number of seconds > 0"),
        (("--timeout", "soon"), "not a number of seconds"),
        (("--env", "NOEQUALS"), "--env takes NAME=VALUE"),
        (("--bearer", "t0k"), "does not take them"),
    ]:
        done = cli("tools", *args, *SERVER)
        assert done.code == 2, (args, done.err)
        assert done.err.startswith("error: usage: ") and says in done.err, (args, done.err)
        assert "t0k" not in done.err


def test_the_progress_bar_redraws_one_line_on_a_terminal():
    from conduit_mcp import Progress
    from conduit_mcp.cli.output import ProgressBar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    bar = ProgressBar(screen)
    bar(Progress(1, 4, "one"))
    bar(Progress(4, 4, None))
    bar(Progress(7))  # no total: just the count
    bar.done()
    drawn = screen.getvalue()
    assert drawn.count("\n") == 1 and drawn.endswith("\n")
    frames = [f.rstrip() for f in drawn[:-1].split("\r")[1:]]
    assert frames == [
        "progress [#####...............] 1/4 one",
        "progress [####################] 4/4",
        "progress 7",
    ]


def test_the_command_line_page_documents_the_exit_codes_of_the_help():
    from pathlib import Path

    from conduit_mcp.cli.parser import EXIT_CODES

    readme = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    for line in EXIT_CODES.splitlines()[1:]:
        code = line.split()[0] if line.startswith("  ") and line.split()[0].isdigit() else None
        if code is not None:
            assert f"\n| {code} | " in readme, code
