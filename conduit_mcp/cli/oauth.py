"""``--oauth`` and ``logout``: the desktop OAuth flow from a shell, with tokens kept per user.

``conduit-mcp tools --url URL --oauth`` starts ``OAuth(loopback=True)``: the client runs the
redirect listener on 127.0.0.1, this module prints the authorization URL on stderr (a
headless shell's user opens it elsewhere) and opens it with :mod:`webbrowser` (which honours
``BROWSER``). Tokens and the client's registration go to one :class:`FileTokenStore` in the
user's data directory, so the next command refreshes instead of asking again;
``conduit-mcp logout --url URL`` forgets that server's tokens (docs/cli.md).

The data directory is found by hand (``platformdirs`` is not a dependency): the XDG base
directory rule, ``$XDG_DATA_HOME`` when it is an absolute path, else ``~/.local/share``; the
store is ``conduit-mcp/tokens.json`` there, the directory created owner-only (0700), the
file 0600 (the store's own rule).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import webbrowser
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..errors import Error
from .parser import EXIT_OK, UsageError

if TYPE_CHECKING:
    from ..oauth.config import OAuth
    from ..oauth.store import FileTokenStore

#: How long a command waits for a person to authorize in the browser (seconds): the loopback
#: listener's own window (docs/connection.md, "Authorizing"), after which the client closes.
AUTHORIZE_WAIT = 300.0
#: How many pasted lines are tried, and how long one may be (characters).
MAX_PASTES = 5
MAX_PASTE = 16 * 1024

APP_DIR = "conduit-mcp"
STORE_FILE = "tokens.json"


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's data directory for conduit-mcp (the XDG base directory rule, by hand).

    >>> str(data_dir({"XDG_DATA_HOME": "/x/data", "HOME": "/home/ada"}))
    '/x/data/conduit-mcp'
    >>> str(data_dir({"XDG_DATA_HOME": "relative", "HOME": "/home/ada"}))
    '/home/ada/.local/share/conduit-mcp'
    """
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):  # the spec: a relative path is invalid and is ignored
        home = env.get("HOME") or str(Path.home())
        base = os.path.join(home, ".local", "share")
    return Path(base) / APP_DIR


def store_path() -> Path:
    """Where ``--oauth`` keeps tokens: ``<data dir>/conduit-mcp/tokens.json``."""
    return data_dir() / STORE_FILE


def _store(create: bool) -> FileTokenStore:
    from ..oauth.store import FileTokenStore

    path = store_path()
    if create:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"cannot create the token store's directory {str(path.parent)!r} "
                f"({exc.strerror or type(exc).__name__})",
                "set XDG_DATA_HOME to a writable directory",
            ) from None
    store = FileTokenStore(path)
    if path.exists():
        try:
            store.keys()  # a file that is no store is said now, not warned about later
        except Error as exc:
            raise UsageError(
                exc.message, f"move {str(path)!r} away (it is never overwritten)"
            ) from None
    return store


def check_options(args: argparse.Namespace) -> None:
    """``--client-id``, ``--client-secret-env``, ``--scope`` and ``--no-browser`` belong to
    ``--oauth``; ``--oauth`` replaces ``--bearer`` and an ``Authorization`` header."""
    given = [
        name
        for name, present in (
            ("--client-id", args.client_id is not None),
            ("--client-secret-env", args.client_secret_env is not None),
            ("--scope", bool(args.scope)),
            ("--no-browser", args.no_browser),
        )
        if present
    ]
    if given and not args.oauth:
        raise UsageError(
            f"{' and '.join(given)} {'go' if len(given) > 1 else 'goes'} with --oauth",
            "add --oauth to authorize in a browser",
        )
    if args.client_secret_env is not None and args.client_id is None:
        raise UsageError(
            "--client-secret-env is the secret of a pre-registered --client-id; give the id too"
        )


def oauth_of(args: argparse.Namespace, err: TextIO) -> OAuth:
    """The ``OAuth`` the options describe: loopback, the per-user file store, and an
    ``on_authorize`` that prints the URL and opens the browser."""
    from ..oauth.config import OAuth

    secret = None
    if args.client_secret_env is not None:
        secret = os.environ.get(args.client_secret_env)
        if not secret:
            # The name is the user's own; the value is never echoed.
            raise UsageError(
                f"--client-secret-env {args.client_secret_env}: that environment variable "
                "is not set or is empty",
                f"export {args.client_secret_env}=... first (the secret never goes on the "
                "command line)",
            )
    scopes = tuple(s for item in args.scope for s in item.replace(",", " ").split()) or None
    try:
        return OAuth(
            loopback=True,
            on_authorize=BrowserOpener(err, browser=not args.no_browser, paste=pastes(args)),
            store=_store(create=True),
            client_id=args.client_id,
            client_secret=secret,
            scopes=scopes,
        )
    except Error as exc:  # the extra is missing (its message says how to install it)
        raise UsageError(exc.message) from None


def can_open_browser(
    environ: Mapping[str, str] | None = None, platform: str = sys.platform
) -> bool:
    """Whether a browser can show a page to the person at this shell.

    With ``BROWSER`` set, or on macOS and Windows, yes. Elsewhere a shell without ``DISPLAY``
    or ``WAYLAND_DISPLAY`` is headless (ssh, a container), where :mod:`webbrowser` would fall
    back to a console browser (lynx, w3m) that takes the terminal over: nothing is opened.

    >>> can_open_browser({}, "linux"), can_open_browser({"DISPLAY": ":0"}, "linux")
    (False, True)
    >>> can_open_browser({"BROWSER": "firefox"}, "linux"), can_open_browser({}, "darwin")
    (True, True)
    """
    env = os.environ if environ is None else environ
    if env.get("BROWSER") or platform in ("darwin", "win32"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def pastes(args: argparse.Namespace) -> bool:
    """Whether the person may paste the redirect's URL at this shell: its stdin is a
    terminal, and is not the tool's arguments (``call TOOL -``)."""
    if getattr(args, "arguments", None) == "-":
        return False
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # a closed stdin
        return False


class BrowserOpener:
    """``on_authorize`` for a shell: the URL on stderr, then :func:`webbrowser.open`.

    It runs on the client's worker thread (bounded there). The URL is printed even when a
    browser opens: on a headless or remote shell the person opens it on another machine,
    and where the page it ends on (this machine's 127.0.0.1) does not load, pastes that
    page's URL at the prompt (``paste``; :class:`PasteReader`).
    """

    def __init__(self, err: TextIO, *, browser: bool, paste: bool = False) -> None:
        self.err = err
        self.browser = browser
        self.paste = paste
        self._lock = threading.Lock()

    def __call__(self, url: str) -> None:
        minutes = f"{AUTHORIZE_WAIT / 60:g}"
        self._say(
            "the server needs your authorization; open this URL in a browser "
            f"(waiting up to {minutes} minutes):\n  {url}"
        )
        if self.paste:
            self._say(
                "if the page it ends on does not load (a browser on another machine cannot "
                "reach this one's 127.0.0.1), paste that page's whole URL here and press Enter"
            )
        if not self.browser:
            return
        if not can_open_browser():
            self._say("no browser here (no DISPLAY and no BROWSER): open the URL elsewhere")
        elif not _open(url):
            self._say("no browser could be opened: open the URL elsewhere")

    def _say(self, text: str) -> None:
        with self._lock:
            self.err.write(f"conduit-mcp: {text}\n")
            self.err.flush()


class PasteReader:
    """Reads the redirect's URL the person pastes at the terminal and hands it to
    ``Client.authorize`` (a daemon thread: the command ends without it, whoever completes
    the authorization first). A refused paste (a typo, another authorization's URL) says so
    and lets the person try again, at most :data:`MAX_PASTES` times."""

    def __init__(self, authorize: Callable[[str], None], err: TextIO) -> None:
        self._authorize = authorize
        self._err = err
        self._thread = threading.Thread(target=self._run, name="conduit-mcp-paste", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        for _ in range(MAX_PASTES):
            try:
                line = sys.stdin.readline(MAX_PASTE)
            except (OSError, ValueError):
                return
            if not line:
                return  # end of input
            text = line.strip()
            if not text:
                continue
            try:
                self._authorize(text)
                return
            except Error as exc:  # its message never quotes the URL
                self._err.write(f"conduit-mcp: that URL was refused: {exc}; paste it again\n")
                self._err.flush()


def _open(url: str) -> bool:
    try:
        return bool(webbrowser.open(url))
    except webbrowser.Error:
        return False


def logout(url: str, out: TextIO) -> int:
    """Forget every token kept for the server at ``url`` (a resource that is the URL or a
    parent of it on the same origin); its client registration stays. Nothing is sent."""
    path = store_path()
    if not path.exists():
        out.write(f"no tokens kept for {_shown(url)} (no token store at {path})\n")
        return EXIT_OK
    try:
        from ..oauth.discovery import resource_matches
    except ImportError:
        raise UsageError(
            "logout needs the oauth extra",
            f"pip install -e '.[oauth]' from a clone; or delete {path}",
        ) from None
    from ..oauth.store import tokens_key_parts

    store = _store(create=False)
    forgotten = 0
    for key in store.keys():  # noqa: SIM118 (a token store, not a dict)
        parts = tokens_key_parts(key)
        if parts is not None and resource_matches(parts[2], url):
            store.delete(key)
            forgotten += 1
    if forgotten:
        out.write(
            f"forgot {forgotten} token set{'s' if forgotten != 1 else ''} for {_shown(url)}\n"
        )
    else:
        out.write(f"no tokens kept for {_shown(url)}\n")
    return EXIT_OK


def _shown(url: str) -> str:
    from .target import redacted

    return redacted(url)
