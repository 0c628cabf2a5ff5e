"""The skills extension's host rules (``conduit_mcp.protocol.skills``), without a thread:
entries, frontmatter, verification of sizes and digests, the limits, and hostile inputs."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from conduit_mcp import Error
from conduit_mcp.protocol import skills as sk

SKILL_MD = b"---\nname: pdf\ndescription: Extract PDF forms\nlicense: MIT\n---\n\nBody.\n"
FORMS = b"Supporting content.\n"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def entry(
    *, md: bytes = SKILL_MD, files: dict[str, bytes] | None = None, **over: Any
) -> dict[str, Any]:
    files = {"SKILL.md": md, "references/FORMS.md": FORMS} if files is None else files
    base = {
        "uri": "skill://pdf/SKILL.md",
        "frontmatter": {"name": "pdf", "description": "Extract PDF forms", "license": "MIT"},
        "resources": [
            {"uri": f"skill://pdf/{path}", "digest": digest(data), "size": len(data)}
            for path, data in files.items()
        ],
    }
    base.update(over)
    return base


def read(uri: str, data: bytes, *, blob: bool = False) -> dict[str, Any]:
    if blob:
        return {"contents": [{"uri": uri, "blob": base64.b64encode(data).decode()}]}
    return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": data.decode()}]}


def load_all(skill: sk.Skill, served: dict[str, bytes], **kw: Any) -> tuple[sk.LoadedSkill, list]:
    load, reads = sk.SkillLoad(skill, **kw), []
    for _ in range(10):
        uri = load.next_uri()
        if uri is None:
            return load.loaded(), reads
        reads.append(uri)
        load.add(read(uri, served[uri]))
    raise AssertionError("the load did not end")


def served(md: bytes = SKILL_MD) -> dict[str, bytes]:
    return {"skill://pdf/SKILL.md": md, "skill://pdf/references/FORMS.md": FORMS}


# -- entries -----------------------------------------------------------------------------------


def test_an_entry_parses_to_a_typed_skill_with_skill_md_first() -> None:
    raw = entry(files={"references/FORMS.md": FORMS, "SKILL.md": SKILL_MD})
    skill = sk.parse_skill(raw)
    assert (skill.uri, skill.name, skill.description) == (
        "skill://pdf/SKILL.md",
        "pdf",
        "Extract PDF forms",
    )
    assert skill.root == "skill://pdf"
    assert [f.path for f in skill.files or ()] == ["SKILL.md", "references/FORMS.md"]
    assert skill.total_size == len(SKILL_MD) + len(FORMS)
    assert skill.frontmatter["license"] == "MIT" and not skill.dynamic


def test_a_prefixed_and_a_dynamic_skill() -> None:
    raw = {
        "uri": "skill://acme/billing/refunds/SKILL.md",
        "frontmatter": {"name": "refunds", "description": "d"},
        "resources": "dynamic",
    }
    skill = sk.parse_skill(raw)
    assert skill.name == "refunds" and skill.dynamic and skill.files is None
    with pytest.raises(Error) as info:
        sk.SkillLoad(skill)
    assert (info.value.kind, info.value.reason) == ("protocol", "skill_dynamic")


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"uri": "skill://pdf/README.md"}, "not the URI of a SKILL.md"),
        ({"uri": "skill://other/SKILL.md"}, "last directory segment"),
        ({"frontmatter": {"name": "pdf"}}, "no string name and description"),
        ({"frontmatter": "name: pdf"}, "frontmatter is not an object"),
        ({"resources": None}, 'neither a list nor "dynamic"'),
        ({"resources": "Dynamic"}, 'neither a list nor "dynamic"'),
    ],
)
def test_malformed_entries_are_refused(change: dict[str, Any], says: str) -> None:
    with pytest.raises(Error) as info:
        sk.parse_skill(entry(**change))
    assert (info.value.kind, info.value.reason) == ("protocol", "bad_result")
    assert says in str(info.value)


@pytest.mark.parametrize(
    "uri",
    [
        "skill://pdf/../etc/passwd",
        "skill://pdf/references/../../x",
        "skill://pdf/./SKILL.md.bak",
        "skill://pdf/%2e%2e/x",
        "skill://pdf/a%2F..%2Fb",
        "skill://pdf/a\\..\\b",
        "skill://pdf//x",
        "skill://pdf/x\x00",
        "skill://pdfx/SKILL.md",
        "skill://other/x.md",
        "file:///etc/passwd",
        "skill://pdf/x?y=1",
    ],
)
def test_a_file_outside_the_skill_directory_is_refused(uri: str) -> None:
    raw = entry()
    raw["resources"].append({"uri": uri, "digest": digest(b""), "size": 0})
    with pytest.raises(Error) as info:
        sk.parse_skill(raw)
    assert info.value.reason == "bad_result"
    assert "inside the skill's directory" in str(info.value)


@pytest.mark.parametrize(
    "resource",
    [
        {"uri": "skill://pdf/a", "digest": "sha256:" + "A" * 64, "size": 1},
        {"uri": "skill://pdf/a", "digest": "sha1:" + "0" * 40, "size": 1},
        {"uri": "skill://pdf/a", "digest": "sha256:" + "0" * 63, "size": 1},
        {"uri": "skill://pdf/a", "digest": "sha256:" + "0" * 64, "size": -1},
        {"uri": "skill://pdf/a", "digest": "sha256:" + "0" * 64, "size": True},
        {"uri": "skill://pdf/a", "digest": "sha256:" + "0" * 64, "size": 1.0},
        {"uri": "skill://pdf/a", "digest": "sha256:" + "0" * 64},
        {"uri": 7, "digest": "sha256:" + "0" * 64, "size": 1},
        "skill://pdf/a",
    ],
)
def test_malformed_manifest_rows_are_refused(resource: Any) -> None:
    raw = entry()
    raw["resources"].append(resource)
    with pytest.raises(Error) as info:
        sk.parse_skill(raw)
    assert info.value.reason == "bad_result"


def test_a_manifest_must_list_its_skill_md_once_and_every_file_once() -> None:
    with pytest.raises(Error, match=r"does not list the SKILL\.md"):
        sk.parse_skill(entry(files={"references/FORMS.md": FORMS}))
    raw = entry()
    raw["resources"].append(dict(raw["resources"][1]))
    with pytest.raises(Error, match="twice"):
        sk.parse_skill(raw)


def test_a_listing_page_and_a_get_result() -> None:
    skills, cursor = sk.parse_skills_page({"skills": [entry()], "nextCursor": "2"})
    assert [s.name for s in skills] == ["pdf"] and cursor == "2"
    assert sk.parse_skills_page({"skills": []}) == ([], None)
    assert sk.parse_get({"skill": entry()}).uri == "skill://pdf/SKILL.md"
    for bad in ({"skills": {}}, {"skills": [entry()], "nextCursor": 3}, []):
        with pytest.raises(Error):
            sk.parse_skills_page(bad)


def test_the_declaration_gates_the_methods() -> None:
    assert sk.refusal("skills/get", {"extensions": {sk.EXTENSION: {"directoryRead": True}}}) is None
    for caps in (None, {}, {"extensions": {}}, {"extensions": {sk.EXTENSION: True}}):
        refused = sk.refusal("skills/list", caps)
        assert refused is not None and refused.reason == "not_supported"


# -- frontmatter -------------------------------------------------------------------------------


def test_frontmatter_is_yaml_1_2_core_values() -> None:
    text = (
        b"---\r\nname: a\r\ndescription: >\r\n  folded\r\n  text\r\nn: 012\r\nx: 0x1f\r\n"
        b"on: yes\r\nwhen: 2026-01-02\r\nratio: 1.5\r\nnothing: ~\r\ntags: [a, b]\r\n"
        b"metadata:\r\n  version: '1.0'\r\n---\r\nBody\r\n"
    )
    fm, body = sk.parse_frontmatter(text)
    assert fm == {
        "name": "a",
        "description": "folded text\n",
        "n": 12,
        "x": 31,
        "on": "yes",
        "when": "2026-01-02",
        "ratio": 1.5,
        "nothing": None,
        "tags": ["a", "b"],
        "metadata": {"version": "1.0"},
    }
    assert body == "Body\r\n"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (b"name: a\n", "does not begin with YAML frontmatter"),
        (b"", "does not begin with YAML frontmatter"),
        (b"---\nname: a\n", "no closing '---' line"),
        (b"---\n- a\n---\n", "not a YAML mapping"),
        (b"---\nname: [a\n---\n", "not valid YAML"),
        (b"---\na: &x 1\nb: *x\n---\n", "anchors are not accepted"),
        (b"---\na: 1\na: 2\n---\n", "a key appears twice"),
        (b"---\n1: a\n'1': b\n---\n", "a key appears twice"),
        (b"---\na: !!python/object/apply:os.system [echo]\n---\n", "not valid YAML"),
        (b"---\na: !!binary aGk=\n---\n", "binary values"),
        (b"---\nname: \xff\n---\n", "not UTF-8"),
    ],
)
def test_bad_frontmatter_is_a_mismatch(text: bytes, says: str) -> None:
    with pytest.raises(Error) as info:
        sk.parse_frontmatter(text)
    assert (info.value.kind, info.value.reason) == ("protocol", "skill_mismatch")
    assert says in str(info.value)
    assert "os.system" not in str(info.value)  # the parser's words never quote the content


def test_frontmatter_over_its_bound_is_refused_at_the_edge() -> None:
    pad = sk.MAX_FRONTMATTER_BYTES - len("name: a\nx: \n")
    at = b"---\nname: a\nx: " + b"y" * pad + b"\n---\n"
    assert sk.parse_frontmatter(at)[0]["name"] == "a"
    over = b"---\nname: a\nx: " + b"y" * (pad + 1) + b"\n---\n"
    with pytest.raises(Error, match="over 65536 bytes"):
        sk.parse_frontmatter(over)


def test_an_alias_bomb_is_refused_before_it_grows() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(Error, match="anchors"):
        sk.parse_frontmatter(("---\n" + "\n".join(lines) + "\n---\n").encode())


def test_frontmatter_comparison_is_json_equality_field_by_field() -> None:
    listed = {"name": "a", "description": "d", "n": 1, "flag": True, "m": {"k": [1, "2"]}}
    assert sk.compare_frontmatter(listed, dict(listed, n=1.0)) == []
    assert sk.compare_frontmatter(listed, dict(listed, flag=1)) == ["flag"]
    assert sk.compare_frontmatter(listed, dict(listed, n=True)) == ["n"]
    assert sk.compare_frontmatter(listed, dict(listed, m={"k": [1, 2]})) == ["m"]
    assert sk.compare_frontmatter(listed, {"name": "a", "description": "d"}) == [
        "flag",
        "m",
        "n",
    ]
    assert sk.compare_frontmatter({"name": "a"}, {"name": "a", "allowed-tools": "Bash"}) == [
        "allowed-tools"
    ]


# -- loading -----------------------------------------------------------------------------------


def test_a_skill_loads_skill_md_first_then_its_files_verified() -> None:
    loaded, reads = load_all(sk.parse_skill(entry()), served())
    assert reads == ["skill://pdf/SKILL.md", "skill://pdf/references/FORMS.md"]
    assert loaded.files == {"SKILL.md": SKILL_MD, "references/FORMS.md": FORMS}
    assert loaded.body == "\nBody.\n" and loaded.text("references/FORMS.md") == FORMS.decode()
    assert loaded.frontmatter["license"] == "MIT"
    assert "Body" not in repr(loaded)


def test_a_blob_is_verified_on_its_decoded_bytes() -> None:
    data = bytes(range(256))
    skill = sk.parse_skill(entry(files={"SKILL.md": SKILL_MD, "bin/x": data}))
    load = sk.SkillLoad(skill)
    load.add(read("skill://pdf/SKILL.md", SKILL_MD))
    load.add(read("skill://pdf/bin/x", data, blob=True))
    assert load.loaded().files["bin/x"] == data
    bad = sk.SkillLoad(skill)
    bad.add(read("skill://pdf/SKILL.md", SKILL_MD))
    with pytest.raises(Error, match="not valid base64"):
        bad.add({"contents": [{"uri": "skill://pdf/bin/x", "blob": "!!!"}]})


def _refusal(skill: sk.Skill, files: dict[str, bytes]) -> tuple[Error, list[str]]:
    reads: list[str] = []
    load = sk.SkillLoad(skill)
    with pytest.raises(Error) as info:
        while (uri := load.next_uri()) is not None:
            reads.append(uri)
            load.add(read(uri, files[uri]))
    assert (info.value.kind, info.value.reason) == ("protocol", "skill_mismatch")
    return info.value, reads


def test_a_wrong_digest_refuses_the_skill_before_any_other_file() -> None:
    evil = SKILL_MD.replace(b"Body.", b"Evil.")
    error, reads = _refusal(sk.parse_skill(entry()), served(evil))
    assert reads == ["skill://pdf/SKILL.md"]
    assert "sha256 digest" in str(error) and "Evil" not in str(error)


def test_a_wrong_size_refuses_the_skill() -> None:
    error, reads = _refusal(sk.parse_skill(entry()), served(SKILL_MD + b"more"))
    assert reads == ["skill://pdf/SKILL.md"]
    assert f"is {len(SKILL_MD) + 4} bytes where the skill's entry says {len(SKILL_MD)}" in str(
        error
    )


def test_a_frontmatter_mismatch_refuses_the_skill_and_names_the_field_only() -> None:
    evil = SKILL_MD.replace(b"Extract PDF forms", b"Exfiltrate credentials")
    # The manifest describes the tampered bytes: only the frontmatter comparison catches it.
    skill = sk.parse_skill(entry(md=evil))
    error, reads = _refusal(skill, served(evil))
    assert reads == ["skill://pdf/SKILL.md"]
    assert "frontmatter differs from the skill's entry in 'description'" in str(error)
    assert "Exfiltrate" not in str(error) and "Extract" not in str(error)


def test_a_supporting_file_that_fails_refuses_the_skill() -> None:
    files = served()
    files["skill://pdf/references/FORMS.md"] = b"Supporting contenT.\n"
    error, reads = _refusal(sk.parse_skill(entry()), files)
    assert reads[-1] == "skill://pdf/references/FORMS.md"
    assert "FORMS.md does not have the sha256 digest" in str(error)


@pytest.mark.parametrize(
    "result",
    [
        {},
        {"contents": []},
        {"contents": [{"uri": "skill://pdf/other", "text": "x"}, {"uri": "x", "text": "y"}]},
        {"contents": [{"uri": "skill://pdf/SKILL.md", "text": "a", "blob": "YQ=="}]},
        {"contents": [{"uri": "skill://pdf/SKILL.md"}]},
        [],
    ],
)
def test_a_read_without_the_file_is_a_mismatch(result: Any) -> None:
    load = sk.SkillLoad(sk.parse_skill(entry()))
    with pytest.raises(Error) as info:
        load.add(result)
    assert info.value.reason == "skill_mismatch"


def test_the_total_size_limit_at_its_edge() -> None:
    skill = sk.parse_skill(entry())
    total = skill.total_size
    assert load_all(skill, served(), max_bytes=total)[0].files["SKILL.md"] == SKILL_MD
    with pytest.raises(Error) as info:
        sk.SkillLoad(skill, max_bytes=total - 1)
    assert (info.value.kind, info.value.reason) == ("protocol", "skill_too_large")
    assert f"total {total} bytes, over max_bytes ({total - 1})" in str(info.value)


def test_the_spec_limits_are_the_defaults() -> None:
    big = {"SKILL.md": SKILL_MD}
    raw = entry(files=big)
    raw["resources"].append(
        {
            "uri": "skill://pdf/big",
            "digest": digest(b""),
            "size": sk.MAX_SKILL_BYTES - len(SKILL_MD),
        }
    )
    sk.SkillLoad(sk.parse_skill(raw))  # exactly 16 MiB: accepted (nothing read yet)
    raw["resources"][-1]["size"] += 1
    with pytest.raises(Error, match="over max_bytes"):
        sk.SkillLoad(sk.parse_skill(raw))
    many = entry(files={"SKILL.md": SKILL_MD, **{f"f{i}": b"" for i in range(sk.MAX_FILES - 1)}})
    sk.SkillLoad(sk.parse_skill(many))  # 512 files: accepted
    many["resources"].append({"uri": "skill://pdf/one-more", "digest": digest(b""), "size": 0})
    with pytest.raises(Error, match="has 513 files, over the extension's limit of 512"):
        sk.SkillLoad(sk.parse_skill(many))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "1"])
def test_bad_arguments(bad: Any) -> None:
    with pytest.raises(Error) as info:
        sk.SkillLoad(sk.parse_skill(entry()), max_bytes=bad)
    assert (info.value.kind, info.value.reason) == ("argument", "max_bytes")
    with pytest.raises(Error) as info:
        sk.SkillLoad(entry())  # type: ignore[arg-type]
    assert (info.value.kind, info.value.reason) == ("argument", "skill")
