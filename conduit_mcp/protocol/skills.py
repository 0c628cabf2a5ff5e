"""The skills extension (``io.modelcontextprotocol/skills``, SEP-2640) as pure functions.

A server that declares the extension lists its skills with ``skills/list`` (one entry per
skill: the URI of its ``SKILL.md``, the frontmatter verbatim as JSON, and a complete
manifest of its files with each file's ``sha256:`` digest and size); the files themselves are
ordinary resources, read with ``resources/read``. What a host must do with them (the
extension's specification, "Integrity and Verification") is written here once:

- list without reading any file ("Lazy Retrieval": not on connection, not on listing);
- before reading, decline a skill over the per-skill limits ("Limits": 512 files, 16 MiB),
  which the complete manifest lets it check from the entry alone;
- read ``SKILL.md`` first; check every file's byte length against ``size`` and its SHA-256
  against ``digest`` ("Verification on Read"), and never use content that fails;
- parse ``SKILL.md``'s YAML frontmatter and compare it field by field with the entry's
  ``frontmatter`` ("Frontmatter Verification"); any discrepancy refuses the skill.

Every refusal is ``Error("protocol", "skill_mismatch")`` whose message names the file and
what did not match (a size, a digest, frontmatter field names), never the content.

No threads, no I/O, no clock: the front ends drive :class:`SkillLoad` one read at a time.

The frontmatter is YAML (the Agent Skills specification). It is parsed with PyYAML's safe
loader restricted to the YAML 1.2 core schema (``true``/``false`` only as booleans, no
timestamps, no YAML 1.1 octals or sexagesimals), as the JSON a server renders from it
would hold; anchors and aliases and duplicate keys are refused (a duplicate key would let
the listing show one value and a YAML 1.1 parser another).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import unquote

from ..errors import Error

__all__ = [
    "EXTENSION",
    "MAX_FILES",
    "MAX_FRONTMATTER_BYTES",
    "MAX_SKILL_BYTES",
    "METHODS",
    "LoadedSkill",
    "Skill",
    "SkillFile",
    "SkillLoad",
    "compare_frontmatter",
    "content_bytes",
    "declared",
    "parse_frontmatter",
    "parse_get",
    "parse_skill",
    "parse_skills_page",
    "refusal",
    "verify_file",
]

#: The extension's identifier, under ``capabilities.extensions`` of the server.
EXTENSION: Final = "io.modelcontextprotocol/skills"
#: The extension's methods: a client sends them only to a server that declared it.
METHODS: Final = frozenset({"skills/list", "skills/get"})
#: The extension's per-skill limits ("Limits"): a host must load skills up to these.
MAX_FILES: Final = 512
MAX_SKILL_BYTES: Final = 16 * 1024 * 1024
#: The frontmatter block of a ``SKILL.md`` is parsed only up to this size (the Agent Skills
#: fields are short: a 64-character name, a 1024-character description).
MAX_FRONTMATTER_BYTES: Final = 64 * 1024

SKILL_MD: Final = "SKILL.md"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# A URI path segment a host must never resolve: empty, dot segments, separators smuggled in
# percent-encoded, control characters (RFC 3986 "Remove Dot Segments" is what a reader would
# apply; refusing them keeps every listed file inside the skill's directory).
_CONTROL = re.compile(r"[\x00-\x1f\x7f\\?#]")


def _mismatch(message: str) -> Error:
    return Error("protocol", "skill_mismatch", message)


def _bad(message: str) -> Error:
    return Error("protocol", "bad_result", f"malformed skill entry: {message}")


# -- the listing ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill's manifest: its resource ``uri``, its ``path`` inside the skill's
    directory (``SKILL.md``, ``references/FORMS.md``), and the ``digest`` (``sha256:`` and 64
    lowercase hex digits) and ``size`` in bytes its content must have.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--skills"])
    >>> with mcp.Client.start(server) as client:
    ...     words = client.list_skills()[0].files[1]
    >>> words.path, words.size, words.digest[:7]
    ('references/WORDS.md', 20, 'sha256:')
    """

    uri: str
    path: str
    digest: str
    size: int


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill a server serves (a ``skills/list`` or ``skills/get`` entry), before any of
    its files is read.

    ``uri`` is its ``SKILL.md``'s; ``name`` and ``description`` come from ``frontmatter``
    (every field the author wrote, as the server rendered it to JSON). ``files`` is the
    complete manifest, ``SKILL.md`` first, or None for a *dynamic* skill (the server
    publishes no digests: nothing can be verified, and :meth:`Client.load_skill` declines
    it). A skill's identity is the client it came from and its ``uri``, never its ``name``
    (two skills may share one).

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--skills"])
    >>> with mcp.Client.start(server) as client:
    ...     skill = client.list_skills()[0]
    >>> skill.name, skill.uri, [f.path for f in skill.files]
    ('greeting', 'skill://greeting/SKILL.md', ['SKILL.md', 'references/WORDS.md'])
    """

    uri: str
    name: str
    description: str
    frontmatter: Mapping[str, Any] = field(repr=False)
    files: tuple[SkillFile, ...] | None = field(repr=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def root(self) -> str:
        """The skill's directory: ``uri`` without ``/SKILL.md``.

        >>> from conduit_mcp import Skill
        >>> Skill("skill://acme/refunds/SKILL.md", "refunds", "d", {}, None).root
        'skill://acme/refunds'
        """
        return self.uri[: -len(SKILL_MD) - 1]

    @property
    def dynamic(self) -> bool:
        """True when the server publishes no manifest (``resources: "dynamic"``).

        >>> from conduit_mcp import Skill
        >>> Skill("skill://live/SKILL.md", "live", "d", {}, None).dynamic
        True
        """
        return self.files is None

    @property
    def total_size(self) -> int:
        """The sum of the manifest's sizes (0 for a dynamic skill): what
        :meth:`Client.load_skill`'s ``max_bytes`` is compared with.

        >>> from conduit_mcp import Skill, SkillFile
        >>> files = (SkillFile("skill://a/SKILL.md", "SKILL.md", "sha256:" + "0" * 64, 300),
        ...          SkillFile("skill://a/b.md", "b.md", "sha256:" + "1" * 64, 20))
        >>> Skill("skill://a/SKILL.md", "a", "d", {}, files).total_size
        320
        """
        return sum(f.size for f in self.files or ())


def declared(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether the server declared the extension (``capabilities.extensions``).

    >>> declared({"extensions": {EXTENSION: {}}}), declared({"resources": {}}), declared(None)
    (True, False, False)
    """
    if not isinstance(capabilities, Mapping):
        return False
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(EXTENSION), Mapping)


def refusal(method: str, capabilities: Mapping[str, Any] | None) -> Error | None:
    """The error a ``skills/*`` call fails with before it is sent, or None: clients issue
    them only after observing the server's declaration (the extension's "Capability
    Negotiation").

    >>> refusal("skills/list", {"extensions": {EXTENSION: {}}}) is None
    True
    >>> refusal("skills/list", {"tools": {}})
    Error(kind='unavailable', reason='not_supported')
    """
    if declared(capabilities):
        return None
    return Error(
        "unavailable",
        "not_supported",
        f"the server does not declare the {EXTENSION} extension, so it has no {method}",
    )


def _segments_ok(path: str) -> bool:
    if not path or _CONTROL.search(path):
        return False
    for segment in path.split("/"):
        decoded = unquote(segment)
        if segment in ("", ".", "..") or decoded in (".", "..") or "/" in decoded:
            return False
        if _CONTROL.search(decoded):
            return False
    return True


def _file(item: Any, root: str, what: str) -> SkillFile:
    if type(item) is not dict:
        raise _bad(f"{what} is not an object")
    uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
    if type(uri) is not str:
        raise _bad(f"{what}.uri is missing or not a string")
    if type(digest) is not str or not _DIGEST.fullmatch(digest):
        raise _bad(f"{what}.digest is not 'sha256:' and 64 lowercase hex digits")
    # type() rather than isinstance(): bool is an int subclass.
    if type(size) is not int or size < 0:
        raise _bad(f"{what}.size is not a non-negative integer")
    prefix = root + "/"
    path = uri[len(prefix) :] if uri.startswith(prefix) else ""
    if not _segments_ok(path):
        # "Each uri MUST be the skill's SKILL.md or a file within the skill's directory."
        raise _bad(f"{what}.uri is not a file inside the skill's directory {root}")
    return SkillFile(uri, path, digest, size)


def parse_skill(entry: Any, what: str = "skill") -> Skill:
    """One ``Skill`` entry, checked as the extension's "Skill Entries" says a host must.

    Refused (``protocol``/``bad_result``): a ``uri`` that is not a ``.../SKILL.md`` whose
    last directory segment is ``frontmatter.name``; a ``frontmatter`` without string
    ``name`` and ``description``; ``resources`` neither a list nor ``"dynamic"``; a file
    outside the skill's directory (dot segments, encoded separators), listed twice, with a
    malformed digest or size; a manifest without the ``SKILL.md`` itself.

    >>> entry = {"uri": "skill://a/b/SKILL.md", "frontmatter": {"name": "b", "description": "d"},
    ...          "resources": "dynamic"}
    >>> parse_skill(entry)
    Skill(uri='skill://a/b/SKILL.md', name='b', description='d')
    >>> parse_skill({**entry, "uri": "skill://a/c/SKILL.md"})
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: protocol (bad_result): malformed skill entry: skill.uri's last directory segment is not frontmatter.name
    """
    if type(entry) is not dict:
        raise _bad(f"{what} is not an object")
    uri, frontmatter = entry.get("uri"), entry.get("frontmatter")
    if type(uri) is not str or not uri.endswith("/" + SKILL_MD):
        raise _bad(f"{what}.uri is not the URI of a {SKILL_MD}")
    if type(frontmatter) is not dict:
        raise _bad(f"{what}.frontmatter is not an object")
    name, description = frontmatter.get("name"), frontmatter.get("description")
    if type(name) is not str or type(description) is not str:
        raise _bad(f"{what}.frontmatter has no string name and description")
    root = uri[: -len(SKILL_MD) - 1]
    if "://" not in root or root.rsplit("/", 1)[-1] != name or not _segments_ok(name):
        raise _bad(f"{what}.uri's last directory segment is not frontmatter.name")
    resources = entry.get("resources")
    files: tuple[SkillFile, ...] | None
    if resources == "dynamic":
        files = None
    elif type(resources) is list:
        parsed = [_file(item, root, f"{what}.resources[{i}]") for i, item in enumerate(resources)]
        seen: set[str] = set()
        for item in parsed:
            if item.uri in seen:
                raise _bad(f"{what}.resources lists {item.uri} twice")
            seen.add(item.uri)
        if uri not in seen:
            raise _bad(f"{what}.resources does not list the {SKILL_MD} itself")
        # SKILL.md first: it is read, and verified, before any other file.
        files = tuple(sorted(parsed, key=lambda f: f.uri != uri))
    else:
        raise _bad(f'{what}.resources is neither a list nor "dynamic"')
    return Skill(uri, name, description, MappingProxyType(frontmatter), files, entry)


def parse_skills_page(result: Any) -> tuple[list[Skill], str | None]:
    """A ``skills/list`` page: its entries and its ``nextCursor`` (None on the last page)."""
    if type(result) is not dict:
        raise _bad("skills/list result is not an object")
    items = result.get("skills")
    if type(items) is not list:
        raise _bad("skills/list result has no skills list")
    cursor = result.get("nextCursor")
    if cursor is not None and type(cursor) is not str:
        raise _bad("skills/list nextCursor is not a string")
    return [parse_skill(item, f"skills[{i}]") for i, item in enumerate(items)], cursor


def parse_get(result: Any) -> Skill:
    """A ``skills/get`` result's entry."""
    if type(result) is not dict:
        raise _bad("skills/get result is not an object")
    return parse_skill(result.get("skill"))


# -- the frontmatter --------------------------------------------------------------------------


def parse_frontmatter(content: bytes) -> tuple[dict[str, Any], str]:
    """A ``SKILL.md``'s frontmatter (as JSON values) and its body (the text after it).

    ``SKILL.md`` must begin with a ``---`` line, and the frontmatter ends at the next line
    that is ``---``; it must be a YAML mapping (the Agent Skills specification, "SKILL.md
    format"). Anything else is ``protocol``/``skill_mismatch``.

    >>> parse_frontmatter(b"---\\nname: a\\ndescription: b\\nversion: 1.0\\n---\\n# A\\n")
    ({'name': 'a', 'description': 'b', 'version': 1.0}, '# A\\n')
    >>> parse_frontmatter(b"---\\nname: a\\nenabled: yes\\non: 2026-01-02\\n---\\n")[0]
    {'name': 'a', 'enabled': 'yes', 'on': '2026-01-02'}
    >>> parse_frontmatter(b"# no frontmatter\\n")
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: protocol (skill_mismatch): SKILL.md does not begin with YAML frontmatter (a '---' line)
    """
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise _mismatch(f"{SKILL_MD} is not UTF-8 text") from None
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        raise _mismatch(f"{SKILL_MD} does not begin with YAML frontmatter (a '---' line)")
    end = next((i for i, line in enumerate(lines) if i and line.rstrip("\r\n") == "---"), 0)
    if not end:
        raise _mismatch(f"{SKILL_MD}'s frontmatter has no closing '---' line")
    block = "".join(lines[1:end])
    if len(block.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
        raise _mismatch(
            f"{SKILL_MD}'s frontmatter is over {MAX_FRONTMATTER_BYTES} bytes (the most this "
            "client parses)"
        )
    # Imported here: clients that never load a skill never import the YAML parser.
    import yaml

    from .skill_yaml import load_core

    try:
        # The loader is safe (no Python objects) and alias-free (no expansion bombs).
        value = load_core(block)
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        # The parser's own messages can quote the content (a tag, a character): only where.
        if isinstance(exc, yaml.MarkedYAMLError):
            mark = exc.problem_mark or exc.context_mark
            where = f" (line {mark.line + 2}, column {mark.column + 1})" if mark else ""
            problem = f"the YAML parser stopped{where}"
        else:
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _mismatch(f"{SKILL_MD}'s frontmatter is not valid YAML: {problem}") from None
    if type(value) is not dict:
        raise _mismatch(f"{SKILL_MD}'s frontmatter is not a YAML mapping")
    return value, "".join(lines[end + 1 :])


def _same(a: Any, b: Any) -> bool:
    """JSON equality: a bool is never a number, and numbers compare by value (JSON has no
    separate integer type: YAML ``1.0`` and a server's ``1`` are the same number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def compare_frontmatter(listed: Mapping[str, Any], parsed: Mapping[str, Any]) -> list[str]:
    """The top-level fields on which the entry's ``frontmatter`` and the parsed one differ
    (present in one only, or with different values), sorted; empty when they agree.

    >>> compare_frontmatter({"name": "a", "description": "x"}, {"name": "a", "description": "y"})
    ['description']
    >>> compare_frontmatter({"name": "a", "n": 1}, {"name": "a", "n": 1.0, "extra": True})
    ['extra']
    """
    fields = set(listed) | set(parsed)
    return sorted(
        k for k in fields if k not in listed or k not in parsed or not _same(listed[k], parsed[k])
    )


# -- reading and verifying --------------------------------------------------------------------


def content_bytes(result: Any, uri: str) -> bytes:
    """The raw bytes of ``uri`` in a ``resources/read`` result: its ``text`` as UTF-8, or
    its ``blob`` decoded from base64 (the bytes a digest covers). A result with no content
    for ``uri`` (or with two) is ``protocol``/``skill_mismatch``."""
    contents = result.get("contents") if type(result) is dict else None
    if type(contents) is not list:
        raise _mismatch(f"the resources/read result for {uri} has no contents list")
    found = [c for c in contents if type(c) is dict and c.get("uri") == uri]
    if not found and len(contents) == 1 and type(contents[0]) is dict:
        found = contents  # a server that echoes no uri: its one content is the file
    if len(found) != 1:
        raise _mismatch(f"the resources/read result for {uri} has {len(found)} contents for it")
    item = found[0]
    text, blob = item.get("text"), item.get("blob")
    if type(text) is str and blob is None:
        return text.encode("utf-8", "surrogatepass")
    if type(blob) is str and text is None:
        try:
            return base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError):
            raise _mismatch(f"the blob of {uri} is not valid base64") from None
    raise _mismatch(f"the content of {uri} has neither one text nor one blob")


def verify_file(file: SkillFile, data: bytes) -> None:
    """Refuse content that is not what the manifest describes: its length first (a length
    that differs fails whether or not the digest is computed), then its SHA-256.

    >>> f = SkillFile("skill://a/SKILL.md", "SKILL.md", "sha256:" + "0" * 64, 3)
    >>> verify_file(f, b"four")
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: protocol (skill_mismatch): skill://a/SKILL.md is 4 bytes where the skill's entry says 3
    """
    if len(data) != file.size:
        raise _mismatch(f"{file.uri} is {len(data)} bytes where the skill's entry says {file.size}")
    if "sha256:" + hashlib.sha256(data).hexdigest() != file.digest:
        raise _mismatch(f"{file.uri} does not have the sha256 digest the skill's entry lists")


@dataclass(frozen=True, slots=True)
class LoadedSkill:
    """A skill whose files were all read and verified against its entry.

    ``files`` maps each file's path in the skill's directory (``SKILL.md`` included) to its
    bytes; ``body`` is ``SKILL.md``'s text after the frontmatter; ``frontmatter`` equals the
    entry's. Skill content is untrusted input for a model (the extension's "Security
    Considerations"): tag it with the server it came from, and never let it run code or widen
    permissions (``allowed-tools``) without the user's approval.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--skills"])
    >>> with mcp.Client.start(server) as client:
    ...     loaded = client.load_skill(client.list_skills()[0])
    >>> sorted(loaded.files), loaded.text("references/WORDS.md")
    (['SKILL.md', 'references/WORDS.md'], 'hello, hi, good day\\n')
    """

    skill: Skill
    body: str = field(repr=False)
    files: Mapping[str, bytes] = field(repr=False)

    @property
    def frontmatter(self) -> Mapping[str, Any]:
        """The verified frontmatter (the entry's, which the ``SKILL.md`` matched).

        >>> from conduit_mcp import LoadedSkill, Skill
        >>> skill = Skill("skill://a/SKILL.md", "a", "d", {"name": "a", "description": "d"}, ())
        >>> LoadedSkill(skill, "", {}).frontmatter["name"]
        'a'
        """
        return self.skill.frontmatter

    def text(self, path: str) -> str:
        """The file at ``path`` decoded as UTF-8 (``KeyError`` for a path not in the skill).

        >>> from conduit_mcp import LoadedSkill, Skill
        >>> skill = Skill("skill://a/SKILL.md", "a", "d", {}, ())
        >>> LoadedSkill(skill, "", {"notes/x.md": b"cafe"}).text("notes/x.md")
        'cafe'
        """
        return self.files[path].decode("utf-8")


class SkillLoad:
    """Loading one skill, one ``resources/read`` at a time: :meth:`next_uri` says what to
    read (``SKILL.md`` first, then the manifest's other files in order; None when done),
    :meth:`add` takes its result and verifies it (raising on the first failure, so nothing
    after a failed file is read), :meth:`loaded` gives the result.

    The limits are checked from the entry before the first read: at most :data:`MAX_FILES`
    files and ``max_bytes`` in all (default and spec value :data:`MAX_SKILL_BYTES`).

    >>> data = b"---\\nname: a\\ndescription: d\\n---\\nbody\\n"
    >>> import hashlib
    >>> entry = {"uri": "skill://a/SKILL.md", "frontmatter": {"name": "a", "description": "d"},
    ...          "resources": [{"uri": "skill://a/SKILL.md", "size": len(data),
    ...                         "digest": "sha256:" + hashlib.sha256(data).hexdigest()}]}
    >>> load = SkillLoad(parse_skill(entry))
    >>> load.next_uri()
    'skill://a/SKILL.md'
    >>> load.add({"contents": [{"uri": "skill://a/SKILL.md", "text": data.decode()}]})
    >>> load.next_uri() is None, load.loaded().body
    (True, 'body\\n')
    """

    __slots__ = ("_body", "_files", "_got", "skill")

    def __init__(self, skill: Skill, max_bytes: int = MAX_SKILL_BYTES) -> None:
        if not isinstance(skill, Skill):
            raise Error("argument", "skill", "load_skill takes a Skill (from list_skills)")
        if type(max_bytes) is not int or max_bytes < 1:
            raise Error("argument", "max_bytes", "max_bytes must be a positive integer")
        if skill.files is None:
            raise Error(
                "protocol",
                "skill_dynamic",
                f"{skill.uri} is a dynamic skill (the server publishes no digests), so its "
                "content cannot be verified; read its files with read_resource if you trust "
                "the server",
            )
        if len(skill.files) > MAX_FILES:
            raise Error(
                "protocol",
                "skill_too_large",
                f"{skill.uri} has {len(skill.files)} files, over the extension's limit of "
                f"{MAX_FILES}",
            )
        if skill.total_size > max_bytes:
            raise Error(
                "protocol",
                "skill_too_large",
                f"{skill.uri}'s files total {skill.total_size} bytes, over max_bytes "
                f"({max_bytes}); pass a larger max_bytes to load it",
            )
        self.skill = skill
        self._files: tuple[SkillFile, ...] = skill.files
        self._got: dict[str, bytes] = {}
        self._body = ""

    @property
    def done(self) -> bool:
        """True once every file was read and verified."""
        return len(self._got) == len(self._files)

    def next_uri(self) -> str | None:
        """The next file to read, or None when every file is verified."""
        return None if self.done else self._files[len(self._got)].uri

    def add(self, result: Any) -> None:
        """Verify the ``resources/read`` result of :meth:`next_uri` (raw dict or a
        ``ReadResourceResult``); ``protocol``/``skill_mismatch`` when it fails."""
        file = self._files[len(self._got)]
        raw = getattr(result, "raw", result)
        data = content_bytes(raw, file.uri)
        verify_file(file, data)
        if file.uri == self.skill.uri:
            parsed, self._body = parse_frontmatter(data)
            differ = compare_frontmatter(self.skill.frontmatter, parsed)
            if differ:
                raise _mismatch(
                    f"{file.uri}'s frontmatter differs from the skill's entry in "
                    f"{', '.join(_shown(differ))}"
                )
        self._got[file.path] = data

    def loaded(self) -> LoadedSkill:
        """The verified skill (every file read)."""
        if not self.done:
            raise Error("protocol", "skill_mismatch", "the skill is not loaded yet")
        return LoadedSkill(self.skill, self._body, MappingProxyType(dict(self._got)))


def _shown(fields: Sequence[str]) -> list[str]:
    # Field names are the author's; a hostile one could be long: show a bounded prefix.
    names = [repr(f[:64]) for f in fields[:8]]
    return [*names, f"and {len(fields) - 8} more"] if len(fields) > 8 else names
