"""The load tool for MCP servers (``trio-mcp bench``).

Load models (closed callers, open arrival rate with coordinated-omission
correction, ramp stages), sessions, weighted scenarios, worker processes
whose HDR histograms merge losslessly, a live display, and reports (text,
JSON, HTML, PNG) with thresholds and run-to-run comparison.
"""

from ._engine import End, SessionLost, Setup, run_load
from ._html import render_html, write_html
from ._plot import write_plot
from ._report import build_report, compare_reports, for_json, format_compare, format_summary
from ._runner import BenchConfig, run_bench
from ._scenario import Operation, Scenario, ScenarioError, load_scenario, single_tool
from ._settings import LoadPlan, PlanError, Stage, parse_duration, parse_rate, parse_stage
from ._stats import Aggregate, Tick
from ._thresholds import Threshold, ThresholdError, parse_threshold

__all__ = [
    "Aggregate",
    "BenchConfig",
    "End",
    "LoadPlan",
    "Operation",
    "PlanError",
    "Scenario",
    "ScenarioError",
    "SessionLost",
    "Setup",
    "Stage",
    "Threshold",
    "ThresholdError",
    "Tick",
    "build_report",
    "compare_reports",
    "for_json",
    "format_compare",
    "format_summary",
    "load_scenario",
    "parse_duration",
    "parse_rate",
    "parse_stage",
    "parse_threshold",
    "render_html",
    "run_bench",
    "run_load",
    "single_tool",
    "write_html",
    "write_plot",
]
