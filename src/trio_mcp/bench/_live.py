"""The display while a run goes on: a rich live panel on a terminal, one
plain line per interval otherwise (both on stderr, so ``--json`` output on
stdout stays clean)."""

from __future__ import annotations

import sys
from typing import IO, Any

from ._stats import Aggregate
from ._thresholds import ms

__all__ = ["LiveDisplay"]


class LiveDisplay:
    """Call :meth:`update` after each tick, :meth:`close` at the end."""

    def __init__(self, *, measured_seconds: float, out: IO[str] | None = None, mode: str = "auto") -> None:
        self.out = out or sys.stderr
        self.measured_seconds = measured_seconds
        tty = self.out.isatty() if mode == "auto" else mode == "rich"
        self.mode = "off" if mode == "off" else ("rich" if tty else "plain")
        self._shown = 0
        self._live: Any = None
        if self.mode == "rich":
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.out, force_terminal=True)
            self._live = Live(console=console, refresh_per_second=4, transient=False)
            self._live.start()

    def figures(self, agg: Aggregate) -> dict[str, Any]:
        last = agg.intervals[-1] if agg.intervals else None
        elapsed = last["seconds"] if last else 0.0
        totals = agg.total() if last else None
        calls = totals.calls if totals else 0
        return {
            "warmup": last is None,
            "elapsed": elapsed,
            "remaining": max(0.0, self.measured_seconds - elapsed),
            "now": last["calls_per_s"] if last else 0.0,
            "overall": calls / elapsed if elapsed > 0 else 0.0,
            "calls": calls,
            "ok": totals.ok if totals else 0,
            "is_error": totals.is_error if totals else 0,
            "failed": dict(sorted(totals.failed.items())) if totals else {},
            "p50": last["latency_us"]["p50"] if last else 0,
            "p99": last["latency_us"]["p99"] if last else 0,
            "in_flight": sum(agg.in_flight.values()),
            "warmup_calls": agg.warmup_calls,
        }

    def update(self, agg: Aggregate) -> None:
        if self.mode == "off":
            return
        f = self.figures(agg)
        if self.mode == "rich":
            self._live.update(self._panel(f))
            return
        if len(agg.intervals) == self._shown:
            return
        self._shown = len(agg.intervals)
        self.out.write(self._line(f) + "\n")
        self.out.flush()

    def warming(self, agg: Aggregate) -> None:
        """A warm-up tick arrived (nothing measured yet)."""
        if self.mode == "rich":
            self._live.update(self._panel(self.figures(agg)))
        elif self.mode == "plain":
            self.out.write(f"[warm-up] {agg.warmup_calls:,} calls, {sum(agg.in_flight.values())} in flight\n")
            self.out.flush()

    def message(self, text: str) -> None:
        if self.mode == "rich":
            self._live.console.print(text)
        elif self.mode == "plain":
            self.out.write(text + "\n")
            self.out.flush()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @staticmethod
    def _failed(f: dict[str, Any]) -> str:
        total = sum(f["failed"].values())
        kinds = ", ".join(f"{k}: {n:,}" for k, n in f["failed"].items())
        return f"{total:,} failed" + (f" ({kinds})" if kinds else "")

    def _line(self, f: dict[str, Any]) -> str:
        return (
            f"[{f['elapsed']:6.1f}s, {f['remaining']:.0f}s left] {f['now']:,.1f} calls/s now, "
            f"{f['overall']:,.1f} overall | {f['ok']:,} ok, {f['is_error']:,} isError, {self._failed(f)} | "
            f"p50 {ms(f['p50'])}, p99 {ms(f['p99'])} now | {f['in_flight']} in flight"
        )

    def _panel(self, f: dict[str, Any]) -> Any:
        from rich.table import Table

        table = Table(title="trio-mcp bench", show_header=False, min_width=60)
        table.add_column(style="bold cyan")
        table.add_column()
        if f["warmup"]:
            table.add_row("phase", f"warm-up ({f['warmup_calls']:,} calls, not measured)")
        else:
            table.add_row("elapsed", f"{f['elapsed']:.1f} s ({f['remaining']:.0f} s remaining)")
            table.add_row("calls/s", f"{f['now']:,.1f} now, {f['overall']:,.1f} overall")
            table.add_row("calls", f"{f['calls']:,}: {f['ok']:,} ok, {f['is_error']:,} isError")
            table.add_row("failed", self._failed(f))
            table.add_row("latency now", f"p50 {ms(f['p50'])}, p99 {ms(f['p99'])}")
        table.add_row("in flight", f"{f['in_flight']:,}")
        return table
