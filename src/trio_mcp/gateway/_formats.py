"""Reading a configuration file in the format its host wrote: JSON, JSONC
(comments and trailing commas: VS Code, Zed), TOML (Codex) or YAML (Goose,
Continue), and finding the line a server or a field sits on for messages.

The format comes from the file name (``.toml``, ``.yaml``/``.yml``,
``.json``/``.jsonc``/``.json5``) and, when the name says nothing, from the
content (a ``{`` first: JSON; a ``[table]`` line: TOML; else YAML). JSON is
read by the standard library first; only a file it refuses is read again as
JSON5 (a superset of JSONC) by the ``json5`` library, so that comments and
trailing commas are accepted and a real mistake is reported at its line.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Final, Literal

import attrs

__all__ = ["Document", "FormatError", "parse_document", "read_document"]

Format = Literal["json", "toml", "yaml"]

_JSON5_LINE: Final = re.compile(r"^<string>:(\d+)\s*(.*)$", re.DOTALL)
_TOML_LINE: Final = re.compile(r"\(at line (\d+), column (\d+)\)")
_TOML_TABLE: Final = re.compile(r"^\s*\[[A-Za-z0-9_.\"'-]+\]\s*$", re.MULTILINE)


class FormatError(ValueError):
    """A file that is not valid in its format; ``line`` where known (1-based)."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        self.reason = message
        super().__init__(message)


@attrs.frozen
class Document:
    """A configuration file's decoded content, its text and format."""

    data: Any
    text: str
    format: Format
    path: str | None = None

    def line_of(self, server: str | None, field: str | None = None) -> int | None:
        """The 1-based line where ``server`` (and within it ``field``) is
        written, found in the text; None when it cannot be told."""
        if server is None:
            return None
        lines = self.text.splitlines()
        start = _find(lines, 0, _key_patterns(server, server_key=True))
        if start is None:
            return None
        if field is None:
            return start + 1
        found = start
        for part in field.replace("[", ".").replace("]", "").split("."):
            if not part or part.isdigit():
                continue
            at = _find(lines, found, _key_patterns(part, server_key=False))
            if at is None:
                break
            found = at
        return found + 1


def _key_patterns(key: str, *, server_key: bool) -> list[re.Pattern[str]]:
    k = re.escape(key)
    patterns = [
        re.compile(rf"""(^|[\s{{,])["']{k}["']\s*:"""),  # JSON, JSONC, quoted YAML
        re.compile(rf"""^\s*(-\s+)?{k}\s*[:=]"""),  # YAML, TOML keys
    ]
    if server_key:
        patterns.insert(0, re.compile(rf"""^\s*\[[^\]]*\.["']?{k}["']?\]\s*$"""))  # [mcp_servers.NAME]
        patterns.append(re.compile(rf"""^\s*-?\s*name\s*:\s*["']?{k}["']?\s*$"""))  # Continue's lists
    return patterns


def _find(lines: list[str], start: int, patterns: list[re.Pattern[str]]) -> int | None:
    for i in range(start, len(lines)):
        if any(p.search(lines[i]) for p in patterns):
            return i
    return None


def _format_of(path: str | None, text: str) -> Format:
    suffix = Path(path).suffix.lower() if path else ""
    if suffix == ".toml":
        return "toml"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix in (".json", ".jsonc", ".json5"):
        return "json"
    head = text.lstrip("\ufeff \t\r\n")
    if head.startswith(("{", "//", "/*")):
        return "json"
    if _TOML_TABLE.search(text):
        return "toml"
    return "yaml"


def read_document(path: str) -> Document:
    """Read and decode the file at ``path`` (see the module)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatError(f"cannot read the configuration file: {exc}") from None
    return parse_document(text, path=path)


def parse_document(text: str, *, path: str | None = None, format: Format | None = None) -> Document:
    """Decode ``text`` in ``format`` (default: told from ``path`` and the text)."""
    kind = format or _format_of(path, text)
    if kind == "toml":
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            match = _TOML_LINE.search(str(exc))
            raise FormatError(
                f"not valid TOML: {exc!s}", line=int(match.group(1)) if match else None
            ) from None
    elif kind == "yaml":
        data = _yaml(text)
    else:
        data = _json(text)
    return Document(data, text, kind, path)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as strict:
        first = strict
    import json5

    try:
        return json5.loads(text)
    except ValueError as exc:
        match = _JSON5_LINE.match(str(exc))
        if match:
            return _raise(f"not valid JSON (JSONC): {match.group(2)}", int(match.group(1)))
        return _raise(f"not valid JSON (JSONC): {first.msg} at column {first.colno}", first.lineno)


def _yaml(text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        problem = exc.problem or "invalid YAML"
        return _raise(f"not valid YAML: {problem}", None if mark is None else mark.line + 1)
    except yaml.YAMLError as exc:
        return _raise(f"not valid YAML: {exc}", None)


def _raise(message: str, line: int | None) -> Any:
    raise FormatError(message, line=line)
