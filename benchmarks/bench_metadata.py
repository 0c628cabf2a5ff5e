"""What typed metadata costs: parsing one ``tools/list`` page, conduit-mcp against the official
``mcp`` 2.3.0 types, with and without icons, titles, annotations and ``_meta``.

Not a timed test: numbers to read side by side (benchmarks/README.md). Both parse the same
decoded JSON (``orjson.loads`` is outside the timing): conduit's
``conduit_mcp.protocol.results.parse_page`` and the official ``ListToolsResult.model_validate``
(pydantic, what its client runs on every page).

    .venv/bin/python benchmarks/bench_metadata.py --tools 200 --repeat 5
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from conduit_mcp.protocol.results import parse_page

PNG = "data:image/png;base64," + "iVBORw0KGgo" * 20


def tool(i: int, metadata: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "name": f"tool_{i}",
        "description": f"Tool number {i}.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "string"}},
            "required": ["a"],
        },
    }
    if metadata:
        item["title"] = f"Tool {i}"
        item["icons"] = [
            {"src": PNG, "mimeType": "image/png", "sizes": ["48x48"]},
            {"src": f"https://example.com/{i}.svg", "mimeType": "image/svg+xml", "theme": "dark"},
            {"src": f"https://example.com/{i}-light.svg", "sizes": ["any"], "theme": "light"},
        ]
        item["annotations"] = {"title": f"T{i}", "readOnlyHint": i % 2 == 0, "openWorldHint": False}
        item["_meta"] = {"example.com/group": i % 7}
    return item


def best_of(repeat: int, rounds: int, fn: Callable[[], Any]) -> float:
    """Best mean seconds per call over ``repeat`` runs of ``rounds`` calls."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = min(best, (time.perf_counter() - started) / rounds)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=200, help="tools on the page")
    parser.add_argument("--rounds", type=int, default=50, help="parses per run")
    parser.add_argument("--repeat", type=int, default=5, help="runs; the best is kept")
    args = parser.parse_args()

    try:
        from mcp.types import ListToolsResult
    except ImportError:  # the test dependency group is not installed
        ListToolsResult = None

    print(f"one tools/list page of {args.tools} tools; best of {args.repeat} x {args.rounds}")
    print(f"{'page':<22} {'conduit-mcp µs':>15} {'official µs':>12} {'ratio':>7}")
    for metadata in (False, True):
        page = {"tools": [tool(i, metadata) for i in range(args.tools)]}
        ours = best_of(args.repeat, args.rounds, lambda page=page: parse_page("tools", page))
        label = "with metadata" if metadata else "without metadata"
        if ListToolsResult is None:
            print(f"{label:<22} {ours * 1e6:>15.0f} {'not installed':>12}")
            continue
        theirs = best_of(
            args.repeat, args.rounds, lambda page=page: ListToolsResult.model_validate(page)
        )
        print(f"{label:<22} {ours * 1e6:>15.0f} {theirs * 1e6:>12.0f} {theirs / ours:>6.2f}x")


if __name__ == "__main__":
    main()
