"""Client capabilities derived from the handler's methods, merged with the ``capabilities``
option: pure, no threads."""

from __future__ import annotations

from typing import Any

import pytest

from conduit_mcp.errors import Error
from conduit_mcp.handler import Handler, HandlerContext
from conduit_mcp.handler_types import ElicitRequest, SamplingRequest
from conduit_mcp.protocol.client_caps import (
    check_elicitation_modes,
    client_capabilities,
    for_handler,
)


class Everything(Handler):
    elicitation_modes = ("form", "url")

    def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
        return None

    async def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
        return None

    def list_roots(self, ctx: HandlerContext) -> Any:
        return []


class OnlyLogs(Handler):
    def handle_log(self, level: str, data: Any, logger: str | None, ctx: HandlerContext) -> None:
        pass


def test_each_implemented_method_declares_its_capability() -> None:
    assert for_handler(Everything()) == {
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
        "roots": {"listChanged": True},
    }


def test_a_handler_that_only_listens_declares_nothing() -> None:
    assert OnlyLogs.implemented_methods() == frozenset({"handle_log"})
    assert for_handler(OnlyLogs()) == {}
    assert for_handler(None) == {}
    assert for_handler(None, {"experimental": {"x": {}}}) == {"experimental": {"x": {}}}


def test_form_is_the_default_mode_and_url_only_is_allowed() -> None:
    class Form(Handler):
        def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
            return None

    class Url(Form):
        elicitation_modes = ("url",)

    assert for_handler(Form()) == {"elicitation": {"form": {}}}
    assert for_handler(Url()) == {"elicitation": {"url": {}}}


def test_the_option_merges_over_the_derived_ones() -> None:
    caps = for_handler(Everything(), {"sampling": {"tools": {}}, "roots": {"listChanged": True}})
    assert caps["sampling"] == {"tools": {}}
    assert caps["roots"] == {"listChanged": True}
    assert caps["elicitation"] == {"form": {}, "url": {}}


def test_the_option_does_not_mutate_its_inputs() -> None:
    declared = {"sampling": {"tools": {}}}
    client_capabilities({"create_message"}, ("form",), declared)
    assert declared == {"sampling": {"tools": {}}}


@pytest.mark.parametrize(
    ("capability", "method"),
    [("sampling", "create_message"), ("elicitation", "elicit"), ("roots", "list_roots")],
)
def test_declaring_a_capability_without_its_method_is_a_config_error(
    capability: str, method: str
) -> None:
    with pytest.raises(Error) as info:
        for_handler(OnlyLogs(), {capability: {}})
    assert (info.value.kind, info.value.reason) == ("config", "capabilities")
    assert f"Handler.{method}" in info.value.message
    with pytest.raises(Error):
        for_handler(None, {capability: {}})


def test_declaring_an_elicitation_mode_the_handler_lacks_is_a_config_error() -> None:
    class Form(Handler):
        def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
            return None

    with pytest.raises(Error) as info:
        for_handler(Form(), {"elicitation": {"url": {}}})
    assert info.value.reason == "capabilities"
    assert "elicitation_modes" in info.value.message


@pytest.mark.parametrize("modes", [(), "form", ("form", "sms"), 3])
def test_bad_elicitation_modes_are_a_handler_config_error(modes: Any) -> None:
    with pytest.raises(Error) as info:
        check_elicitation_modes(modes)
    assert (info.value.kind, info.value.reason) == ("config", "handler")


@pytest.mark.parametrize("value", [object(), Everything, {"create_message": None}])
def test_a_handler_that_is_not_a_handler_instance_is_a_config_error(value: Any) -> None:
    with pytest.raises(Error) as info:
        for_handler(value)
    assert (info.value.kind, info.value.reason) == ("config", "handler")
    assert "conduit_mcp.Handler" in info.value.message
