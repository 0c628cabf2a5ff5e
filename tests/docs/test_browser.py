"""The built site renders in a real browser: headless Chromium (Debian's package, which
``.ci/run`` installs) opens the quickstart and a reference page, served from the built site
on 127.0.0.1, and the page it rendered has its title, the navigation, a code block and the
search box. A screenshot of each is kept in ``artifacts/docs/`` (gitignored) for a person to
look at. Without a Chromium on the PATH the test is skipped, and says so.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "docs"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DEADLINE = 60.0


def find_chromium() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        pytest.skip(f"no Chromium found on the PATH ({', '.join(BROWSERS)}): browser check skipped")
    return found


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(built_site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (search loads its index with fetch, which a
    file:// page may not do)."""
    handler = functools.partial(_Quiet, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def browse(chromium: str, profile: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [
        chromium,
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--hide-scrollbars",
        "--window-size=1280,1000",
        "--virtual-time-budget=3000",  # let the page's scripts run before the DOM is read
        *flags,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE)


@pytest.mark.parametrize(
    ("path", "title", "code"),
    [
        ("quickstart/", "Quickstart - conduit-mcp", "await_ready"),
        ("reference/client/", "Client - conduit-mcp", "conduit_mcp.Client"),
    ],
    ids=["quickstart", "reference"],
)
def test_the_page_renders_in_chromium(
    chromium: str, served: str, tmp_path: Path, path: str, title: str, code: str
) -> None:
    url = f"{served}/{path}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"{path.strip('/').replace('/', '-')}.png"
    shot.unlink(missing_ok=True)
    # One launch: the DOM after the page's scripts ran, and a screenshot of it.
    done = browse(chromium, tmp_path / "profile", url, "--dump-dom", f"--screenshot={shot}")
    assert done.returncode == 0, done.stderr[-2000:]
    html = done.stdout
    assert f"<title>{title}</title>" in html
    assert 'class="md-nav' in html and "Quickstart" in html and "Reference" in html, "no nav"
    assert "<pre" in html and "<code" in html and "highlight" in html, "no code block"
    assert code in html
    assert 'data-md-component="search-query"' in html, "no search box"
    assert shot.stat().st_size > 10_000, "the screenshot is (nearly) empty"
