"""Collapse single-exception groups at the public API edge."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def single(exc: BaseException) -> BaseException:
    """The innermost exception of nested one-member groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextmanager
def collapse_groups(*, causes: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Re-raise a group holding exactly one exception as that exception.

    With ``causes``: a group holding one error plus errors of these types is
    one failure seen twice (a caller's ``ConnectionClosed`` and the
    ``TransportError`` of the transport that broke under it): it is re-raised
    as that one error, the first of the others chained as its ``__cause__``
    (unless it has one), so the cause chain keeps the detail. A group of
    errors of these types only is re-raised as its first.

    Other groups propagate unchanged: they really are several failures and
    the caller must see them all.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        inner = single(group)
        if inner is not group:
            raise inner from inner.__cause__  # its own cause kept; the group dropped
        one = _one_failure(group, causes) if causes else None
        if one is None:
            raise
        error, cause = one
        if cause is None:
            raise error from None
        raise error from cause


def _leaves(group: BaseExceptionGroup[Any]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


def _one_failure(
    group: BaseExceptionGroup[Any], causes: tuple[type[Exception], ...]
) -> tuple[BaseException, BaseException | None] | None:
    """(the one error, its cause) if ``group`` is one failure (see :func:`collapse_groups`)."""
    leaves = list(_leaves(group))
    if not all(isinstance(exc, Exception) for exc in leaves):
        return None  # a Cancelled or KeyboardInterrupt is never folded away
    primary = [exc for exc in leaves if not isinstance(exc, causes)]
    secondary = [exc for exc in leaves if isinstance(exc, causes)]
    if len(primary) > 1:
        return None
    if not primary:
        return secondary[0], secondary[0].__cause__
    error = primary[0]
    return error, error.__cause__ or secondary[0]


def describe(exc: BaseException) -> str:
    """A one-line ``Type: message`` for an exception (one-member groups collapsed)."""
    exc = single(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
