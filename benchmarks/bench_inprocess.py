"""In-process ``tools/call`` throughput and latency: trio-mcp vs the official Python SDK.

    .venv/bin/python benchmarks/bench_inprocess.py               # 3 s per row
    .venv/bin/python benchmarks/bench_inprocess.py --seconds 10
    .venv/bin/python benchmarks/bench_inprocess.py --ours-only   # no SDK needed

The same tool on both sides, ``async def echo(text: str) -> str``, called
back-to-back by one caller (``seq``) and by ``--concurrency`` callers at once
(``c64``), each row measured for ``--seconds`` after a warm-up:

* trio-mcp ``zero-copy``: ``trio_mcp.testing.connected(mode="zero-copy")``,
  message objects handed across, no encoding;
* trio-mcp ``bytes``: the same pair, every message through the JSON codec as
  on a wire;
* trio-mcp ``inline``: ``connected(mode="inline")``, the zero-copy pair
  whose calls the server session serves in the caller's task (no frames, no
  task switch), the counterpart of the SDK's direct path below;
* mcp-sdk ``legacy``: ``mcp.Client(server, mode="legacy")``, the SDK's
  in-memory transport (message objects over anyio streams) after the
  initialize handshake, run by ``benchmarks/sdk_inprocess.py`` in the SDK's
  own venv (``.cache/sdk-venv``, made by ``bash scripts/setup-interop``);
* mcp-sdk ``2026-07-28``: ``mode="auto"``, the SDK's direct in-process path,
  if it works.

The two sides run one after the other, never at the same time. Output: a
table, the trio-mcp/SDK throughput ratios, then one JSON line per row and a
JSON summary line (``"summary": true``) holding the ratios.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _report import (
    BENCH,
    PAYLOAD,
    default_warmup,
    json_line,
    label,
    make_row,
    measure,
    parse_rows,
    sdk_env,
    table,
)

IMPL = "trio-mcp"
SDK = "mcp-sdk"
#: Our rows: each memory mode in each protocol era (the 2026-07-28 rows are
#: labelled "<mode> 2026" and compared with the SDK's 2026-07-28 rows).
MODES = ("zero-copy", "bytes", "inline")
ERAS = (("handshake", "", MODES), ("modern", " 2026", MODES))
SDK_PYTHON = ROOT / ".cache" / "sdk-venv" / "bin" / "python"


def run_ours(args: argparse.Namespace) -> list[dict[str, Any]]:
    import trio

    from trio_mcp.server import MCPServer
    from trio_mcp.testing import connected

    app = MCPServer("bench", "1.0")

    @app.tool
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    rows: list[dict[str, Any]] = []

    async def main() -> None:
        for era, suffix, modes in ERAS:
            for mode in modes:
                async with connected(app, mode=mode, era=era) as client:
                    await one_pairing(client, mode + suffix)

    async def one_pairing(client: Any, name: str) -> None:
        async def call() -> None:
            await client.call_tool("echo", {"text": PAYLOAD})

        check = await client.call_tool("echo", {"text": PAYLOAD})
        if check.is_error or check.content[0].text != PAYLOAD:
            raise RuntimeError(f"unexpected echo result: {check!r}")
        for concurrency in (1, args.concurrency):
            progress(f"{IMPL} {name} {label(concurrency)}")
            latencies = await measure(
                call,
                concurrency=concurrency,
                warmup=args.warmup,
                seconds=args.seconds,
                open_group=trio.open_nursery,
            )
            rows.append(
                make_row(IMPL, name, concurrency, latencies, args.seconds, protocol=client.protocol_version)
            )

    trio.run(main)
    return rows


def run_sdk(args: argparse.Namespace) -> list[dict[str, Any]]:
    progress(f"{SDK} (subprocess: {args.sdk_python})")
    cmd = [
        str(args.sdk_python),
        str(HERE / "sdk_inprocess.py"),
        "--seconds",
        repr(args.seconds),
        "--warmup",
        repr(args.warmup),
        "--concurrency",
        str(args.concurrency),
    ]
    if args.sdk_legacy_only:
        cmd.append("--legacy-only")
    env = sdk_env()
    # 4 rows of warm-up + measurement, plus generous start-up and teardown slack.
    budget = 4 * (args.warmup + args.seconds) + 60
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, timeout=budget)
    rows = parse_rows(proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError(f"the SDK side exited with status {proc.returncode}")
    if not any(r["mode"] == "legacy" for r in rows):
        raise RuntimeError("the SDK side printed no legacy rows")
    return rows


def ratios(
    ours: list[dict[str, Any]], sdk: list[dict[str, Any]], sdk_mode: str, key: str = "calls_per_s"
) -> dict[str, float]:
    """trio-mcp over SDK per row, for throughput (``calls_per_s``); for a
    latency ``key`` (``p50_us``) the SDK over trio-mcp, so > 1 is still better."""
    base = {r["concurrency"]: r[key] for r in sdk if r["mode"] == sdk_mode}
    out = {}
    for r in ours:
        b = base.get(r["concurrency"])
        if b and r[key]:
            value = r[key] / b if key == "calls_per_s" else b / r[key]
            out[f"{r['mode']} {label(r['concurrency'])}"] = round(value, 2)
    return out


def progress(message: str) -> None:
    print(f"[bench_inprocess] {message} ...", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="measured duration per row (default 3)")
    parser.add_argument(
        "--warmup", type=float, default=None, help="warm-up before each row (default: min(0.5, seconds/2))"
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="callers in flight in the concurrent rows"
    )
    parser.add_argument("--ours-only", action="store_true", help="skip the official SDK rows")
    parser.add_argument(
        "--sdk-python",
        type=Path,
        default=SDK_PYTHON,
        help="python of the venv holding the official SDK (default .cache/sdk-venv)",
    )
    parser.add_argument("--sdk-legacy-only", action="store_true", help="skip the SDK's 2026-07-28 rows")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.concurrency < 1:
        parser.error("--seconds must be > 0 and --concurrency >= 1")
    if args.warmup is None:
        args.warmup = default_warmup(args.seconds)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.ours_only and not Path(args.sdk_python).exists():
        print(
            f"bench_inprocess: the official SDK venv is missing ({args.sdk_python} not found).\n"
            "  create it with:  bash scripts/setup-interop\n"
            "  or run only trio-mcp:  --ours-only",
            file=sys.stderr,
        )
        return 2

    ours = run_ours(args)
    sdk: list[dict[str, Any]] = []
    failure = None
    if not args.ours_only:
        try:
            sdk = run_sdk(args)
        except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
            failure = str(exc)

    rows = ours + sdk
    print()
    print(f"in-process tools/call, echo tool, {args.seconds:g} s per row after {args.warmup:g} s warm-up")
    print(table(rows))
    summary: dict[str, Any] = {
        "bench": BENCH,
        "summary": True,
        "seconds": args.seconds,
        "concurrency": args.concurrency,
    }
    if sdk:
        handshake = [r for r in ours if not r["mode"].endswith(" 2026")]
        modern = [r for r in ours if r["mode"].endswith(" 2026")]
        vs_legacy = ratios(handshake, sdk, "legacy")
        vs_modern = ratios(modern, sdk, "2026-07-28")
        summary["baseline"] = f"{SDK} legacy"
        p50_legacy = ratios(handshake, sdk, "legacy", "p50_us")
        summary["ratios"] = vs_legacy
        summary["p50_ratios"] = p50_legacy
        if vs_modern:
            summary["ratios_vs_2026"] = vs_modern
            summary["p50_ratios_vs_2026"] = ratios(modern, sdk, "2026-07-28", "p50_us")
        sdk_version = sdk[0].get("sdk_version")
        if sdk_version:
            summary["sdk_version"] = sdk_version
        print()
        print(
            f"trio-mcp / official SDK {sdk_version or ''} calls/s (and SDK / trio-mcp p50 latency), same era:"
        )
        for key, value in vs_legacy.items():
            print(f"  {key + ':':20} {value:5.1f}× SDK legacy     (p50 {p50_legacy[key]:4.1f}×)")
        p50_modern = summary.get("p50_ratios_vs_2026", {})
        for key, value in vs_modern.items():
            print(f"  {key + ':':20} {value:5.1f}× SDK 2026-07-28 (p50 {p50_modern.get(key, 0):4.1f}×)")
    print()
    for row in rows:
        json_line(row)
    json_line(summary)
    if failure is not None:
        print(f"bench_inprocess: the SDK side failed: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
