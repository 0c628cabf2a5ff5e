"""A real server of the Tasks extension (``io.modelcontextprotocol/tasks``): fastmcp-tasks
4.1.4 on fastmcp-slim 4.1.4, for tests/interop/test_interop_tasks.py.

Not a test module. It needs fastmcp-tasks, which cannot sit beside the fastmcp of the other
peer venv: ``make peers`` puts it in ``.peers/fastmcp-tasks-4.1.4``. Run it:

    .peers/fastmcp-tasks-4.1.4/bin/python tests/peers/fastmcp_tasks_peer.py --port 39043

Streamable HTTP at ``/mcp``, bound to 127.0.0.1 only (the modern era: the extension exists
only there). Tools: ``slow(seconds, text)`` (may run as a task, polled every 100 ms),
``must_task(text)`` (runs only as a task), ``ask(question)`` (a task that elicits an answer
mid-run, delivered as the task's ``inputRequests``) and ``quick(text)`` (never a task).
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import timedelta
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension

server = FastMCP("conduit-fastmcp-tasks-peer", version="1.0.0")
server.add_extension(TasksExtension())
POLL = timedelta(milliseconds=100)


@server.tool(task=TaskConfig(mode="optional", poll_interval=POLL))
async def slow(seconds: float, text: str) -> str:
    """Wait ``seconds``, then return ``text``."""
    await asyncio.sleep(seconds)
    return text


@server.tool(task=TaskConfig(mode="required", poll_interval=POLL))
async def must_task(text: str) -> str:
    """Return ``text``, always as a task."""
    await asyncio.sleep(0.3)
    return f"tasked: {text}"


@server.tool(task=TaskConfig(mode="required", poll_interval=POLL))
async def ask(question: str, ctx: Context) -> Any:
    """Ask the client ``question`` (an elicitation for ``{"value": string}``) while running,
    fastmcp-tasks' guard pattern: the leg returns the request, the next leg reads the answer."""
    answered = (ctx.input_responses or {}).get("answer")
    if answered is not None:
        dumped = answered.model_dump() if hasattr(answered, "model_dump") else dict(answered)
        content = dumped.get("content") or {}
        return f"answer: {content.get('value')}"
    schema = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}
    return mcp_types.InputRequiredResult.model_validate(
        {
            "inputRequests": {
                "answer": {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": question, "requestedSchema": schema},
                }
            }
        }
    )


@server.tool
def quick(text: str) -> str:
    """Return ``text`` at once (never a task)."""
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description="fastmcp-tasks 4.1.4 interop peer")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server.run(
        "http",
        show_banner=False,
        host="127.0.0.1",
        port=args.port,
        path="/mcp",
        log_level="WARNING",
    )


if __name__ == "__main__":
    main()
