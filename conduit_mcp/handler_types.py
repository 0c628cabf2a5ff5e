"""The values a :class:`~conduit_mcp.Handler` method receives and returns.

A server asks the client to sample (``sampling/createMessage``), to ask the user
(``elicitation/create``) or for its roots (``roots/list``): in the legacy era as a JSON-RPC
request, in the modern era as an ``inputRequests`` entry of an ``input_required`` result.
Either way the handler method gets a :class:`SamplingRequest` or an :class:`ElicitRequest` and
answers with a :class:`SamplingResult`, an :class:`ElicitResult` or :class:`Root` values (or
the plain JSON the protocol defines). :mod:`conduit_mcp.protocol.serving` converts both ways
and checks the answer.

Every value is frozen, and its ``repr`` never shows what it carries: the messages to sample,
the sampled text, the question put to the user and the user's answer are the user's data
(docs/connection.md, "Crash reports"). The fields hold them; ``repr`` shows their shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

from .errors import Error

__all__ = [
    "ElicitAction",
    "ElicitRequest",
    "ElicitResult",
    "Root",
    "SamplingRequest",
    "SamplingResult",
]

JSON = dict[str, Any]
ElicitAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True, repr=False)
class SamplingRequest:
    """A server's ``sampling/createMessage``: it asks the client's model for a message.

    ``messages`` are the protocol's ``SamplingMessage`` objects as sent (``role`` and
    ``content``); ``tools`` and ``tool_choice`` come only to a client that declared
    ``sampling: {"tools": {}}``. ``raw`` is the whole params object.

    >>> r = SamplingRequest([{"role": "user", "content": {"type": "text", "text": "hi"}}], 50)
    >>> r.max_tokens, r
    (50, <SamplingRequest messages=1 max_tokens=50>)
    """

    messages: list[JSON]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: list[str] | None = None
    model_preferences: JSON | None = None
    include_context: str | None = None
    metadata: JSON | None = None
    tools: list[JSON] | None = None
    tool_choice: JSON | None = None
    raw: JSON = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<SamplingRequest messages={len(self.messages)} max_tokens={self.max_tokens}>"


@dataclass(frozen=True, slots=True, repr=False)
class SamplingResult:
    """What ``create_message`` answers: the sampled message and the model that wrote it.

    Give ``text`` for a text message, or ``content`` for any other (one content block, or a
    list of them such as ``tool_use`` blocks when sampling with tools); ``model`` is required.
    The ``repr`` shows the model, never the text.

    >>> r = SamplingResult("Paris", model="m-1")
    >>> r.content, r.role, r.stop_reason
    ({'type': 'text', 'text': 'Paris'}, 'assistant', 'endTurn')
    >>> r
    <SamplingResult model='m-1'>
    >>> SamplingResult(model="m-1")
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: argument (content): SamplingResult needs text or content
    """

    text: str | None = None
    _: KW_ONLY
    content: JSON | list[JSON] | None = None
    model: str
    role: str = "assistant"
    stop_reason: str | None = "endTurn"

    def __post_init__(self) -> None:
        if self.text is not None and self.content is not None:
            raise Error("argument", "content", "SamplingResult takes text or content, not both")
        if self.text is not None:
            if not isinstance(self.text, str):
                raise Error("argument", "text", "SamplingResult text must be a str")
            object.__setattr__(self, "content", {"type": "text", "text": self.text})
        elif self.content is None:
            raise Error("argument", "content", "SamplingResult needs text or content")
        if not isinstance(self.model, str) or not self.model:
            raise Error("argument", "model", "SamplingResult model must be a non-empty str")

    def __repr__(self) -> str:
        return f"<SamplingResult model={self.model!r}>"


@dataclass(frozen=True, slots=True, repr=False)
class ElicitRequest:
    """A server's ``elicitation/create``: it asks the user for something.

    ``mode`` is ``"form"`` (answer ``requested_schema``, a flat JSON Schema object, with
    :meth:`ElicitResult.accept`) or ``"url"`` (send the user to ``url``; the server learns
    the outcome itself, and in the legacy era says so with
    ``notifications/elicitation/complete`` for ``elicitation_id``). A handler gets only the
    modes its ``elicitation_modes`` declares. ``raw`` is the whole params object.

    >>> ElicitRequest("form", "Your name?", {"type": "object", "properties": {}})
    <ElicitRequest form>
    """

    mode: Literal["form", "url"]
    message: str
    requested_schema: JSON | None = None
    url: str | None = None
    elicitation_id: str | None = None
    raw: JSON = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"<ElicitRequest {self.mode}>"


_ACTIONS = ("accept", "decline", "cancel")


@dataclass(frozen=True, slots=True, repr=False)
class ElicitResult:
    """What ``elicit`` answers: the user accepted (with ``content``, the form's values),
    declined, or cancelled (dismissed without choosing). A decline is an answer, not an
    error. The ``repr`` shows the action, never the content.

    >>> ElicitResult.accept({"name": "octocat"})
    <ElicitResult accept>
    >>> ElicitResult.decline().content is None
    True
    >>> ElicitResult("maybe")
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: argument (action): ElicitResult action must be accept, decline or cancel
    """

    action: ElicitAction
    content: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            raise Error(
                "argument", "action", "ElicitResult action must be accept, decline or cancel"
            )
        if self.content is not None and self.action != "accept":
            raise Error("argument", "content", "only an accepted ElicitResult carries content")

    @classmethod
    def accept(cls, content: Mapping[str, Any] | None = None) -> ElicitResult:
        """The user answered: ``content`` maps each field of the requested schema to a
        string, number, boolean or list of strings (none for a URL-mode elicitation).

        >>> ElicitResult.accept({"name": "ada"}).content, ElicitResult.accept()
        ({'name': 'ada'}, <ElicitResult accept>)
        """
        return cls("accept", dict(content) if content is not None else None)

    @classmethod
    def decline(cls) -> ElicitResult:
        """The user explicitly refused to answer.

        >>> ElicitResult.decline().action
        'decline'
        """
        return cls("decline")

    @classmethod
    def cancel(cls) -> ElicitResult:
        """The user dismissed the question without choosing.

        >>> ElicitResult.cancel().action
        'cancel'
        """
        return cls("cancel")

    def __repr__(self) -> str:
        return f"<ElicitResult {self.action}>"


@dataclass(frozen=True, slots=True, repr=False)
class Root:
    """One of the client's roots: a ``file://`` URI the server may work under, and an
    optional display name. The ``repr`` shows the name only (a path is host data).

    >>> Root("file:///home/me/project", "project")
    <Root name='project'>
    """

    uri: str
    name: str | None = None

    def __repr__(self) -> str:
        return f"<Root name={self.name!r}>"
