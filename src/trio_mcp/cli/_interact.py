"""What a person sees while a client command runs, and what it prints.

* Progress: a live bar (rich) when stderr is a terminal, plain lines otherwise.
* Server log messages: one line each on stderr.
* Elicitation: questions asked on the terminal; declined, with a message,
  when stdin or stderr is not a terminal.
* Results: text as it is, images / audio / blobs summarized (type, size),
  everything else as JSON.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any, Self, TextIO

import msgspec
import trio

from ..protocol import (
    AudioContent,
    ElicitRequestParams,
    ElicitResult,
    EmbeddedResource,
    ImageContent,
    LoggingMessageNotificationParams,
    ProgressNotificationParams,
    ResourceLink,
    TextContent,
    coerce,
)

__all__ = ["Display", "describe_block", "describe_contents", "elicitation_handler", "to_json"]


def to_json(value: Any) -> str:
    return json.dumps(msgspec.to_builtins(value), indent=2, ensure_ascii=False)


def _size(data: str) -> str:
    try:
        count = len(base64.b64decode(data, validate=False))
    except ValueError:
        count = len(data)
    return f"{count:,} bytes"


def describe_block(block: Any) -> str:
    """One content block as a person reads it."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, (ImageContent, AudioContent)):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, ResourceLink):
        return f"[link {block.uri}" + (f" — {block.description}]" if block.description else "]")
    if isinstance(block, EmbeddedResource):
        return describe_contents(block.resource)
    return json.dumps(msgspec.to_builtins(block), ensure_ascii=False)


def describe_contents(contents: Any) -> str:
    """Resource contents: the text, or a summary of a blob."""
    if contents.text is not msgspec.UNSET:
        return str(contents.text)
    mime = contents.mime_type if contents.mime_type is not msgspec.UNSET else "application/octet-stream"
    return f"[{contents.uri}: {mime}, {_size(contents.blob)}]"


class Display:
    """Progress and log messages of the server, on ``err`` (stderr)."""

    def __init__(self, err: TextIO | None = None, *, live: bool | None = None) -> None:
        self.err = err or sys.stderr
        self.live = self.err.isatty() if live is None else live
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def observe(self, method: str, params: Any) -> None:
        """An :class:`ObservedStream` observer: called in the server's order."""
        if method == "notifications/message":
            log = coerce(params, LoggingMessageNotificationParams)
            data = log.data if isinstance(log.data, str) else json.dumps(log.data, ensure_ascii=False)
            source = f" {log.logger}" if isinstance(log.logger, str) else ""
            self._line(f"[server {log.level}{source}] {data}")
        elif method == "notifications/progress":
            self.progress(coerce(params, ProgressNotificationParams))

    def _line(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self.err, flush=True)

    def progress(self, note: ProgressNotificationParams) -> None:
        total = None if note.total is msgspec.UNSET else note.total
        message = "" if note.message is msgspec.UNSET else note.message
        if not self.live:
            amount = f"{note.progress:g}" + (f"/{total:g}" if total is not None else "")
            self._line(f"progress {amount}" + (f" {message}" if message else ""))
            return
        if self._progress is None:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

            console = Console(file=self.err, force_terminal=True)
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), console=console
            )
            self._progress.start()
            self._task = self._progress.add_task(message or "working", total=total)
        self._progress.update(
            self._task, completed=note.progress, total=total, description=message or "working"
        )
        self._progress.refresh()


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def elicitation_handler(err: TextIO | None = None) -> Any:
    """``async fn(params) -> ElicitResult``: ask on the terminal, or decline."""
    out = err or sys.stderr

    async def answer(params: ElicitRequestParams) -> ElicitResult:
        if not _interactive():
            print(
                f"trio-mcp: the server asks: {params.message!r}; declined (not a terminal: "
                "run in a terminal to answer)",
                file=out,
                flush=True,
            )
            return ElicitResult(action="decline")
        return await trio.to_thread.run_sync(_ask, params, out, abandon_on_cancel=True)

    return answer


def _ask(params: ElicitRequestParams, out: TextIO) -> ElicitResult:
    print(f"The server asks: {params.message}", file=out, flush=True)
    try:
        if params.mode == "url":
            print(f"  open {params.url}", file=out, flush=True)
            reply = _prompt("  done? [y/N] ", out)
            return ElicitResult(action="accept" if reply.lower() in ("y", "yes") else "decline")
        schema = params.requested_schema
        props = {} if schema is msgspec.UNSET else msgspec.to_builtins(schema)["properties"]
        required = (
            set() if schema is msgspec.UNSET or schema.required is msgspec.UNSET else set(schema.required)
        )
        content: dict[str, Any] = {}
        for name, prop in props.items():
            value = _ask_field(name, prop, name in required, out)
            if value is not None:
                content[name] = value
        reply = _prompt("  send these answers? [Y/n/c(ancel)] ", out).lower()
    except EOFError:
        return ElicitResult(action="cancel")
    if reply in ("c", "cancel"):
        return ElicitResult(action="cancel")
    if reply in ("n", "no"):
        return ElicitResult(action="decline")
    return ElicitResult(action="accept", content=content)


def _prompt(text: str, out: TextIO) -> str:
    print(text, end="", file=out, flush=True)
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.strip()


def _ask_field(name: str, prop: dict[str, Any], required: bool, out: TextIO) -> Any:
    kind = prop.get("type", "string")
    choices = prop.get("enum") or [o.get("const") for o in prop.get("oneOf", []) if "const" in o]
    title = prop.get("title") or name
    hint = f" ({'/'.join(map(str, choices))})" if choices else f" ({kind})"
    default = prop.get("default")
    while True:
        shown = f" [{default}]" if default is not None else ""
        raw = _prompt(f"  {title}{hint}{'' if required else ', optional'}{shown}: ", out)
        if not raw:
            if default is not None:
                return default
            if not required:
                return None
            print("  an answer is required", file=out, flush=True)
            continue
        if choices and raw not in map(str, choices):
            print(f"  one of: {', '.join(map(str, choices))}", file=out, flush=True)
            continue
        if kind == "boolean":
            if raw.lower() in ("y", "yes", "true", "1"):
                return True
            if raw.lower() in ("n", "no", "false", "0"):
                return False
            print("  yes or no", file=out, flush=True)
            continue
        if kind in ("integer", "number"):
            try:
                return int(raw) if kind == "integer" else float(raw)
            except ValueError:
                print(f"  a {kind}, please", file=out, flush=True)
                continue
        if kind == "array":
            return [item.strip() for item in raw.split(",") if item.strip()]
        return raw
