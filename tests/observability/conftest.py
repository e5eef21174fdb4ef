"""An OpenTelemetry SDK tracer provider whose spans the tests read back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trio_mcp.observability import Tracing


class Spans:
    """The finished spans of one test, looked up by name and kind."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracing = Tracing(self.provider)

    def all(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def named(self, name: str, kind: str) -> ReadableSpan:
        found = [s for s in self.all() if s.name == name and s.kind.name == kind]
        assert len(found) == 1, f"{len(found)} {kind} spans named {name!r} in {[s.name for s in self.all()]}"
        return found[0]


@pytest.fixture
def spans() -> Iterator[Spans]:
    collected = Spans()
    yield collected
    collected.provider.shutdown()
