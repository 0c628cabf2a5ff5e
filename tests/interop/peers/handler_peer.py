"""A real MCP peer on the official ``mcp`` 2.3.0 server whose tools ask the client for input.

Not a test module (pytest does not enter ``peers`` folders). Run it:

    .venv/bin/python tests/interop/peers/handler_peer.py stdio
    .venv/bin/python tests/interop/peers/handler_peer.py http --port 39031   # http://127.0.0.1:39031/mcp

The tools use the SDK's resolvers (``Annotated[T, Resolve(fn)]`` with ``Elicit``, ``Sample`` and
``ListRoots`` markers), so the SDK picks the transport by the negotiated era: a 2026-07-28
request is answered ``resultType: "input_required"`` and resumed when the client retries with
``inputResponses`` and the echoed ``requestState``; a handshake-era (2025-11-25) session gets a
standalone ``elicitation/create`` / ``sampling/createMessage`` / ``roots/list`` request in the
middle of the call. Either way, what the tool returns shows what the client answered.

Tools:

* ``book_table(party)``: elicits a ``Contact`` (name, email); a declined or cancelled answer
  makes the call fail (``isError``, "elicitation was decline").
* ``confirm(question)``: elicits a yes/no and returns the outcome: ``accepted: yes|no``,
  ``declined`` or ``cancelled``.
* ``two_questions()``: two independent elicitations in one round (modern: two
  ``inputRequests`` entries), returns ``"<colour> <number>"``.
* ``summarize(text)``: samples the client's model, returns ``"<model>: <text>"``.
* ``client_roots()``: the client's roots as a JSON list of ``[uri, name]``.
* ``plan_trip(city)``: samples with a tool (``get_weather``, ``toolChoice: auto``; needs the
  client's ``sampling.tools``) and returns ``"<stopReason>: <name>(<input JSON>)"`` for a
  ``tool_use`` answer, ``"<stopReason>: <text>"`` otherwise.

Modern only (hand-rolled rounds: the function returns an ``InputRequiredResult`` itself and
reads the answer from ``ctx.input_responses`` on the retry, which must echo
``requestState``): the prompt ``welcome(guest)`` asks for a nickname and answers one user
message ``"Welcome <guest>, alias <nickname> (state <state>)"``; the resource template
``peer://secret/{name}`` asks for a password and reads ``"<name> unlocked with <password>"``.
In the legacy era both fail (there is no round to answer).
"""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Annotated

from mcp.server.elicitation import (
    AcceptedElicitation,
    DeclinedElicitation,
    ElicitationResult,
)
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp_types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
    SamplingMessage,
    TextContent,
    Tool,
    ToolChoice,
    ToolUseContent,
)
from pydantic import BaseModel, Field

warnings.filterwarnings("ignore", message=".*SEP-2577.*")

server = MCPServer(
    "conduit-handler-peer",
    version="1.0.0",
    instructions="Interop peer for conduit-mcp's handler (mcp 2.3.0).",
    log_level="WARNING",
)


class Contact(BaseModel):
    name: str = Field(description="Who the table is for")
    email: str = Field(description="Where to send the confirmation")


class Confirm(BaseModel):
    yes: bool = Field(description="Go ahead?")


class Colour(BaseModel):
    colour: str


class Number(BaseModel):
    number: int


def ask_contact(party: int) -> Elicit[Contact]:
    return Elicit(f"Who is the table for {party} for?", Contact)


async def ask_confirm(question: str) -> Elicit[Confirm]:
    return Elicit(question, Confirm)


def ask_colour() -> Elicit[Colour]:
    return Elicit("Pick a colour", Colour)


def ask_number() -> Elicit[Number]:
    return Elicit("Pick a number", Number)


def ask_model(text: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))],
        max_tokens=64,
        system_prompt="Be brief.",
    )


WEATHER = Tool(
    name="get_weather",
    description="The weather in a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def ask_model_with_tools(city: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=f"Trip to {city}?"))],
        max_tokens=64,
        tools=[WEATHER],
        tool_choice=ToolChoice(mode="auto"),
    )


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def book_table(party: int, contact: Annotated[Contact, Resolve(ask_contact)]) -> str:
    """Book a table; asks the user who it is for."""
    return f"booked a table for {party}: {contact.name} <{contact.email}>"


@server.tool()
def confirm(
    question: str, answer: Annotated[ElicitationResult[Confirm], Resolve(ask_confirm)]
) -> str:
    """Ask a yes/no question; returns what the user did."""
    if isinstance(answer, AcceptedElicitation):
        return f"accepted: {'yes' if answer.data.yes else 'no'}"
    if isinstance(answer, DeclinedElicitation):
        return "declined"
    return "cancelled"


@server.tool()
def two_questions(
    colour: Annotated[Colour, Resolve(ask_colour)], number: Annotated[Number, Resolve(ask_number)]
) -> str:
    """Two questions at once."""
    return f"{colour.colour} {number.number}"


@server.tool()
def summarize(text: str, sampled: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Summarize `text` with the client's model."""
    content = sampled.content
    said = content.text if isinstance(content, TextContent) else repr(content)
    return f"{sampled.model}: {said}"


@server.tool()
def plan_trip(
    city: str, sampled: Annotated[CreateMessageResultWithTools, Resolve(ask_model_with_tools)]
) -> str:
    """Plan a trip with the client's model, which may call get_weather."""
    blocks = sampled.content if isinstance(sampled.content, list) else [sampled.content]
    said = []
    for block in blocks:
        if isinstance(block, ToolUseContent):
            said.append(f"{block.name}({json.dumps(block.input, sort_keys=True)})")
        elif isinstance(block, TextContent):
            said.append(block.text)
    return f"{sampled.stop_reason}: {' '.join(said)}"


@server.tool()
def client_roots(roots: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """The client's roots."""
    return json.dumps([[str(r.uri), r.name] for r in roots.roots])


def _ask_form(message: str, field: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _answer(ctx: Context, key: str, field: str) -> str | None:
    """The form answer to ``key`` if this is the retry (``None`` on the first request)."""
    answer = (ctx.input_responses or {}).get(key)
    if isinstance(answer, ElicitResult) and answer.action == "accept" and answer.content:
        return str(answer.content[field])
    return None


@server.prompt()
def welcome(guest: str, ctx: Context) -> str | InputRequiredResult:
    """Welcome a guest; asks the user for the guest's nickname first (modern rounds)."""
    nickname = _answer(ctx, "nickname", "nickname")
    if nickname is None:
        return InputRequiredResult(
            input_requests={"nickname": _ask_form(f"Nickname for {guest}?", "nickname")},
            request_state=f"welcome:{guest}",
        )
    return f"Welcome {guest}, alias {nickname} (state {ctx.request_state})"


@server.resource("peer://secret/{name}", mime_type="text/plain")
def secret(name: str, ctx: Context) -> str | InputRequiredResult:
    """A locked document; asks the user for its password first (modern rounds)."""
    password = _answer(ctx, "password", "password")
    if password is None:
        return InputRequiredResult(
            input_requests={"password": _ask_form(f"Password for {name}?", "password")},
            request_state=f"secret:{name}",
        )
    return f"{name} unlocked with {password}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("transport", choices=["stdio", "http"], nargs="?", default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=39031)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port, streamable_http_path="/mcp")


if __name__ == "__main__":
    main()
