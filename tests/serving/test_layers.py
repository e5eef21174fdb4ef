"""Imports point down: nothing below the network servers imports them."""

from __future__ import annotations

import ast
from pathlib import Path

import trio_mcp

PACKAGE = Path(trio_mcp.__file__).parent
#: The layers under serving/ (serving sits above them; gateway and cli above it).
BELOW = ("protocol", "transports", "auth", "supervision", "actors", "server", "observability")
ABOVE = ("gateway", "cli")


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, as an absolute dotted name."""
    package = ".".join(("trio_mcp", *path.relative_to(PACKAGE).parent.parts))
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _offenders(layers: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    out = []
    for layer in layers:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            for module in _imported_modules(path):
                if any(module.startswith(f"trio_mcp.{name}") for name in forbidden):
                    out.append(f"{path.relative_to(PACKAGE)} imports {module}")
    return out


def test_nothing_below_serving_imports_it() -> None:
    assert _offenders(BELOW, ("serving", *ABOVE)) == []


def test_serving_imports_nothing_above_it() -> None:
    assert _offenders(("serving",), ABOVE) == []


def test_the_import_reader_sees_relative_imports() -> None:
    # The check above can fail: a relative import two levels up resolves.
    imported = _imported_modules(PACKAGE / "serving" / "http" / "_app.py")
    assert "trio_mcp.actors._server" in imported
    assert "trio_mcp.transports._asgi" in imported
