"""``trio-mcp bench``: the command of the load tool (:mod:`trio_mcp.bench`).

trio-mcp bench [TARGET] TOOL key=value… [-c 16 | --rate 500/s] [--stage 30s:100/s]…
               [-d 10s | -n CALLS] [--warmup 1s] [--sessions S] [--workers W]
               [--scenario FILE.toml|yaml] [--threshold 'p99<50ms']… [--json]
               [--html REPORT.html] [--plot FILE.png] [--header 'Name: value']…
               [--auth env:VAR | --auth client-credentials --client-id ID
                (--client-secret-env VAR | --client-key FILE.pem) [--scope S]]
trio-mcp bench compare A.json B.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Literal

from ._connect import AuthSettings, add_auth_options, auth_settings
from ._targets import TargetError

__all__ = ["add_bench_parser", "main_bench"]


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``bench`` subcommand and its options."""
    bench: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help="load-test a server: closed or open model, scenarios, workers, live figures, reports",
        description="Load-test an MCP server. `trio-mcp bench compare A.json B.json` compares two runs.",
    )
    bench.add_argument("words", nargs="*", metavar="[TARGET] TOOL key=value | compare A.json B.json")
    load = bench.add_argument_group("load model")
    load.add_argument(
        "-c", "--concurrency", type=int, default=None, help="callers at once (closed model, default 16)"
    )
    load.add_argument(
        "--rate", default=None, help="calls per second, e.g. 500/s (open model: a fixed arrival rate)"
    )
    load.add_argument(
        "--stage",
        action="append",
        default=[],
        metavar="DURATION:LEVEL",
        help="ramp to LEVEL over DURATION: 30s:100/s (rate) or 1m:50 (callers); repeatable",
    )
    load.add_argument("-d", "--duration", default=None, help="time to measure: 10, 30s, 2m (default 10s)")
    load.add_argument("-n", "--calls", type=int, default=None, help="stop after this many calls")
    load.add_argument("--warmup", default="1s", help="load before measuring, not counted (default 1s)")
    load.add_argument(
        "--sessions", type=int, default=1, help="independent sessions (connections) to spread over"
    )
    load.add_argument("--workers", type=int, default=1, help="load-generating processes (default 1)")
    load.add_argument("--max-in-flight", type=int, default=None, help="open model: calls in flight at most")
    load.add_argument("--call-timeout", default="30s", help="bound of each call (default 30s)")
    load.add_argument(
        "--scenario", default=None, metavar="FILE", help="a weighted mix of operations (TOML or YAML)"
    )
    load.add_argument("--seed", type=int, default=0, help="seed of random argument choices")
    conn = bench.add_argument_group("connection")
    conn.add_argument(
        "--era", choices=("auto", "handshake", "modern"), default="auto", help="protocol era (default: probe)"
    )
    conn.add_argument(
        "--header", action="append", default=[], metavar="'Name: value'", help="HTTP header; repeatable"
    )
    add_auth_options(conn)
    out = bench.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="the whole report as JSON on stdout")
    out.add_argument("--html", default=None, metavar="REPORT.html", help="write a self-contained HTML report")
    out.add_argument(
        "--plot", default=None, metavar="FILE.png", help="write the charts as PNG (needs trio-mcp[plot])"
    )
    out.add_argument("--interval", default="1s", help="interval of the live figures and charts (default 1s)")
    out.add_argument("--live", choices=("auto", "rich", "plain", "off"), default="auto", help="live display")
    out.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="[OP:]METRIC<VALUE",
        help="pass/fail: 'p99<50ms', 'error_rate<0.1%%', 'call echo:p90<10ms'; exit 1 if one fails",
    )
    return bench


def _die(message: str) -> SystemExit:
    return SystemExit(f"trio-mcp: {message}")


def _headers(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition(":")
        if not sep or not name.strip():
            raise _die(f"a header is 'Name: value', not {pair!r}")
        out[name.strip()] = value.strip()
    return out


def _compare(paths: list[str]) -> int:
    from ..bench import compare_reports, format_compare

    if len(paths) != 2:
        raise _die("bench compare takes two JSON reports: A.json B.json")
    reports = []
    for path in paths:
        try:
            reports.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as exc:
            raise _die(f"cannot read the report {path}: {exc}") from None
        if "total" not in reports[-1]:
            raise _die(f"{path} is not a trio-mcp bench --json report")
    print(format_compare(compare_reports(reports[0], reports[1]), paths[0], paths[1]))
    return 0


def _plan(args: argparse.Namespace) -> Any:
    from ..bench import LoadPlan, parse_duration, parse_rate, parse_stage

    stages = tuple(parse_stage(s) for s in args.stage)
    model: Literal["open", "closed"] = (
        "open" if args.rate is not None or (stages and stages[0].model == "open") else "closed"
    )
    if args.rate is not None and args.concurrency is not None:
        raise _die("give callers (-c) or a rate (--rate), not both")
    if model == "open":
        level = parse_rate(args.rate) if args.rate is not None else 0.0
    else:
        level = float(args.concurrency if args.concurrency is not None else (0 if stages else 16))
    if stages and args.duration is not None:
        raise _die("with stages the run lasts as long as they do: leave out -d")
    if args.duration is not None:
        duration = parse_duration(args.duration)
    else:
        duration = math.inf if args.calls is not None else 10.0
    options: dict[str, Any] = {}
    if args.max_in_flight is not None:
        options["max_in_flight"] = args.max_in_flight
    plan = LoadPlan(
        model=model,
        level=level,
        stages=stages,
        duration=duration,
        calls=args.calls,
        warmup=parse_duration(args.warmup),
        sessions=args.sessions,
        call_timeout=parse_duration(args.call_timeout),
        interval=parse_duration(args.interval),
        seed=args.seed,
        **options,
    )
    if args.workers < 1:
        raise _die("workers must be at least 1")
    if args.workers > 1:
        if model == "closed" and plan.peak_level() < args.workers:
            raise _die("give at least one caller per worker")
        if plan.calls is not None and plan.calls < args.workers:
            raise _die("give at least one call per worker")
    return plan


async def _prepare(
    target: list[str],
    headers: dict[str, str],
    auth: AuthSettings | None,
    era: str,
    scenario: Any,
    shorthand: list[str],
) -> Any:
    """One session before the load: the shorthand ``TOOL key=value…`` typed by
    the tool's schema; every tool of the mix exists; a bad argument shows once
    here rather than in every call of the run."""
    import trio

    from ..bench import single_tool
    from ..bench._connect import open_session
    from ._arguments import coerce_value

    with trio.fail_after(60):
        async with open_session(target, headers=headers, auth=auth, era=era) as client:  # type: ignore[arg-type]
            if scenario is None:
                tools = {t.name: t for t in await client.list_all_tools()}
                tool, pairs = shorthand[0], shorthand[1:]
                if tool not in tools:
                    raise _die(f"no tool {tool!r}; the server has: {', '.join(sorted(tools)) or 'none'}")
                schema = tools[tool].input_schema
                props = schema.get("properties", {}) if isinstance(schema, dict) else {}
                arguments = {}
                for pair in pairs:
                    key, sep, value = pair.partition("=")
                    if not sep or not key:
                        raise _die(f"arguments are key=value, not {pair!r}")
                    arguments[key] = coerce_value(value, props.get(key))
                scenario = single_tool(tool, arguments)
            tool_ops = [op for op in scenario.operations if op.kind == "tool"]
            if tool_ops:
                names = {t.name for t in await client.list_all_tools()}
                for op in tool_ops:
                    if op.target not in names:
                        have = ", ".join(sorted(names)) or "none"
                        raise _die(f"no tool {op.target!r}; the server has: {have}")
            checked: set[str] = set()
            for op, args in scenario.mix(0):
                if op.name in checked:
                    break
                checked.add(op.name)
                if op.kind == "tool":
                    first = await client.call_tool(op.target, args)
                    if first.is_error is True:
                        text = " ".join(getattr(b, "text", "") for b in first.content).strip()
                        raise _die(f"{op.target} answered isError before the load run: {text}")
    return scenario


def main_bench(args: argparse.Namespace, command: list[str]) -> int:
    """Run ``trio-mcp bench`` (``command``: the stdio command after ``--``)."""
    import trio

    from ..bench import BenchConfig, PlanError, ScenarioError, ThresholdError, load_scenario, parse_threshold

    words = list(args.words)
    if words[:1] == ["compare"] and not command:
        return _compare(words[1:])
    if command:
        target, rest = command, words
    else:
        target, rest = words[:1], words[1:]
    if not target:
        raise _die("bench needs a TARGET: a URL, or '-- command args…'")
    headers = _headers(args.header)
    try:
        auth = auth_settings(args)
    except TargetError as exc:
        raise _die(str(exc)) from None
    if auth is not None and auth.kind == "oauth":
        raise _die(
            "bench does not run the browser login of --auth oauth: use --auth client-credentials, "
            "or --auth env:VAR with an access token"
        )
    try:
        plan = _plan(args)
        for text in args.threshold:
            parse_threshold(text)
        scenario = None
        if args.scenario is not None:
            if rest:
                raise _die("give a scenario file or TOOL key=value, not both")
            scenario = load_scenario(args.scenario)
        elif not rest:
            raise _die("bench needs a TOOL name (or --scenario FILE)")
        scenario = trio.run(_prepare, target, headers, auth, args.era, scenario, rest)
    except (PlanError, ScenarioError, ThresholdError, TargetError, ValueError) as exc:
        raise _die(str(exc)) from None
    config = BenchConfig(
        target=target,
        plan=plan,
        scenario=scenario,
        headers=headers,
        auth=auth,
        era=args.era,
        workers=args.workers,
        thresholds=list(args.threshold),
        live=args.live,
        stage_texts=list(args.stage),
    )
    from ..bench import for_json, format_summary, run_bench

    report = trio.run(run_bench, config)
    if args.json:
        print(json.dumps(for_json(report), indent=2))
    else:
        print(format_summary(report))
    if args.html:
        from ..bench import write_html

        write_html(report, args.html)
    if args.plot:
        from ..bench import write_plot

        try:
            write_plot(report, args.plot)
        except ImportError:
            print("trio-mcp: --plot needs matplotlib: pip install 'trio-mcp[plot]'", file=sys.stderr)
            return 1
    failed = [v for v in report["thresholds"] if not v["passed"]]
    for v in failed:
        why = v.get("why") or f"actual {v['shown']}"
        print(f"trio-mcp: threshold failed: {v['threshold']} ({why})", file=sys.stderr)
    if report["stopped"] == "interrupted":
        return 130
    if report["thresholds"]:
        return 1 if failed or report["stopped"] else 0
    clean = report["ok"] == report["calls"] and report["calls"] > 0
    return 0 if clean and report["stopped"] is None else 1
