"""URI templates (RFC 6570) for resource templates: matching and expansion.

Supported expressions:

- ``{var}`` and ``{a,b}``: simple string expansion. Values are
  percent-encoded on expansion (only unreserved characters stay as they
  are); when matching, a value is one or more characters other than ``/``,
  ``?`` and ``#`` (and ``,`` when the expression has several variables).
- ``{+var}``: reserved expansion. Reserved characters (``/``, ``:``, ``?``...)
  and existing ``%XX`` escapes are kept on expansion; when matching, a value
  is one or more of any character, as few as the rest of the template allows.
- ``{#var}``: fragment expansion (``#`` + reserved expansion); optional when
  matching.
- ``{?a,b}`` / ``{&a,b}``: form-style query / query continuation. Optional
  when matching; parameters may come in any order, each may be absent (it is
  then missing from the result) and parameters not named are ignored.

Matched values are percent-decoded (UTF-8). The level-3 operators ``.``,
``/`` and ``;`` and the level-4 modifiers ``:n`` and ``*`` are rejected with
:class:`ValueError`, as are malformed templates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote, unquote

import attrs

__all__ = ["UriTemplate"]

_VARNAME_RE: Final = re.compile(r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+(?:\.(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})+)*")
_PCT_RE: Final = re.compile(r"(%[0-9A-Fa-f]{2})")
_SUPPORTED_OPERATORS: Final = frozenset({"", "+", "#", "?", "&"})
_ALL_OPERATORS: Final = frozenset("+#./;?&=,!@|")
#: RFC 3986 reserved characters, kept by reserved and fragment expansion.
_RESERVED: Final = ":/?#[]@!$&'()*+,;="


@attrs.frozen
class _Expression:
    operator: str
    names: tuple[str, ...]


def _parse(template: str) -> list[str | _Expression]:
    parts: list[str | _Expression] = []
    pos = 0
    while pos < len(template):
        start = template.find("{", pos)
        close = template.find("}", pos)
        if close != -1 and (start == -1 or close < start):
            raise ValueError(f"unbalanced '}}' at position {close} in URI template {template!r}")
        if start == -1:
            parts.append(template[pos:])
            break
        if start > pos:
            parts.append(template[pos:start])
        end = template.find("}", start + 1)
        nested = template.find("{", start + 1)
        if end == -1:
            raise ValueError(f"unclosed '{{' at position {start} in URI template {template!r}")
        if nested != -1 and nested < end:
            raise ValueError(f"nested '{{' at position {nested} in URI template {template!r}")
        parts.append(_parse_expression(template, template[start + 1 : end]))
        pos = end + 1
    return parts


def _parse_expression(template: str, body: str) -> _Expression:
    operator = body[:1] if body[:1] in _ALL_OPERATORS else ""
    if operator not in _SUPPORTED_OPERATORS:
        raise ValueError(f"unsupported operator {operator!r} in {{{body}}} of URI template {template!r}")
    names = tuple(body[len(operator) :].split(","))
    for name in names:
        if name.endswith("*") or ":" in name:
            raise ValueError(
                f"modifiers (':n', '*') are not supported: {{{body}}} in URI template {template!r}"
            )
        if not _VARNAME_RE.fullmatch(name):
            raise ValueError(f"invalid variable name {name!r} in URI template {template!r}")
    return _Expression(operator, names)


def _group(expr: _Expression) -> tuple[str, int]:
    """The regex of one expression and the number of groups it captures."""
    op, names = expr.operator, expr.names
    if op in ("?", "&"):
        return rf"(?:\{op}([^#]*))?", 1
    if op == "":
        value = r"([^/?#]+)" if len(names) == 1 else r"([^/?#,]+)"
        return ",".join([value] * len(names)), len(names)
    body = ",".join([r"(.+?)"] * len(names))
    if op == "#":
        return rf"(?:#{body})?", len(names)
    return body, len(names)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _encode(value: str, reserved: bool) -> str:
    if not reserved:
        return quote(value, safe="")
    # keep reserved characters and well-formed %XX escapes, encode the rest
    return "".join(
        piece if i % 2 else quote(piece, safe=_RESERVED) for i, piece in enumerate(_PCT_RE.split(value))
    )


def _expand_value(value: Any, reserved: bool) -> str | None:
    """One variable's expansion, or ``None`` if it is undefined."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        if not value:
            return None
        return ",".join(
            f"{_encode(_text(k), reserved)},{_encode(_text(v), reserved)}" for k, v in value.items()
        )
    if isinstance(value, (list, tuple)):
        if not value:
            return None
        return ",".join(_encode(_text(v), reserved) for v in value)
    return _encode(_text(value), reserved)


class UriTemplate:
    """A parsed URI template: ``UriTemplate("file:///{+path}{?rev}")``.

    Parsing (and compiling the match regex) happens once, here; raises
    :class:`ValueError` for a malformed or unsupported template.
    """

    __slots__ = ("_groups", "_parts", "_regex", "_template", "_variables")

    def __init__(self, template: str) -> None:
        self._template = template
        self._parts = _parse(template)
        pattern: list[str] = []
        groups: list[tuple[str, _Expression, int]] = []  # (kind, expression, first group index)
        index = 1
        variables: dict[str, None] = {}
        for part in self._parts:
            if isinstance(part, str):
                pattern.append(re.escape(part))
                continue
            regex, count = _group(part)
            pattern.append(regex)
            groups.append(("query" if part.operator in ("?", "&") else "value", part, index))
            index += count
            variables.update(dict.fromkeys(part.names))
        self._regex = re.compile("".join(pattern), re.DOTALL)
        self._groups = tuple(groups)
        self._variables = tuple(variables)

    @property
    def template(self) -> str:
        return self._template

    @property
    def variables(self) -> tuple[str, ...]:
        """Variable names, in order of first appearance."""
        return self._variables

    def __str__(self) -> str:
        return self._template

    def __repr__(self) -> str:
        return f"UriTemplate({self._template!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UriTemplate) and other._template == self._template

    def __hash__(self) -> int:
        return hash(self._template)

    def match(self, uri: str) -> dict[str, str] | None:
        """The (percent-decoded) variable values if ``uri`` matches, else
        ``None``. Optional expressions (query, fragment) that are absent
        leave their variables out of the result."""
        m = self._regex.fullmatch(uri)
        if m is None:
            return None
        result: dict[str, str] = {}
        for kind, expr, first in self._groups:
            if kind == "query":
                query = m.group(first)
                if query is None:
                    continue
                wanted = expr.names
                for pair in query.split("&"):
                    if not pair:
                        continue
                    key, _, value = pair.partition("=")
                    key = unquote(key)
                    if key in wanted and key not in result:
                        result[key] = unquote(value)
                continue
            for offset, name in enumerate(expr.names):
                raw = m.group(first + offset)
                if raw is None:
                    continue
                value = unquote(raw)
                if result.setdefault(name, value) != value:
                    return None  # the same variable twice, with different values
        return result

    def expand(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> str:
        """The URI for ``values`` (a mapping and/or keyword arguments).

        ``None`` (or a missing variable, or an empty list) is undefined and
        omitted as RFC 6570 says; lists expand to comma-separated items,
        mappings to ``k,v`` pairs, booleans to ``true`` / ``false``.
        """
        env: dict[str, Any] = dict(values) if values else {}
        env.update(kwargs)
        out: list[str] = []
        for part in self._parts:
            if isinstance(part, str):
                out.append(part)
                continue
            op = part.operator
            reserved = op in ("+", "#")
            if op in ("?", "&"):
                pairs = []
                for name in part.names:
                    expanded = _expand_value(env.get(name), reserved=False)
                    if expanded is not None:
                        pairs.append(f"{name}={expanded}")
                if pairs:
                    out.append(op + "&".join(pairs))
                continue
            items = [v for v in (_expand_value(env.get(n), reserved) for n in part.names) if v is not None]
            if items:
                out.append(("#" if op == "#" else "") + ",".join(items))
        return "".join(out)
