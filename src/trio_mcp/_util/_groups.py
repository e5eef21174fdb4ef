"""Collapse single-exception groups at the public API edge."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def single(exc: BaseException) -> BaseException:
    """The innermost exception of nested one-member groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextmanager
def collapse_groups() -> Iterator[None]:
    """Re-raise a group holding exactly one exception as that exception.

    Groups with several members propagate unchanged: they really are several
    failures and the caller must see them all.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        inner = single(group)
        if inner is group:
            raise
        raise inner from None


def describe(exc: BaseException) -> str:
    """A one-line ``Type: message`` for an exception (one-member groups collapsed)."""
    exc = single(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
