"""collapse_groups: one failure seen twice comes out as one typed error."""

from __future__ import annotations

import pytest

from trio_mcp._util import collapse_groups
from trio_mcp.protocol import ConnectionClosed
from trio_mcp.transports import TransportError


def _raise(exc: BaseException) -> None:
    with collapse_groups(causes=(TransportError,)):
        raise exc


def test_a_call_error_and_the_transport_failure_behind_it_are_one_error() -> None:
    broken = TransportError("server exited with status 5")
    closed = ConnectionClosed("connection closed: server exited with status 5")
    with pytest.raises(ConnectionClosed) as info:
        _raise(ExceptionGroup("nursery", [broken, ExceptionGroup("inner", [closed])]))
    assert info.value is closed and info.value.__cause__ is broken


def test_a_single_error_keeps_its_own_cause() -> None:
    closed = ConnectionClosed("connection closed")
    closed.__cause__ = TransportError("why")
    with pytest.raises(ConnectionClosed) as info:
        _raise(ExceptionGroup("nursery", [closed]))
    assert str(info.value.__cause__) == "why"


def test_transport_failures_only_come_out_as_the_first() -> None:
    first, second = TransportError("a"), TransportError("b")
    with pytest.raises(TransportError) as info:
        _raise(ExceptionGroup("nursery", [first, second]))
    assert info.value is first


def test_unrelated_failures_stay_a_group() -> None:
    with pytest.raises(ExceptionGroup) as info:
        _raise(ExceptionGroup("nursery", [ValueError("a"), KeyError("b"), TransportError("c")]))
    assert len(info.value.exceptions) == 3


def test_a_base_exception_is_never_folded_away() -> None:
    with pytest.raises(BaseExceptionGroup):
        _raise(BaseExceptionGroup("nursery", [KeyboardInterrupt(), TransportError("c")]))
