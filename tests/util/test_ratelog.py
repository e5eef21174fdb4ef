"""RepeatedWarnings: the first line, then one summary per interval, each counting."""

from __future__ import annotations

import logging

import pytest

from trio_mcp._util import RepeatedWarnings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_repeats_are_counted_and_summarized_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    warnings = RepeatedWarnings(logging.getLogger("test.ratelog"), interval=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.ratelog"):
        for i in range(1000):
            warnings.warning("bad", "bad line %d", i)
        warnings.warning("other", "another kind")  # its own budget
        clock.now += 10.0
        warnings.warning("bad", "bad line %d", 1000)
        for i in range(1001, 1500):
            warnings.warning("bad", "bad line %d", i)
        warnings.flush()
        warnings.flush()  # nothing more to say
    lines = [(r.getMessage(), r.repeated) for r in caplog.records]  # type: ignore[attr-defined]
    assert lines == [
        ("bad line 0", 1),
        ("another kind", 1),
        ("bad line 1000 (and 999 more like it in the last 10 s)", 1000),
        ("499 more like this were not logged (bad), e.g.: bad line 1001", 499),
    ]
    assert sum(count for _, count in lines) == 1501


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        RepeatedWarnings(logging.getLogger("x"), interval=0)
