"""The skills extension through the public API (docs/skills.md): ``list_skills``,
``get_skill``, ``load_skill`` against the scripted server's ``--skills``, over stdio and
Streamable HTTP, in both eras, on all three front ends.

What a user observes: typed skills, no file read by listing, every file verified before a
loaded skill is returned, a tampered skill refused with ``protocol``/``skill_mismatch`` and
nothing read after the file that failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import ScriptedServer

GREETING = "skill://greeting/SKILL.md"
WORDS = "skill://greeting/references/WORDS.md"


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., tuple[ScriptedServer, Any]]]:
    """``servers(transport, era, *args)`` -> (ScriptedServer, transport spec), one server per
    combination for the module (an HTTP one runs until the module ends)."""
    made: dict[tuple[Any, ...], tuple[ScriptedServer, Any]] = {}
    procs: list[Any] = []

    def get(transport: str, era: str, *args: str) -> tuple[ScriptedServer, Any]:
        key = (transport, era, *args)
        if key not in made:
            server = ScriptedServer(tmp_path_factory.mktemp("skills"), era=era, extra_args=args)
            if transport == "stdio":
                made[key] = (server, server.stdio())
            else:
                proc = server.http_server()
                procs.append(proc)
                made[key] = (server, proc.spec())
        return made[key]

    yield get
    for proc in procs:
        proc.kill()


@pytest.fixture
def connect(servers: Callable[..., tuple[ScriptedServer, Any]]) -> Iterator[Callable[..., Any]]:
    clients: list[mcp.Client] = []

    def start(transport: str, era: str, *args: str) -> tuple[mcp.Client, ScriptedServer]:
        server, spec = servers(transport, era, *args)
        client = mcp.Client.start(spec, backoff=lambda attempt: 0.01)
        clients.append(client)
        client.await_ready(timeout=10)
        return client, server

    yield start
    for client in clients:
        client.stop()


def reads(server: ScriptedServer) -> list[str]:
    return [e["params"]["uri"] for e in server.received("resources/read")]


BOTH = pytest.mark.parametrize(
    ("transport", "era"),
    [("stdio", "modern"), ("stdio", "legacy"), ("http", "modern"), ("http", "legacy")],
)


@BOTH
def test_listing_gives_typed_skills_and_reads_no_file(connect, transport, era) -> None:
    client, server = connect(transport, era, "--skills")
    before = len(reads(server))
    skills = client.list_skills()
    assert [s.uri for s in skills] == [
        GREETING,
        "skill://acme/billing/refunds/SKILL.md",
        "skill://live/SKILL.md",
    ]
    greeting = skills[0]
    assert isinstance(greeting, mcp.Skill)
    assert (greeting.name, greeting.description) == (
        "greeting",
        "Greet the user in their own words",
    )
    assert greeting.frontmatter["metadata"] == {"version": "1.0"}
    assert [f.path for f in greeting.files or ()] == ["SKILL.md", "references/WORDS.md"]
    assert skills[1].name == "refunds" and skills[2].dynamic
    assert len(reads(server)) == before  # listing prefetches nothing


@BOTH
def test_a_loaded_skill_is_every_file_verified(connect, transport, era) -> None:
    client, server = connect(transport, era, "--skills")
    skill = client.get_skill(GREETING)
    before = len(reads(server))
    loaded = client.load_skill(skill)
    assert isinstance(loaded, mcp.LoadedSkill)
    assert reads(server)[before:] == [GREETING, WORDS]
    assert loaded.text("references/WORDS.md") == "hello, hi, good day\n"
    assert loaded.body.startswith("\n# Greeting\n")
    assert loaded.frontmatter["license"] == "Apache-2.0"


# Every mode on one transport, and one elsewhere: verification runs in the caller, the same
# for every transport and era (each combination costs a server start).
@pytest.mark.parametrize(
    ("transport", "era", "mode"),
    [
        ("stdio", "modern", "digest"),
        ("stdio", "modern", "size"),
        ("stdio", "modern", "frontmatter"),
        ("stdio", "legacy", "size"),
        ("http", "modern", "frontmatter"),
        ("http", "legacy", "digest"),
    ],
)
def test_a_tampered_skill_is_refused_and_nothing_after_it_is_read(
    connect, transport, era, mode
) -> None:
    client, server = connect(transport, era, "--skills", mode)
    skill = client.list_skills()[0]
    before = len(reads(server))
    with pytest.raises(mcp.Error) as info:
        client.load_skill(skill)
    assert (info.value.kind, info.value.reason) == ("protocol", "skill_mismatch")
    assert GREETING in str(info.value)
    says = {"digest": "sha256 digest", "size": "bytes where", "frontmatter": "'description'"}
    assert says[mode] in str(info.value)
    for content in ("Send my secrets", "one more thing", "Exfiltrate"):
        assert content not in str(info.value)
    assert reads(server)[before:] == [GREETING]  # never WORDS.md


def test_the_total_size_limit_at_its_edge_reads_nothing_over_it(connect) -> None:
    client, server = connect("stdio", "modern", "--skills")
    skill = client.list_skills()[0]
    before = len(reads(server))
    with pytest.raises(mcp.Error) as info:
        client.load_skill(skill, max_bytes=skill.total_size - 1)
    assert (info.value.kind, info.value.reason) == ("protocol", "skill_too_large")
    assert len(reads(server)) == before
    assert client.load_skill(skill, max_bytes=skill.total_size).skill is skill


def test_a_dynamic_skill_is_declined_and_an_unknown_one_is_the_servers_error(connect) -> None:
    client, _server = connect("stdio", "modern", "--skills")
    with pytest.raises(mcp.Error) as info:
        client.load_skill(client.list_skills()[2])
    assert (info.value.kind, info.value.reason) == ("protocol", "skill_dynamic")
    with pytest.raises(mcp.Error) as info:
        client.get_skill("skill://nope/SKILL.md")
    assert (info.value.kind, info.value.code) == ("server", -32602)
    with pytest.raises(mcp.Error) as info:
        client.load_skill("skill://greeting/SKILL.md")  # type: ignore[arg-type]
    assert (info.value.kind, info.value.reason) == ("argument", "skill")


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_server_without_the_extension_is_never_asked(connect, era) -> None:
    client, server = connect("stdio", era)
    for call in (client.list_skills, lambda: client.get_skill(GREETING)):
        with pytest.raises(mcp.Error) as info:
            call()
        assert (info.value.kind, info.value.reason) == ("unavailable", "not_supported")
        assert "io.modelcontextprotocol/skills" in str(info.value)
    assert server.received("skills/list") == server.received("skills/get") == []


def test_listing_is_cached_like_the_other_lists(connect) -> None:
    client, server = connect("stdio", "modern", "--skills", "--ttl-ms", "60000", "--page-size", "2")
    first = client.list_skills()
    asked = len(server.received("skills/list"))
    assert asked == 2  # two pages
    assert client.list_skills() == first and client.cached_skills() == first
    assert len(server.received("skills/list")) == asked
    assert client.list_skills(refresh=True) == first
    assert len(server.received("skills/list")) == 2 * asked


def test_the_asyncio_and_futures_front_ends(connect) -> None:
    client, _server = connect("http", "modern", "--skills")

    async def run() -> tuple[tuple[mcp.Skill, ...], mcp.LoadedSkill]:
        skills = await client.aio.list_skills()
        return skills, await client.aio.load_skill(skills[0])

    skills, loaded = asyncio.run(run())
    assert sorted(loaded.files) == ["SKILL.md", "references/WORDS.md"]
    assert client.futures.get_skill(GREETING).get(timeout=10) == skills[0]
    again = client.futures.load_skill(skills[1]).get(timeout=10)
    assert again.text("examples/email.md").startswith("Dear customer")

    tampered, _ = connect("stdio", "modern", "--skills", "digest")
    skill = tampered.futures.list_skills().get(timeout=10)[0]
    with pytest.raises(mcp.Error) as info:
        tampered.futures.load_skill(skill).get(timeout=10)
    assert info.value.reason == "skill_mismatch"

    async def refused() -> None:
        await tampered.aio.load_skill(skill)

    with pytest.raises(mcp.Error) as info:
        asyncio.run(refused())
    assert info.value.reason == "skill_mismatch"


def test_a_broken_stream_on_a_skills_read_is_reissued_once(tmp_path) -> None:
    rules = [
        {"match": {"method": method}, "action": {"drop_stream": 0}, "times": 1}
        for method in ("skills/list", "skills/get")
    ]
    server = ScriptedServer(tmp_path, era="modern", rules=rules, extra_args=["--skills"])
    with server.http_server() as proc, mcp.Client.start(proc.spec()) as client:
        assert client.list_skills()[0].uri == GREETING
        assert client.get_skill(GREETING).name == "greeting"
    for method in ("skills/list", "skills/get"):
        sent = server.received(method)
        assert len(sent) == 2 and sent[0]["id"] != sent[1]["id"]
