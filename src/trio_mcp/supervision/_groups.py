"""Exception groups holding one exception, collapsed to that exception
(the supervisor's public edge and a child's crash reason)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["collapse", "collapsed_groups"]


def single_leaf(exc: BaseException) -> BaseException | None:
    while isinstance(exc, BaseExceptionGroup):
        if len(exc.exceptions) != 1:
            return None
        exc = exc.exceptions[0]
    return exc


def collapse(exc: BaseException) -> BaseException:
    leaf = single_leaf(exc)
    return exc if leaf is None else leaf


@contextlib.contextmanager
def collapsed_groups() -> Iterator[None]:
    """Re-raise a (nested) exception group holding one exception as that exception."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = single_leaf(group)
        if leaf is None:
            raise
        context = leaf.__context__
        try:
            raise leaf  # keep leaf's own context: the group is noise
        finally:
            leaf.__context__ = context
            del leaf, context
