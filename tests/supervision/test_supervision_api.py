"""Backoff arithmetic, spec validation and the curated public API."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_mcp import supervision
from trio_mcp.supervision import Backoff, ChildSpec, OnStartFailure, Restart


def test_backoff_caps_grow_geometrically_up_to_the_maximum() -> None:
    b = Backoff(initial=0.5, multiplier=3, maximum=10)
    assert [b.cap(n) for n in range(1, 6)] == [0.5, 1.5, 4.5, 10, 10]
    assert b.cap(10**6) == 10  # no overflow
    with pytest.raises(ValueError):
        b.cap(0)


def test_backoff_delay_is_full_jitter() -> None:
    b = Backoff(initial=2, maximum=2)
    assert b.delay(1, lambda: 0.0) == 0.0
    assert b.delay(1, lambda: 0.25) == 0.5
    assert b.delay(1, lambda: 1.0) == 2.0
    assert b.delay(1, lambda: 7.0) == 2.0  # a bad random source cannot exceed the cap
    assert b.delay(1, lambda: -1.0) == 0.0


# No per-example deadline (a timing, which a busy machine misses), as the other property tests.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.floats(0, 100),
    extra=st.floats(0, 1000),
    multiplier=st.floats(1, 10),
    attempt=st.integers(1, 5000),
    roll=st.floats(0, 1),
)
def test_backoff_delay_within_bounds(
    initial: float, extra: float, multiplier: float, attempt: int, roll: float
) -> None:
    b = Backoff(initial=initial, maximum=initial + extra, multiplier=multiplier)
    cap = b.cap(attempt)
    assert initial <= cap <= b.maximum
    assert b.cap(attempt + 1) >= cap
    assert 0 <= b.delay(attempt, lambda: roll) <= cap


@pytest.mark.parametrize(
    "options",
    [
        {"initial": -1},
        {"initial": 2, "maximum": 1},
        {"multiplier": 0.5},
        {"reset_after": -1},
    ],
)
def test_backoff_rejects_bad_settings(options: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**options)


async def _start(*, task_status: object = None) -> None:
    pass


def test_child_spec_defaults_and_keyword_only() -> None:
    spec = ChildSpec(id="x", start=_start)
    assert spec.restart is Restart.PERMANENT
    assert spec.shutdown_grace == 5.0
    assert spec.on_start_failure is OnStartFailure.ESCALATE
    assert spec.backoff == Backoff()
    with pytest.raises(TypeError):
        ChildSpec("x", _start)  # type: ignore[call-arg]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        spec.restart = Restart.TEMPORARY  # type: ignore[misc]
    for bad in ({"shutdown_grace": -1}, {"start_timeout": 0}, {"start_retries": -1}):
        with pytest.raises(ValueError):
            ChildSpec(id="x", start=_start, **bad)  # type: ignore[arg-type]


def test_public_api_is_curated() -> None:
    assert sorted(supervision.__all__) == sorted(set(supervision.__all__))
    for name in supervision.__all__:
        assert getattr(supervision, name) is not None
    public = {n for n in dir(supervision) if not n.startswith("_")}
    assert public - set(supervision.__all__) == set()
    assert {
        "Supervisor",
        "DynamicSupervisor",
        "ChildSpec",
        "Backoff",
        "Strategy",
        "Restart",
        "SupervisorEscalation",
        "StartFailure",
        "current_child",
    } <= set(supervision.__all__)
