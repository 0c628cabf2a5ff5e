"""The public surface: ``conduit_mcp/__init__.py`` names each export in three places (the lazy
table, the type checker's imports, ``__all__``) that must agree, and the typed options name
every option ``build_config`` accepts."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import conduit_mcp as mcp
from conduit_mcp.config import OPTION_NAMES, ClientOptions

INIT = Path(mcp.__file__)


def _type_checking_names() -> set[str]:
    tree = ast.parse(INIT.read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            return {
                alias.asname or alias.name
                for stmt in node.body
                if isinstance(stmt, ast.ImportFrom)
                for alias in stmt.names
            }
    raise AssertionError("no TYPE_CHECKING block in conduit_mcp/__init__.py")


def test_the_lazy_table_the_type_checker_imports_and_all_agree():
    lazy = set(mcp._LAZY)
    eager = {"Error", "KINDS", "Kind", "__version__"}
    assert _type_checking_names() == lazy
    assert set(mcp.__all__) == lazy | eager
    for name, module in mcp._LAZY.items():
        assert hasattr(importlib.import_module(module, "conduit_mcp"), name), name


def test_the_runtime_and_its_config_are_not_exported():
    for name in ("Config", "Link", "SafeActor", "Statem", "Registry", "Handle", "Request"):
        assert name not in mcp.__all__


def test_client_options_name_and_document_every_option():
    assert set(ClientOptions.__annotations__) == set(OPTION_NAMES)
    source = ast.parse(Path(importlib.import_module("conduit_mcp.config").__file__).read_text())
    (cls,) = [n for n in source.body if isinstance(n, ast.ClassDef) and n.name == "ClientOptions"]
    documented = {
        field.target.id
        for field, after in zip(cls.body, cls.body[1:], strict=False)
        if isinstance(field, ast.AnnAssign)
        and isinstance(field.target, ast.Name)
        and isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
    }
    assert documented == set(OPTION_NAMES)  # an attribute docstring per option


def test_every_public_method_of_the_front_ends_says_what_it_raises():
    missing = []
    for cls in (mcp.Client, mcp.AsyncClient, mcp.FutureClient):
        for name in dir(cls):
            member = getattr(cls, name)
            if name.startswith("_") or not callable(member) or name in ("aio", "futures"):
                continue
            doc = " ".join((member.__doc__ or "").split())
            if "Raises:" not in doc and "never raises" not in doc.lower():
                missing.append(f"{cls.__name__}.{name}")
    assert missing == []
