"""Refusing path traversal in the values a resource template extracts from a URI.

A template such as ``file:///{+path}`` or ``notes://{name}`` usually ends in
a file or a key its function opens. A value is refused when, after
percent-decoding, or after decoding it again any number of times (a
double-encoded ``%252e%252e`` is ``%2e%2e`` once decoded, ``..`` twice), it
holds:

- a ``..`` segment (``/`` and ``\\`` both separate segments),
- an absolute path (``/etc``, ``\\\\server``, ``C:\\`` or ``C:/``),
- a NUL character.

The template matcher has already decoded once; :func:`traversal_problem`
looks at that value and at every further decoding of it.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

__all__ = ["MAX_DECODINGS", "traversal_problem"]

#: Further percent-decodings looked at; a value still changing after them is refused.
MAX_DECODINGS: Final = 4

_SEGMENT_SPLIT: Final = re.compile(r"[/\\]")
_DRIVE: Final = re.compile(r"^[A-Za-z]:([/\\]|$)")


def _problem_of(value: str) -> str | None:
    if "\x00" in value:
        return "contains a NUL character"
    if value.startswith(("/", "\\")) or _DRIVE.match(value):
        return "is an absolute path"
    if any(segment == ".." for segment in _SEGMENT_SPLIT.split(value)):
        return "has a '..' path segment"
    return None


def traversal_problem(value: str) -> str | None:
    """Why ``value`` (a template variable, decoded once) is refused, or ``None``."""
    for _ in range(MAX_DECODINGS + 1):
        problem = _problem_of(value)
        if problem is not None:
            return problem
        decoded = unquote(value)
        if decoded == value:
            return None
        value = decoded
    return "is percent-encoded too many times over"
