"""protocol.metadata: icons, titles, annotations and ``_meta`` from hostile JSON, no threads.

The rule under test: metadata is dropped, never failed, and bounded. Every hostile shape
leaves the item (and its page) readable, every limit holds at its edge, and an icon a client
holds is never of an unsafe scheme.
"""

from __future__ import annotations

import dataclasses
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import conduit_mcp as mcp
from conduit_mcp.protocol.metadata import (
    MAX_ICON_SIZES,
    MAX_ICON_SRC,
    MAX_ICONS,
    MAX_LAST_MODIFIED,
    MAX_MIME_TYPE,
    MAX_WEBSITE_URL,
    icon_src_ok,
    parse_annotations,
    parse_icon,
    parse_icons,
    parse_tool_annotations,
    parse_website_url,
)
from conduit_mcp.protocol.results import parse_page, parse_server_info

pytestmark = pytest.mark.timeout(30)

PNG = "https://example.com/icon.png"
DATA_PNG = "data:image/png;base64,iVBORw0KGgo="

# -- icon URIs: the spec's security considerations ---------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        PNG,
        "HTTPS://EXAMPLE.COM/I.PNG",
        "https://example.com:8443/a/b.svg?v=2#frag",
        "https://[::1]/icon.png",
        DATA_PNG,
        "data:image/svg+xml,%3Csvg%20xmlns%3D%22http%3A%2F%2Fwww.w3.org%2F2000%2Fsvg%22%2F%3E",
        "data:image/webp;charset=binary;base64,UklGRg==",
        "DATA:IMAGE/PNG;BASE64,iVBORw0KGgo=",
    ],
)
def test_safe_icon_uris_are_kept(src: str) -> None:
    assert icon_src_ok(src)
    assert parse_icons([{"src": src}])[0].src == src


@pytest.mark.parametrize(
    "src",
    [
        "http://example.com/icon.png",  # https only
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "file:///etc/passwd",
        "ftp://example.com/i.png",
        "ws://example.com/i.png",
        "vscode://open?x",
        "//example.com/i.png",  # scheme-relative
        "/icon.png",
        "icon.png",
        "https:/example.com/i.png",
        "https:example.com",
        "https://",
        "https://user:pw@example.com/i.png",  # credentials would travel with the fetch
        "https://user@example.com/i.png",
        "https://example.com:99999/i.png",
        "https://example.com:port/i.png",
        "https://exa mple.com/i.png",
        "https://example.com/i.png\n",
        "https://example.com\\@evil.test/i.png",
        "https://exаmple.com/i.png",  # a Cyrillic a: no IRIs
        "https://\u212aelvin.example/i.png",  # the Kelvin sign folds to k under IGNORECASE
        "https://example.com/\u017f.png",
        "data:image/\u017fvg+xml;base64,PHN2Zy8+",  # the long s folds to s
        "data:,hello",  # text/plain
        "data:text/html,<script>alert(1)</script>",
        "data:text/html;base64,PHNjcmlwdD4=",
        "data:image/svg+xml;base64,not base64!",
        "data:image/png;base64,",
        "data:image/png;base64",
        "data:image/svg+xml,<svg onload=alert(1)>",
        "data:application/javascript;base64,YWxlcnQoMSk=",
        "",
    ],
)
def test_unsafe_or_malformed_icon_uris_are_dropped(src: str) -> None:
    assert not icon_src_ok(src)
    assert parse_icons([{"src": src}, {"src": PNG}]) == (mcp.Icon(PNG),)


def test_icon_src_length_limit_at_its_edge() -> None:
    head = "data:image/png;base64,"
    at_limit = head + "A" * (MAX_ICON_SRC - len(head))
    assert len(at_limit) == MAX_ICON_SRC and icon_src_ok(at_limit)
    assert not icon_src_ok(at_limit + "A")
    url = "https://example.com/" + "a" * (MAX_ICON_SRC - len("https://example.com/"))
    assert icon_src_ok(url) and not icon_src_ok(url + "a")


@pytest.mark.parametrize("src", [None, 3, ["https://x.test/i.png"], {"href": PNG}, True])
def test_a_src_that_is_not_a_string_drops_the_icon(src: object) -> None:
    assert parse_icon({"src": src}) is None
    assert parse_icon({}) is None


# -- the other icon fields ----------------------------------------------------------------


def test_a_full_icon() -> None:
    raw = {"src": PNG, "mimeType": "image/png", "sizes": ["48x48", "any"], "theme": "light"}
    icon = parse_icon(raw)
    assert icon == mcp.Icon(PNG, "image/png", ("48x48", "any"), "light")
    assert icon is not None and icon.raw is raw and not icon.is_data


@pytest.mark.parametrize(
    "field, value",
    [
        ("mimeType", "text/html"),
        ("mimeType", "image/"),
        ("mimeType", "image/png; charset=x"),
        ("mimeType", 5),
        ("mimeType", "image/\u017fvg+xml"),
        ("sizes", ["4\u212a"]),
        ("mimeType", "image/" + "a" * (MAX_MIME_TYPE)),
        ("sizes", "48x48"),
        ("sizes", ["48"]),
        ("sizes", ["048x48"]),
        ("sizes", ["48x48 "]),
        ("sizes", ["123456x1"]),
        ("sizes", [48]),
        ("sizes", ["48x48"] * (MAX_ICON_SIZES + 1)),
        ("theme", "blue"),
        ("theme", "Dark"),
        ("theme", 1),
        ("theme", []),  # unhashable: found by hypothesis
        ("theme", {"dark": True}),
    ],
)
def test_one_malformed_field_drops_the_whole_icon(field: str, value: object) -> None:
    assert parse_icon({"src": PNG, field: value}) is None


def test_icon_field_limits_at_their_edges() -> None:
    assert parse_icon({"src": PNG, "sizes": ["1x1"] * MAX_ICON_SIZES}) is not None
    assert parse_icon({"src": PNG, "sizes": ["99999X99999", "ANY"]}) is not None
    assert parse_icon({"src": PNG, "mimeType": "image/svg+xml"}) is not None
    assert parse_icon({"src": PNG, "sizes": None, "theme": None, "mimeType": None}) == mcp.Icon(PNG)


def test_at_most_max_icons_are_read_and_a_non_list_is_no_icons() -> None:
    many = [{"src": f"https://example.com/{i}.png"} for i in range(MAX_ICONS * 1000)]
    started = time.perf_counter()
    icons = parse_icons(many)
    assert len(icons) == MAX_ICONS and icons[-1].src.endswith(f"/{MAX_ICONS - 1}.png")
    assert time.perf_counter() - started < 1.0  # not a timing assertion on speed: a bound
    bad_first = [{"src": "javascript:x"}] * MAX_ICONS + [{"src": PNG}]
    assert parse_icons(bad_first) == ()  # the cap counts entries read, not icons kept
    for value in (None, {}, "https://example.com/i.png", 3, {"src": PNG}):
        assert parse_icons(value) == ()


@pytest.mark.parametrize(
    "src, origin",
    [
        ("https://Example.com/i.png", "https://example.com"),
        ("https://example.com:443/i.png", "https://example.com"),
        ("https://example.com:8443?x=1", "https://example.com:8443"),
        ("https://[::1]:9000#f", "https://[::1]:9000"),
        (DATA_PNG, None),
    ],
)
def test_an_icons_origin_is_what_to_compare_with_the_servers(src: str, origin: str | None) -> None:
    (icon,) = parse_icons([{"src": src}])
    assert icon.origin == origin


def test_icon_repr_shortens_data_and_hides_a_query() -> None:
    big = "data:image/png;base64," + "A" * 5000
    text = repr(parse_icons([{"src": big}])[0])
    assert "AAAA" not in text and "data:image/png;base64,…(5022 chars)" in text
    secretish = repr(mcp.Icon("https://example.com/i.png?sig=s3cr3t-value"))
    assert "s3cr3t" not in secretish and "https://example.com/i.png?…" in secretish


# -- annotations --------------------------------------------------------------------------


def test_tool_annotations_and_their_defaults() -> None:
    none = parse_tool_annotations({})
    assert none == mcp.ToolAnnotations()
    assert (none.read_only, none.destructive, none.idempotent, none.open_world) == (
        False,
        True,
        False,
        True,
    )
    ro = parse_tool_annotations({"readOnlyHint": True, "destructiveHint": True})
    assert ro is not None and (ro.read_only, ro.destructive, ro.idempotent) == (True, False, True)
    safe = parse_tool_annotations(
        {"destructiveHint": False, "idempotentHint": True, "openWorldHint": False, "title": "T"}
    )
    assert safe == mcp.ToolAnnotations("T", None, False, True, False)
    assert (safe.destructive, safe.idempotent, safe.open_world) == (False, True, False)


@pytest.mark.parametrize(
    "hint", ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]
)
@pytest.mark.parametrize("value", ["true", 1, 0, None, [], {}])
def test_a_hint_that_is_not_a_boolean_is_absent(hint: str, value: object) -> None:
    parsed = parse_tool_annotations({hint: value, "title": 7})
    assert parsed == mcp.ToolAnnotations()


def test_resource_annotations() -> None:
    parsed = parse_annotations(
        {
            "audience": ["assistant", "user", "assistant", "robot", 3],
            "priority": 1,
            "lastModified": "x",
        }
    )
    assert parsed == mcp.Annotations(("assistant", "user"), 1.0, "x")
    assert parse_annotations({"audience": "user"}) == mcp.Annotations()
    assert parse_annotations({"audience": [[], {}, "user"]}) == mcp.Annotations(("user",))
    long_list = parse_annotations({"audience": ["user", "assistant"] + ["x"] * 10**6})
    assert long_list is not None and long_list.audience == ("user", "assistant")
    edge = "2" * MAX_LAST_MODIFIED
    assert parse_annotations({"lastModified": edge}) == mcp.Annotations(last_modified=edge)
    assert parse_annotations({"lastModified": edge + "2"}) == mcp.Annotations()


@pytest.mark.parametrize("priority", [-0.01, 1.01, math.nan, math.inf, True, "0.5", None])
def test_a_priority_outside_zero_to_one_is_absent(priority: object) -> None:
    assert parse_annotations({"priority": priority}) == mcp.Annotations()


def test_website_url_is_a_web_link_or_nothing() -> None:
    assert parse_website_url("http://example.com/x") == "http://example.com/x"
    for bad in ("javascript:alert(1)", "file:///x", "https://", "example.com", 3, "https://a b"):
        assert parse_website_url(bad) is None
    edge = "https://example.com/" + "a" * (MAX_WEBSITE_URL - 20)
    assert len(edge) == MAX_WEBSITE_URL and parse_website_url(edge) == edge
    assert parse_website_url(edge + "a") is None


# -- on the items: the list survives ------------------------------------------------------

HOSTILE_METADATA = [
    {"title": 5, "icons": "x", "annotations": [], "_meta": 3},
    {"title": None, "icons": [None, 1, "s", [], {}], "annotations": "ro", "_meta": []},
    {"title": ["T"], "icons": {"src": PNG}, "annotations": None, "_meta": None},
    {"icons": [{"src": "javascript:alert(1)"}], "annotations": {"readOnlyHint": "yes"}},
]


@pytest.mark.parametrize("metadata", HOSTILE_METADATA)
@pytest.mark.parametrize(
    "kind, key, item",
    [
        ("tools", "tools", {"name": "t", "inputSchema": {"type": "object"}}),
        ("prompts", "prompts", {"name": "p"}),
        ("resources", "resources", {"uri": "test://r", "name": "r", "size": "big"}),
        ("resource_templates", "resourceTemplates", {"uriTemplate": "test://{x}", "name": "t"}),
    ],
)
def test_hostile_metadata_never_fails_a_page(
    kind: str, key: str, item: dict, metadata: dict
) -> None:
    raw = {**item, **metadata}
    page = parse_page(kind, {key: [raw, {**item, "title": "Fine"}]})  # type: ignore[arg-type]
    first, second = page.items
    assert first.title is None and first.icons == () and first.meta is None
    assert first.raw is raw  # what was dropped is still there
    assert second.title == "Fine"
    if kind == "tools":
        assert first.annotations in (None, mcp.ToolAnnotations())
    elif kind != "prompts":
        assert first.annotations in (None, mcp.Annotations())
    if kind == "resources":
        assert first.size is None


def test_a_tool_with_every_piece_of_metadata() -> None:
    raw = {
        "name": "add",
        "inputSchema": {"type": "object"},
        "icons": [{"src": DATA_PNG, "sizes": ["16x16"]}, {"src": "http://x.test/i.png"}],
        "annotations": {"title": "Adder", "readOnlyHint": True},
        "_meta": {"example.com/k": [1]},
    }
    (tool,) = parse_page("tools", {"tools": [raw]}).items
    assert tool.title == "Adder" and tool.display_name == "Adder"  # annotations.title fallback
    assert tool.icons == (mcp.Icon(DATA_PNG, sizes=("16x16",)),) and tool.icons[0].is_data
    assert tool.annotations == mcp.ToolAnnotations(title="Adder", read_only_hint=True)
    assert tool.meta == {"example.com/k": [1]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool.icons = ()  # type: ignore[misc]
    assert type(tool.icons) is tuple and type(tool.icons[0].sizes) is tuple
    assert "iVBOR" not in repr(tool)  # icons stay out of the item's repr


def test_server_info_metadata() -> None:
    raw = {
        "name": "s",
        "version": "1",
        "title": "S",
        "description": "what it does",
        "websiteUrl": "javascript:alert(1)",
        "icons": [{"src": PNG, "theme": "dark"}, {"src": "file:///x.png"}],
    }
    info = parse_server_info(raw)
    assert info is not None
    assert (info.title, info.description, info.website_url) == ("S", "what it does", None)
    assert info.icons == (mcp.Icon(PNG, theme="dark"),)
    assert repr(info) == "ServerInfo(name='s', version='1', title='S')"
    odd = parse_server_info({"name": "s", "version": "1", "description": 3, "icons": [1]})
    assert odd is not None and (odd.description, odd.icons) == (None, ())


# -- any JSON at all ----------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=30,
)
ICONISH = st.fixed_dictionaries(
    {},
    optional={
        "src": st.sampled_from([PNG, DATA_PNG, "javascript:x", "http://x.test/a"])
        | st.text(max_size=30),
        "mimeType": st.sampled_from(["image/png", "text/html"]) | JSON_VALUES,
        "sizes": st.lists(st.sampled_from(["48x48", "any", "0x0", ""]), max_size=4) | JSON_VALUES,
        "theme": st.sampled_from(["light", "dark", "dim"]) | JSON_VALUES,
    },
)


@settings(max_examples=150, deadline=None)
@given(
    icons=st.lists(ICONISH | JSON_VALUES, max_size=6) | JSON_VALUES,
    annotations=JSON_VALUES,
    title=JSON_VALUES,
    meta=JSON_VALUES,
)
def test_any_metadata_leaves_the_tool_readable_and_only_safe_icons(
    icons: object, annotations: object, title: object, meta: object
) -> None:
    raw = {"name": "t", "icons": icons, "annotations": annotations, "title": title, "_meta": meta}
    (tool,) = parse_page("tools", {"tools": [raw]}).items
    assert tool.name == "t" and tool.raw is raw
    for icon in tool.icons:
        assert icon.src[:6].lower() == "https:" or icon.src[:11].lower() == "data:image/"
        assert icon.theme in (None, "light", "dark")
        assert icon.mime_type is None or icon.mime_type.lower().startswith("image/")
    assert tool.title is None or type(tool.title) is str
    assert tool.meta is None or type(tool.meta) is dict
    if tool.annotations is not None:
        for hint in ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"):
            assert getattr(tool.annotations, hint) in (None, True, False)


@settings(max_examples=100, deadline=None)
@given(value=JSON_VALUES)
def test_any_json_as_server_info_or_annotations_never_raises(value: object) -> None:
    parse_server_info(value)
    parse_server_info({"name": "s", "version": "1", "icons": value, "websiteUrl": value})
    parse_annotations(value)
    parse_annotations({"audience": value, "priority": value, "lastModified": value})
    parse_tool_annotations(value)
    parse_icons(value)
