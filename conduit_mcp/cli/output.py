"""What the command line prints: readable tables and text by default, raw JSON for scripts.

Pure functions from results to text (so they are tested without a server), and the progress
bar drawn on stderr while a tool runs.

>>> print(table([("add", "Add two numbers."), ("echo", "")], ("NAME", "DESCRIPTION")))
NAME  DESCRIPTION
add   Add two numbers.
echo
>>> first_line("  Adds.\\n\\n  Longer text.")
'Adds.'
>>> content_text([{"type": "text", "text": "hi"}, {"type": "image", "mimeType": "image/png",
...                                                "data": "aGk="}])
'hi\\n[image image/png, 4 bytes base64]'
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from ..types import GetPromptResult, Progress, Prompt, ReadResourceResult, Resource, Tool

JSON = Any


def dumps(value: JSON) -> str:
    """Indented JSON; anything JSON cannot hold is shown as its ``str``."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def first_line(text: str | None) -> str:
    """The first non-empty line of a description (the rest is for ``--json``)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def table(rows: Iterable[Sequence[str]], header: Sequence[str]) -> str:
    """Left-aligned columns, two spaces apart, no trailing blanks."""
    body = [list(header), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in body) for i in range(len(header))]
    lines = []
    for row in body:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def tools_table(tools: Sequence[Tool]) -> str:
    if not tools:
        return "(no tools)"
    return table(
        ((t.name, first_line(t.description or t.title)) for t in tools), ("NAME", "DESCRIPTION")
    )


def prompts_table(prompts: Sequence[Prompt]) -> str:
    if not prompts:
        return "(no prompts)"

    def arguments(p: Prompt) -> str:
        names = []
        for a in p.arguments:
            name = str(a.get("name", "?")) if isinstance(a, dict) else "?"
            names.append(name if isinstance(a, dict) and a.get("required") else f"[{name}]")
        return " ".join(names)

    return table(
        ((p.name, arguments(p), first_line(p.description)) for p in prompts),
        ("NAME", "ARGUMENTS", "DESCRIPTION"),
    )


def resources_table(resources: Sequence[Resource], templates: Sequence[Any]) -> str:
    rows = [(r.uri, r.name, r.mime_type or "", first_line(r.description)) for r in resources]
    rows += [
        (t.uri_template, t.name, t.mime_type or "", first_line(t.description)) for t in templates
    ]
    if not rows:
        return "(no resources)"
    return table(rows, ("URI", "NAME", "MIME TYPE", "DESCRIPTION"))


def content_text(content: Iterable[JSON]) -> str:
    """A result's content as text: text items as they are, the others as a one-line note."""
    parts = []
    for item in content:
        if not isinstance(item, dict):
            parts.append(str(item))
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind in ("image", "audio"):
            data = item.get("data") or ""
            parts.append(f"[{kind} {item.get('mimeType', '')}, {len(data)} bytes base64]")
        elif kind == "resource":
            parts.append(resource_text(item.get("resource") or {}))
        elif kind == "resource_link":
            parts.append(f"[resource link {item.get('uri', '')}]")
        else:
            parts.append(f"[{kind} content]")
    return "\n".join(parts)


def resource_text(contents: JSON) -> str:
    if not isinstance(contents, dict):
        return str(contents)
    if "text" in contents:
        return str(contents["text"])
    blob = contents.get("blob") or ""
    return (
        f"[blob {contents.get('mimeType', '')} {contents.get('uri', '')}, {len(blob)} bytes base64]"
    )


def read_text(result: ReadResourceResult) -> str:
    return "\n".join(resource_text(c) for c in result.contents)


def prompt_text(result: GetPromptResult) -> str:
    lines = [f"# {result.description}"] if result.description else []
    for message in result.messages:
        role = message.get("role", "?") if isinstance(message, dict) else "?"
        content = message.get("content") if isinstance(message, dict) else None
        items = content if isinstance(content, list) else [content]
        lines.append(f"{role}: {content_text(items)}")
    return "\n".join(lines)


class ProgressBar:
    """Draws ``notifications/progress`` on stderr: one redrawn line on a terminal, a line per
    update otherwise (a log file gets every step). Runs in the caller's thread (on_progress)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.drawn = False
        self.tty = bool(getattr(stream, "isatty", lambda: False)())

    def __call__(self, p: Progress) -> None:
        if p.total:
            share = min(max(p.progress / p.total, 0.0), 1.0)
            filled = int(share * 20)
            amount = f"[{'#' * filled}{'.' * (20 - filled)}] {p.progress:g}/{p.total:g}"
        else:
            amount = f"{p.progress:g}"
        line = f"progress {amount}" + (f" {p.message}" if p.message else "")
        if self.tty:
            width = shutil.get_terminal_size((80, 24)).columns - 1
            self.stream.write("\r" + line[:width].ljust(width))
            self.drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        """End the redrawn line, so what follows starts on its own line."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False
