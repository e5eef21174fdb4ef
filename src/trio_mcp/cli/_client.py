"""The client commands: every client operation of MCP from the command line.

    trio-mcp list      TARGET                  tools, prompts, resources and templates
    trio-mcp tools     TARGET                  (and resources, templates, prompts)
    trio-mcp call      TARGET TOOL key=value…  call a tool
    trio-mcp read      TARGET URI              read a resource
    trio-mcp prompt    TARGET NAME key=value…  get a prompt
    trio-mcp complete  TARGET REF ARG VALUE    complete an argument (REF: a prompt name or a URI template)
    trio-mcp set-level TARGET LEVEL            set the server's log level
    trio-mcp ping      TARGET                  check that the server answers

TARGET is a URL or ``-- command args…`` (stdio); the connection options are
in :mod:`._connect`. ``--json`` prints one JSON object on stdout, and errors as
``{"error": {...}}`` on stderr. Exit codes: :data:`~._connect.EXIT_OK` and
the others of :mod:`._connect`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio

from .._util import single
from ..actors._server import LOG_LEVELS
from ..protocol import ConnectionClosed, McpError, PromptReference, ResourceTemplateReference
from ._arguments import UsageError, closest, tool_arguments
from ._connect import (
    EXIT_CONNECTION,
    EXIT_OK,
    EXIT_PROTOCOL,
    EXIT_TIMEOUT,
    EXIT_TOOL_ERROR,
    EXIT_USAGE,
    add_connection_options,
    open_client,
    split_target,
)
from ._interact import Display, describe_block, describe_contents, elicitation_handler, to_json
from ._targets import TargetError

__all__ = ["CLIENT_VERBS", "add_client_verbs", "parse_client_verb", "run_client_verb"]

Verb = Callable[[Any, argparse.Namespace, list[str], Display], Awaitable[tuple[Any, str, int]]]

_HTTP_STATUS = re.compile(r"\bHTTP (\d{3})\b")


# ------------------------------------------------------------------ verbs


async def _list(client: Any, args: argparse.Namespace, words: list[str], _: Display) -> tuple[Any, str, int]:
    _no_more(words, args.command)
    kinds = {
        "list": ("tools", "prompts", "resources", "templates"),
        "tools": ("tools",),
        "prompts": ("prompts",),
        "resources": ("resources",),
        "templates": ("templates",),
    }[args.command]
    found: dict[str, list[Any]] = {}
    for kind in kinds:
        found[kind] = await _fetch(client, kind)
    data = {("resourceTemplates" if k == "templates" else k): v for k, v in found.items()}
    lines: list[str] = []
    for kind, items in found.items():
        if len(kinds) > 1:
            lines.append(f"{'resource templates' if kind == 'templates' else kind} ({len(items)}):")
        for item in items:
            key = item.uri if kind == "resources" else item.uri_template if kind == "templates" else item.name
            desc = item.description if isinstance(item.description, str) else ""
            indent = "  " if len(kinds) > 1 else ""
            lines.append(f"{indent}{key}" + (f" — {desc.splitlines()[0]}" if desc.strip() else ""))
    return data, "\n".join(lines), EXIT_OK


async def _fetch(client: Any, kind: str) -> list[Any]:
    method = {"templates": "resources/templates/list"}.get(kind, f"{kind}/list")
    if not client.supports(method if kind != "templates" else "resources/list"):
        return []
    fetch = {
        "tools": client.list_all_tools,
        "prompts": client.list_all_prompts,
        "resources": client.list_all_resources,
        "templates": client.list_all_resource_templates,
    }[kind]
    items: list[Any] = await fetch()
    return items


async def _call(
    client: Any, args: argparse.Namespace, words: list[str], display: Display
) -> tuple[Any, str, int]:
    if not words:
        raise UsageError("call needs a TOOL name")
    name, pairs = words[0], words[1:]
    tools = {t.name: t for t in await client.list_all_tools()} if client.supports("tools/list") else {}
    if name not in tools:
        raise UsageError(_unknown("tool", name, tools))
    arguments = tool_arguments(pairs, tools[name].input_schema, what=f"tool {name!r}")
    await _set_level(client, args)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        """Shown by the display, in order with the log messages."""

    if client.tasks.required_by(tools[name]):  # runs as a task; its status shown on stderr meanwhile
        result = await client.tasks.run_tool(name, arguments, on_status=client.tasks.print_status)
    else:
        result = await client.call_tool(name, arguments, on_progress=on_progress)
    text = "\n".join(describe_block(b) for b in result.content)
    if not result.content and result.structured_content is not msgspec.UNSET:
        text = json.dumps(msgspec.to_builtins(result.structured_content), indent=2, ensure_ascii=False)
    return result, text, EXIT_TOOL_ERROR if result.is_error is True else EXIT_OK


async def _read(client: Any, args: argparse.Namespace, words: list[str], _: Display) -> tuple[Any, str, int]:
    if len(words) != 1:
        raise UsageError("read needs one URI")
    await _set_level(client, args)
    result = await client.read_resource(words[0])
    return result, "\n".join(describe_contents(c) for c in result.contents), EXIT_OK


async def _prompt(
    client: Any, args: argparse.Namespace, words: list[str], _: Display
) -> tuple[Any, str, int]:
    if not words:
        raise UsageError("prompt needs a prompt NAME")
    name, pairs = words[0], words[1:]
    prompts = {p.name: p for p in await client.list_all_prompts()} if client.supports("prompts/list") else {}
    if name not in prompts:
        raise UsageError(_unknown("prompt", name, prompts))
    declared = prompts[name].arguments
    names = [a.name for a in declared] if declared is not msgspec.UNSET else []
    schema = {"type": "object", "properties": {n: {"type": "string"} for n in names}}
    arguments = tool_arguments(pairs, schema, what=f"prompt {name!r}")
    await _set_level(client, args)
    result = await client.get_prompt(name, arguments)
    lines = [f"{m.role}: {describe_block(m.content)}" for m in result.messages]
    return result, "\n".join(lines), EXIT_OK


async def _complete(
    client: Any, args: argparse.Namespace, words: list[str], _: Display
) -> tuple[Any, str, int]:
    if len(words) < 3:
        raise UsageError("complete needs REF ARGUMENT VALUE [key=value… of the other arguments]")
    ref_text, argument, value, pairs = words[0], words[1], words[2], words[3:]
    ref: PromptReference | ResourceTemplateReference
    ref = (
        ResourceTemplateReference(uri=ref_text)
        if "{" in ref_text or "://" in ref_text
        else PromptReference(name=ref_text)
    )
    context = tool_arguments(pairs, {"type": "object", "additionalProperties": {"type": "string"}})
    result = await client.complete(
        ref, argument, value, context={k: str(v) for k, v in context.items()} or None
    )
    return result, "\n".join(result.completion.values), EXIT_OK


async def _set_level_verb(
    client: Any, args: argparse.Namespace, words: list[str], _: Display
) -> tuple[Any, str, int]:
    if len(words) != 1 or words[0] not in LOG_LEVELS:
        raise UsageError(f"set-level needs one LEVEL: {', '.join(LOG_LEVELS)}")
    await client.set_logging_level(words[0])
    return {"level": words[0]}, f"log level set to {words[0]}", EXIT_OK


async def _ping(client: Any, args: argparse.Namespace, words: list[str], _: Display) -> tuple[Any, str, int]:
    _no_more(words, "ping")
    start = trio.current_time()
    await client.ping()
    elapsed = trio.current_time() - start
    info = client.server_info
    name = f"{info.name} {info.version}" if info is not None else "the server"
    return (
        {"ok": True, "seconds": round(elapsed, 6), "protocolVersion": client.protocol_version},
        f"{name} answered in {elapsed * 1000:.1f} ms",
        EXIT_OK,
    )


async def _set_level(client: Any, args: argparse.Namespace) -> None:
    """Ask for log messages from ``--log-level`` (default info) on, where the server logs."""
    level = getattr(args, "log_level", None)
    if level is not None and client.supports("logging/setLevel"):
        await client.set_logging_level(level)


def _no_more(words: list[str], verb: str) -> None:
    if words:
        raise UsageError(f"{verb} takes no more words: {' '.join(words)!r}")


def _unknown(kind: str, name: str, known: dict[str, Any]) -> str:
    hint = closest(name, known)
    if hint:
        return f"no {kind} {name!r}; did you mean {' or '.join(map(repr, hint))}?"
    return f"no {kind} {name!r}; the server has: {', '.join(sorted(known)) or 'none'}"


#: verb -> (implementation, help, usage of the words after TARGET)
CLIENT_VERBS: dict[str, tuple[Verb, str, str]] = {
    "list": (_list, "list a server's tools, prompts, resources and resource templates", ""),
    "tools": (_list, "list the tools", ""),
    "resources": (_list, "list the resources", ""),
    "templates": (_list, "list the resource templates", ""),
    "prompts": (_list, "list the prompts", ""),
    "call": (_call, "call a tool", "TOOL [key=value …]"),
    "read": (_read, "read a resource", "URI"),
    "prompt": (_prompt, "get a prompt", "NAME [key=value …]"),
    "complete": (_complete, "complete a prompt or resource template argument", "REF ARGUMENT VALUE"),
    "set-level": (_set_level_verb, "set the server's log level", "LEVEL"),
    "ping": (_ping, "check that the server answers", ""),
}


def add_client_verbs(sub: Any) -> None:
    """The client commands, listed on the ``trio-mcp`` subparsers ``sub`` (for
    ``--help``); :func:`parse_client_verb` parses their command lines."""
    for verb, (_, summary, usage) in CLIENT_VERBS.items():
        _verb_options(sub.add_parser(verb, help=summary, description=summary + "."), verb, usage)


def parse_client_verb(verb: str, words: list[str]) -> argparse.Namespace:
    """The arguments of ``trio-mcp VERB words…``: options anywhere among the words."""
    _, summary, usage = CLIENT_VERBS[verb]
    parser = argparse.ArgumentParser(prog=f"trio-mcp {verb}", description=summary + ".")
    _verb_options(parser, verb, usage)
    args = parser.parse_intermixed_args(words)
    args.command = verb
    return args


def _verb_options(parser: argparse.ArgumentParser, verb: str, usage: str) -> None:
    parser.add_argument(
        "words",
        nargs="*",
        metavar=f"TARGET {usage}".strip() if usage else "TARGET",
        help="a URL, or the stdio server's command line after --",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    if verb in ("call", "read", "prompt"):
        parser.add_argument(
            "--log-level",
            choices=LOG_LEVELS,
            default="info",
            help="show the server's log messages from this level on (default: info)",
        )
    add_connection_options(parser)


# ------------------------------------------------------------------ running


def run_client_verb(args: argparse.Namespace, command: list[str]) -> int:
    """Run one client command; returns its exit code (module docstring)."""
    verb = CLIENT_VERBS[args.command][0]
    display = Display()
    outcome: dict[str, Any] = {}
    connected = False

    async def main() -> None:
        nonlocal connected
        target, words = split_target(args.words, command)
        outcome["target"] = " ".join(target)
        with trio.fail_after(args.timeout) if args.timeout else _no_limit():
            async with open_client(
                args, target, observer=display.observe, elicitation_handler=elicitation_handler()
            ) as client:
                connected = True
                with display:
                    outcome["result"] = await verb(client, args, words, display)

    try:
        trio.run(main)
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:
        return _report(args, single(exc), connected, outcome.get("target", ""))
    data, text, code = outcome["result"]
    try:
        if args.json:
            print(to_json(data))
        elif text:
            print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    return int(code)


class _no_limit:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _quiet_stdout() -> None:
    """The reader went away (``| head``): no traceback when Python flushes stdout at exit."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _report(args: argparse.Namespace, exc: BaseException, connected: bool, target: str) -> int:
    """One line (or a JSON envelope) on stderr for a failure; its exit code."""
    if isinstance(exc, SystemExit):
        raise exc
    if isinstance(exc, BrokenPipeError):
        _quiet_stdout()
        return EXIT_OK
    code: int | None = None
    kind: str
    if isinstance(exc, (UsageError, TargetError)):
        kind, status, message = "usage", EXIT_USAGE, str(exc)
    elif isinstance(exc, trio.TooSlowError):
        kind, status, message = "timeout", EXIT_TIMEOUT, f"no answer within {args.timeout:g} s (--timeout)"
    elif isinstance(exc, McpError) and not isinstance(exc, ConnectionClosed) and connected:
        kind, status, message, code = "protocol", EXIT_PROTOCOL, exc.message, exc.code
    else:
        kind, status = "connection", EXIT_CONNECTION
        message = _connection_message(exc, target, connected)
        if isinstance(exc, McpError):
            code = exc.code
        elif not _is_connection_error(exc):
            raise exc
    if getattr(args, "json", False):
        error: dict[str, Any] = {"kind": kind, "message": message, "exitCode": status}
        if code is not None:
            error["code"] = code
        print(json.dumps({"error": error}), file=sys.stderr)
    else:
        print(f"trio-mcp: {message}", file=sys.stderr)
    return status


def _is_connection_error(exc: BaseException) -> bool:
    import httpx

    from ..transports import TransportError

    return isinstance(exc, (McpError, TransportError, OSError, httpx.HTTPError))


def _connection_message(exc: BaseException, target: str, connected: bool) -> str:
    text = " ".join(str(getattr(exc, "message", None) or exc).split())
    if not connected and target.startswith(("http://", "https://")):
        verdict = _not_mcp(target)
        if verdict is not None:
            return verdict
    status = _HTTP_STATUS.search(text)
    if status is not None and target.startswith(("http://", "https://")):
        return f"{target} answered HTTP {status.group(1)}, not MCP (is the URL right?)"
    return f"cannot reach {target}: {text}" if target and target not in text else text


#: Seconds the diagnostic request of a failed connection may take.
DIAGNOSE_TIMEOUT = 5.0


def _not_mcp(url: str) -> str | None:
    """After a failed connection: one plain POST of ``initialize``; when what
    answers is not MCP (an error status, HTML), say so in one line."""
    import httpx

    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "trio-mcp"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if url.rstrip("/").endswith("/sse"):
        return None  # legacy SSE: a GET stream, not a POST
    try:
        with httpx.Client(timeout=DIAGNOSE_TIMEOUT) as http:
            response = http.post(url, json=body, headers=headers)
    except httpx.HTTPError:
        return None  # unreachable: the transport's own message says it best
    ctype = response.headers.get("content-type", "").partition(";")[0].strip() or "no content type"
    if response.status_code >= 400 or ctype not in ("application/json", "text/event-stream"):
        reason = response.reason_phrase or httpx.codes.get_reason_phrase(response.status_code)
        status = f"HTTP {response.status_code}" + (f" {reason}" if reason else "")
        return f"{url} answered {status} ({ctype}): not an MCP endpoint (is the URL right?)"
    return None
