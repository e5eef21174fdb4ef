"""The client under test of the official MCP conformance suite.

``conformance client --command "python examples/conformance_client.py"``
starts a mock server per scenario, appends its URL to the command and names
the scenario in ``MCP_CONFORMANCE_SCENARIO`` (0.2 adds the protocol version
in ``MCP_CONFORMANCE_PROTOCOL_VERSION`` and scenario data in
``MCP_CONFORMANCE_CONTEXT``). This script connects with trio-mcp's own
:class:`~trio_mcp.ClientSession` over :class:`StreamableHttpTransport` (as
``open_target([url])`` does), does what the scenario expects of a client, and exits 0;
on any failure it prints why on stderr and exits 1. It works around nothing:
what the library gets wrong shows in the suite's checks.

Era: a stateless version in ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (2026-07-28)
pins ``era="modern"``, a handshake version pins ``era="handshake"``, no
version (0.1.x runners) leaves ``era="auto"``.

Scenarios (what the client does):

- ``initialize``, ``tools_call``, ``request-metadata``, ``auth/*``: list the
  tools and call the first one with ``{"a": 2, "b": 3}`` (``tools_call``
  also checks the sum in the answer). ``auth/*`` connect through
  :class:`~trio_mcp.auth.OAuthClientAuth` (headless: the mock authorization
  server redirects straight back with a code), with the pre-registered
  client of ``MCP_CONFORMANCE_CONTEXT`` when it names one and the Client ID
  Metadata Document URL the suite expects. ``auth/client-credentials-basic``
  and ``auth/client-credentials-jwt`` use the client_credentials grant
  (:class:`~trio_mcp.auth.ClientCredentials`) with the context's
  ``client_id`` and ``client_secret``, or ``private_key_pem`` and
  ``signing_algorithm`` (``private_key_jwt``).
- ``elicitation-sep1034-client-defaults``: wait for the GET stream (that
  server sends its elicitation request there, not on the call's stream), call
  ``test_client_elicitation_defaults``; the elicitation handler accepts with
  every default of the requested schema (SEP-1034).
- ``sse-retry``: wait for the GET stream, call ``test_reconnection``; the
  server closes the call's SSE stream and the transport resumes it (GET,
  ``Last-Event-ID``, after the server's ``retry`` delay).
- ``sep-2322-client-request-state``: the four ``test_mrtr_*`` tools;
  ``test_mrtr_unrelated`` is called from inside the elicitation handler of
  the first input-required round, i.e. between two rounds of another call.
- ``http-standard-headers``: every tool, resource and prompt listed.
- ``http-custom-headers``: the tool calls given in the context.
- ``http-invalid-tool-headers``: every tool the session lists.
- ``json-schema-ref-no-deref``: list the tools only.
- ``json-schema-2020-12-preservation``: echo the focal tool's input schema.
- anything else: list the tools.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext
from typing import Any

import httpx
import msgspec
import trio
from msgspec import UNSET

from trio_mcp import ClientSession, open_session
from trio_mcp.auth import (
    ClientCredentials,
    ClientInformation,
    ClientMetadata,
    EnterpriseGrant,
    JwtBearerGrant,
    OAuthClientAuth,
)
from trio_mcp.protocol import (
    HANDSHAKE_VERSIONS,
    MODERN_VERSIONS,
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    Implementation,
    Root,
    TextContent,
)
from trio_mcp.transports.http import HttpClientStream, StreamableHttpTransport

CLIENT_INFO = Implementation(name="trio-mcp-conformance-client", version="0.1.0")
ROOTS = [Root(uri="file:///tmp/trio-mcp-conformance", name="conformance")]
#: Bound of one scenario, unless ``--timeout SECONDS`` comes before the URL.
#: Keep it below the suite's own ``--timeout`` (30 s unless given), which
#: also covers this process's start and kills it without a word.
SCENARIO_TIMEOUT = 20.0
#: Bound of the wait for the GET stream where a scenario needs it.
GET_STREAM_WAIT = 5.0
#: Scenarios whose server relies on the GET stream being open before the tool
#: call: ``elicitation-sep1034-client-defaults`` sends its elicitation request
#: there (not on the call's stream) and drops it when no GET stream is open;
#: ``sse-retry`` hands the pending answer to the first GET it sees and times
#: the reconnection from it, so a late first GET reads as an early reconnection.
USES_GET_STREAM = frozenset({"elicitation-sep1034-client-defaults", "sse-retry"})
#: The Client ID Metadata Document URL ``auth/basic-cimd`` expects as client_id.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


class ScenarioFailed(Exception):
    """What the client saw went wrong (printed, exit status 1)."""


# ------------------------------------------------------------------ handlers


def _placeholder(prop: Any) -> Any:
    """A value of the field's type, for a required field without a default."""
    if prop.enum is not UNSET and prop.enum:
        return prop.enum[0]
    if prop.one_of is not UNSET and prop.one_of:
        return prop.one_of[0].const
    return {"string": "conformance", "number": 0, "integer": 0, "boolean": True, "array": []}[prop.type]


def form_answer(params: ElicitRequestParams) -> dict[str, Any]:
    """Accepting a form as presented: every field's ``default`` (SEP-1034),
    and a value of the right type for required fields without one."""
    schema = params.requested_schema
    if schema is UNSET:
        return {}
    required = set() if schema.required is UNSET else set(schema.required)
    content: dict[str, Any] = {}
    for name, prop in schema.properties.items():
        if prop.default is not UNSET:
            content[name] = prop.default
        elif name in required:
            content[name] = _placeholder(prop)
    return content


class Handlers:
    """The client's answers to the server's questions (both eras)."""

    def __init__(self) -> None:
        self.elicitations: list[ElicitRequestParams] = []
        self.samplings: list[CreateMessageRequestParams] = []
        #: Awaited inside the next elicitation, before answering it.
        self.during_elicitation: Any = None

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult:
        self.elicitations.append(params)
        hook, self.during_elicitation = self.during_elicitation, None
        if hook is not None:
            await hook()
        if params.is_url_mode:
            return ElicitResult(action="accept")
        return ElicitResult(action="accept", content=form_answer(params))

    async def sample(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.samplings.append(params)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(text="A canned answer."),
            model="conformance-model",
            stop_reason="endTurn",
        )


# ----------------------------------------------------------------- scenarios


def _text(result: CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _expect_ok(name: str, result: CallToolResult) -> str:
    if result.is_error is True:
        raise ScenarioFailed(f"tool {name!r} answered with an error: {_text(result)}")
    return _text(result)


async def basic(session: ClientSession, scenario: str) -> None:
    if not session.supports("tools/list"):
        if scenario == "tools_call":
            raise ScenarioFailed("the server did not declare the tools capability")
        return  # e.g. the initialize scenario's server declares nothing
    tools = await session.list_all_tools()
    if not tools:
        return
    name = tools[0].name
    text = _expect_ok(name, await session.call_tool(name, {"a": 2, "b": 3}))
    if scenario == "tools_call" and "5" not in text:
        raise ScenarioFailed(f"add_numbers(2, 3) answered {text!r}")


async def elicitation_defaults(session: ClientSession, handlers: Handlers) -> None:
    name = "test_client_elicitation_defaults"
    text = _expect_ok(name, await session.call_tool(name, {}))
    if not handlers.elicitations:
        raise ScenarioFailed("the server never asked for elicitation")
    if "Elicitation completed" not in text:
        raise ScenarioFailed(f"unexpected answer: {text!r}")


async def sse_retry(session: ClientSession) -> None:
    await session.list_all_tools()
    text = _expect_ok("test_reconnection", await session.call_tool("test_reconnection", {}))
    if "Reconnection test completed" not in text:
        raise ScenarioFailed(f"unexpected answer: {text!r}")


async def mrtr(session: ClientSession, handlers: Handlers) -> None:
    await session.list_all_tools()
    unrelated: list[str] = []

    async def call_unrelated() -> None:
        name = "test_mrtr_unrelated"
        unrelated.append(_expect_ok(name, await session.call_tool(name, {})))

    handlers.during_elicitation = call_unrelated
    for name, expected in (("test_mrtr_echo_state", "echo-state-ok"), ("test_mrtr_no_state", "no-state-ok")):
        text = _expect_ok(name, await session.call_tool(name, {}))
        if expected not in text:
            raise ScenarioFailed(f"{name} answered {text!r}")
    if not unrelated:
        raise ScenarioFailed("no input-required round happened (test_mrtr_unrelated was never called)")
    text = _expect_ok("test_mrtr_no_result_type", await session.call_tool("test_mrtr_no_result_type", {}))
    if "no-result-type-test-ok" not in text:
        raise ScenarioFailed(f"test_mrtr_no_result_type answered {text!r}")


async def standard_headers(session: ClientSession) -> None:
    for tool in await session.list_all_tools():
        await session.call_tool(tool.name, {})
    if session.supports("resources/list"):
        for resource in await session.list_all_resources():
            await session.read_resource(resource.uri)
    if session.supports("prompts/list"):
        for prompt in await session.list_all_prompts():
            await session.get_prompt(prompt.name)


async def custom_headers(session: ClientSession, context: dict[str, Any]) -> None:
    await session.list_all_tools()
    calls = context.get("toolCalls") or []
    if not calls:
        raise ScenarioFailed("MCP_CONFORMANCE_CONTEXT names no toolCalls")
    for call in calls:
        await session.call_tool(call["name"], call.get("arguments") or {})


async def every_tool(session: ClientSession) -> None:
    for tool in await session.list_all_tools():
        await session.call_tool(tool.name, {"region": "us-west1"})


async def schema_preservation(session: ClientSession) -> None:
    tools = {tool.name: tool for tool in await session.list_all_tools()}
    focal = tools.get("json_schema_2020_12_tool")
    if focal is None:
        raise ScenarioFailed("json_schema_2020_12_tool is not listed")
    schema = msgspec.to_builtins(focal.input_schema)
    await session.call_tool("json_schema_echo", {"schema": schema})


def client_credentials_for(context: dict[str, Any]) -> ClientCredentials:
    """The machine client of ``auth/client-credentials-*``, from the context."""
    if not context.get("client_id"):
        raise ScenarioFailed("MCP_CONFORMANCE_CONTEXT names no client_id")
    if context.get("private_key_pem"):
        return ClientCredentials(
            client_id=context["client_id"],
            private_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm") or "ES256",
        )
    if context.get("client_secret"):
        return ClientCredentials(client_id=context["client_id"], client_secret=context["client_secret"])
    raise ScenarioFailed("MCP_CONFORMANCE_CONTEXT has neither a client_secret nor a private_key_pem")


def oauth_for(url: str, scenario: str, context: dict[str, Any]) -> OAuthClientAuth:
    """The OAuth client of the ``auth/*`` scenarios (``auth/pre-registration``
    names its pre-registered client in the context; ``auth/client-credentials-*``
    their machine client)."""
    if scenario.startswith("auth/client-credentials-"):
        return OAuthClientAuth(url, client_credentials=client_credentials_for(context))
    if scenario == "auth/wif-jwt-bearer":  # workload identity: the platform's JWT is the grant
        return OAuthClientAuth(
            url, grant=JwtBearerGrant(client_id=context["client_id"], assertion=context["valid_jwt"])
        )
    if scenario == "auth/enterprise-managed-authorization":  # the IdP's ID-JAG, then the JWT bearer grant
        grant = EnterpriseGrant(
            idp_token_endpoint=context["idp_token_endpoint"],
            id_token=context["idp_id_token"],
            idp_client_id=context.get("idp_client_id"),
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
        )
        return OAuthClientAuth(url, grant=grant)
    clients = {}
    if context.get("client_id") and context.get("issuer"):
        clients[context["issuer"]] = ClientInformation(
            client_id=context["client_id"], client_secret=context.get("client_secret")
        )
    return OAuthClientAuth(
        url,
        client_metadata=ClientMetadata(client_name=CLIENT_INFO.name),
        clients=clients,
        client_metadata_url=CLIENT_METADATA_URL,
        dpop=scenario in ("auth/dpop", "auth/dpop-nonce"),  # sender-constrained tokens (RFC 9449)
    )


@asynccontextmanager
async def connect(
    url: str, http_client: httpx.AsyncClient | None = None, **options: Any
) -> AsyncIterator[tuple[ClientSession, HttpClientStream]]:
    """A Streamable HTTP session with ``url`` (what ``open_target([url])`` does,
    keeping the transport's stream at hand)."""
    async with trio.open_nursery() as nursery:
        stream = await nursery.start(StreamableHttpTransport(url, http_client=http_client).run)
        async with open_session(stream, **options) as session:
            yield session, stream
        nursery.cancel_scope.cancel()


async def run_scenario(scenario: str, url: str, era: str, context: dict[str, Any]) -> None:
    handlers = Handlers()
    options: dict[str, Any] = {
        "era": era,
        "client_info": CLIENT_INFO,
        "elicitation_handler": handlers.elicit,
        "sampling_handler": handlers.sample,
        "roots": ROOTS,
    }
    http = httpx.AsyncClient(auth=oauth_for(url, scenario, context)) if scenario.startswith("auth/") else None
    async with http or nullcontext(), connect(url, http, **options) as (session, stream):
        if scenario in USES_GET_STREAM:
            # The GET stream opens in the background after the handshake; these
            # servers need it in place before the call (see USES_GET_STREAM).
            with trio.move_on_after(GET_STREAM_WAIT):
                await stream.wait_get_stream()
        if scenario == "elicitation-sep1034-client-defaults":
            await elicitation_defaults(session, handlers)
        elif scenario == "sse-retry":
            await sse_retry(session)
        elif scenario == "sep-2322-client-request-state":
            await mrtr(session, handlers)
        elif scenario == "http-standard-headers":
            await standard_headers(session)
        elif scenario == "http-custom-headers":
            await custom_headers(session, context)
        elif scenario == "http-invalid-tool-headers":
            await every_tool(session)
        elif scenario == "json-schema-2020-12-preservation":
            await schema_preservation(session)
        elif scenario == "json-schema-ref-no-deref":
            await session.list_all_tools()
        elif scenario in ("initialize", "tools_call", "request-metadata") or scenario.startswith("auth/"):
            await basic(session, scenario)
        else:
            await session.list_all_tools()


def describe_failure(exc: BaseException) -> str:
    """``Type: message``; for a group, each of its exceptions so (its own
    message only counts them)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_failure(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def era_for(version: str | None) -> str:
    if version in MODERN_VERSIONS:
        return "modern"
    if version in HANDSHAKE_VERSIONS:
        return "handshake"
    return "auto"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    options, timeout = argv[:-1], SCENARIO_TIMEOUT
    if len(options) == 2 and options[0] == "--timeout":
        timeout = float(options[1])
    elif options or not argv:
        print(
            "usage: conformance_client.py [--timeout SECONDS] URL  (scenario: $MCP_CONFORMANCE_SCENARIO)",
            file=sys.stderr,
        )
        return 2
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") or None
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    era = era_for(version)

    async def run() -> None:
        with trio.fail_after(timeout):
            await run_scenario(scenario, url, era, context)

    try:
        trio.run(run)
    except (Exception, BaseExceptionGroup) as exc:  # ScenarioFailed, McpError, TransportError...
        traceback.print_exception(exc, file=sys.stderr)
        print(f"conformance client: {scenario} ({era}) failed: {describe_failure(exc)}", file=sys.stderr)
        return 1
    print(f"conformance client: {scenario} ({era}) done", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
