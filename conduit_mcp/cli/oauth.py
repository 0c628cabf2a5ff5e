"""``--oauth`` and ``logout``: the desktop OAuth flow from a shell, with tokens kept per user.

``conduit-mcp tools --url URL --oauth`` starts ``OAuth(loopback=True)``: the client runs the
redirect listener on 127.0.0.1, this module prints the authorization URL on stderr (a
headless shell's user opens it elsewhere) and opens it with :mod:`webbrowser` (which honours
``BROWSER``). Tokens and the client's registration go to one :class:`FileTokenStore` in the
user's data directory, so the next command refreshes instead of asking again;
``conduit-mcp logout --url URL`` forgets that server's tokens (README, "From the command
line").

The data directory is found by hand (``platformdirs`` is not a dependency): the XDG base
directory rule, ``$XDG_DATA_HOME`` when it is an absolute path, else ``~/.local/share``; the
store is ``conduit-mcp/tokens.json`` there, the directory created owner-only (0700), the
file 0600 (the store's own rule).
"""

from __future__ import annotations

import argparse
import os
import threading
import webbrowser
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

APP_DIR = "conduit-mcp"
STORE_FILE = "tokens.json"


def data_dir(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
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
    return FileTokenStore(path)


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
            on_authorize=BrowserOpener(err, browser=not args.no_browser),
            store=_store(create=True),
            client_id=args.client_id,
            client_secret=secret,
            scopes=scopes,
        )
    except Error as exc:  # the extra is missing (its message says how to install it)
        raise UsageError(exc.message) from None


class BrowserOpener:
    """``on_authorize`` for a shell: the URL on stderr, then :func:`webbrowser.open`.

    It runs on the client's worker thread (bounded there). The URL is printed even when a
    browser opens: on a headless or remote shell the person opens it on another machine.
    """

    def __init__(self, err: TextIO, *, browser: bool) -> None:
        self.err = err
        self.browser = browser
        self._lock = threading.Lock()

    def __call__(self, url: str) -> None:
        minutes = f"{AUTHORIZE_WAIT / 60:g}"
        with self._lock:
            self.err.write(
                "conduit-mcp: the server needs your authorization; open this URL in a browser "
                f"(waiting up to {minutes} minutes):\n  {url}\n"
            )
            self.err.flush()
        if self.browser and not _open(url):
            with self._lock:
                self.err.write(
                    "conduit-mcp: no browser could be opened here; open the URL on a machine "
                    "whose browser can reach this one's 127.0.0.1\n"
                )
                self.err.flush()


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
