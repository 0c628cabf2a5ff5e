"""``conduit-mcp demo``: the embedded scriptable server driven by the client, stdio, then
HTTP, then HTTP behind the test authorization server (OAuth).

What ``make demo`` runs; it needs nothing but this package (and the ``oauth`` extra for the
last part, which ``make demo`` installs; without it that part is skipped, saying so).
"""

from __future__ import annotations

import importlib.util
import queue
import sys
import tempfile
from typing import Any

from .. import LIST_REFRESHED, Client, Stdio


def demo_http() -> None:
    """The same server over streamable HTTP: the cache, and a change notification that
    reaches a subscriber through a ``subscriptions/listen`` stream and refreshes the cache."""
    from ..testing import ScriptedServer

    with tempfile.TemporaryDirectory() as workdir:
        server = ScriptedServer(workdir, name="demo-server", extra_args=["--ttl-ms", "60000"])
        print("starting it again over streamable HTTP on 127.0.0.1 ...")
        with server.http_server() as http, Client.start(http.spec(), name="demo-http") as client:
            status = client.await_ready(timeout=15)
            print(
                f"status: state={status.state} era={status.era} version={status.version} "
                f"url={http.url}"
            )
            notes: queue.Queue[Any] = queue.Queue()
            client.subscribe_notifications(notes)
            tools = client.list_all_tools()
            client.list_all_tools()
            fetched = len(server.received("tools/list"))
            print(
                f"tools: {len(tools)} listed twice, {fetched} tools/list sent "
                "(ttlMs 60000: the second came from the cache)"
            )
            client.await_listening(timeout=10)
            client.call_tool("add_tool", {"name": "hello_http"})
            note = notes.get(timeout=10)
            print(f"notification: {note.method}")
            while note.method != LIST_REFRESHED:
                note = notes.get(timeout=10)
            found = client.tool("hello_http")
            print(
                f"cache refreshed in the background: tool('hello_http') -> "
                f"{found.name if found else None}"
            )
    print("stopped: the HTTP server is closed.")


def demo_oauth() -> None:
    """One OAuth flow: a 401, discovery, dynamic registration, a person who approves in a
    (scripted) browser, the loopback redirect; then a restarted program refreshes with the
    kept tokens instead of asking the person again."""
    if importlib.util.find_spec("authlib") is None:
        print("skipping OAuth: it needs the oauth extra (pip install -e '.[oauth]' in the clone)")
        return
    import urllib.request

    from .. import FileTokenStore, Http, OAuth
    from ..testing import AuthServerProcess, ScriptedServer

    with tempfile.TemporaryDirectory() as workdir:
        print("starting the test authorization server and the HTTP server it protects ...")
        with (
            AuthServerProcess(f"{workdir}/as", scopes="mcp,offline_access") as auth,
            ScriptedServer(workdir).http_server(require_oauth=auth.issuer) as server,
        ):
            asked: list[str] = []

            def browser(url: str) -> None:
                # Stands in for webbrowser.open: the test server's person approves at once,
                # and the browser follows the redirect to the client's listener.
                asked.append(url)
                print(f"  the person is asked to approve at {url.split('?')[0]}")
                urllib.request.urlopen(auth.approve(url), timeout=10).close()

            store = FileTokenStore(f"{workdir}/tokens.json")
            oauth = OAuth(loopback=True, on_authorize=browser, store=store)
            with Client.start(Http(server.url, auth=oauth), name="demo-oauth") as client:
                client.await_ready(timeout=30)
                result = client.call_tool("add", {"a": 1, "b": 2})
                grants = [e["grant"] for e in auth.events("token")]
                print(
                    f"authorized after the server's 401: {len(auth.clients())} client registered "
                    f"dynamically, tokens by {', '.join(grants)}; add(1, 2) = {result.text}"
                )
            auth.expire_access_tokens()
            oauth = OAuth(loopback=True, on_authorize=browser, store=store)
            with Client.start(Http(server.url, auth=oauth), name="demo-oauth-2") as client:
                client.await_ready(timeout=30)
                client.call_tool("add", {"a": 1, "b": 2})
                grants = [e["grant"] for e in auth.events("token")]
                print(
                    f"restarted with the kept tokens: {grants[-1]}, the person was asked "
                    f"{len(asked)} time{'s' if len(asked) != 1 else ''} in all"
                )
    print("stopped: the authorization server and the HTTP server are closed.")


def demo() -> int:
    """Drive the embedded server over stdio (era, tools, progress, a call), then over HTTP."""
    server = Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--name", "demo-server"])
    print("starting the embedded server as a stdio subprocess, protocol='auto' ...")
    with Client.start(server, name="demo", protocol="auto") as client:
        status = client.await_ready(timeout=15)
        info = client.server_info()
        print(
            f"status: state={status.state} era={status.era} version={status.version} "
            f"origin={status.origin}"
        )
        if info is not None:
            print(f"server: {info.name} {info.version}")
        tools = client.list_all_tools()
        print(f"tools ({len(tools)}): {', '.join(t.name for t in tools)}")
        print("calling progress(steps=3) ...")
        result = client.call_tool(
            "progress",
            {"steps": 3, "delay": 0.05},
            on_progress=lambda p: print(f"  progress {p.progress:g}/{p.total:g} {p.message or ''}"),
        )
        print(f"result: {result.text}")
        total = client.call_tool("add", {"a": 20, "b": 22})
        print(f"add(20, 22) = {total.text}  structured={total.structured_content}")
    print("stopped: the server process is closed.")
    demo_http()
    demo_oauth()
    return 0
