"""The official conformance suite against trio-mcp's client (``examples/conformance_client.py``).

* 0.1.16 ``client --scenario S`` for ``initialize``, ``tools_call``,
  ``elicitation-sep1034-client-defaults`` and ``sse-retry``, one suite run
  each, no baseline (so the client's own exit status and WARNING checks
  count): each must exit 0.
* 0.2.0-alpha.12 ``client --requirements 2026-07-28`` (stateless era), with an
  empty baseline: exit 0, one test per scenario (the authorization extension
  scenarios included, which the run does not score), one strict xfail per
  known gap.
* 0.2.0-alpha.12 ``client --scenario S`` for each authorization extension
  scenario (``auth/client-credentials-basic``, ``-jwt``,
  ``auth/enterprise-managed-authorization``, ``auth/dpop``, ``auth/dpop-nonce``,
  ``auth/wif-jwt-bearer``), one suite run each with the baseline: each must exit 0.
* Our client with ``era="auto"`` against two real servers over stdio: the
  SDK-based ``mcp-server-time`` answers ``server/discover`` (2026-07-28),
  ``@modelcontextprotocol/server-everything`` does not (handshake era).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_mcp import ClientSession, open_session
from trio_mcp.transports.stdio import StdioServerParameters, StdioTransport

from .conftest import (
    HERE,
    Gap,
    Plan,
    SuiteRun,
    assert_gap_closed,
    assert_reported,
    assert_scenario_passes,
    client_command,
    details,
    npm_path,
    run_suite,
    sdk_path,
)

pytestmark = pytest.mark.interop

#: Per-scenario timeout the suite applies to the client, in ms: it kills the
#: client process (its start included) and fails the scenario. The requirement
#: run starts every scenario's client at once (~40 Python processes, ~0.6 s
#: of CPU each to start), so on a busy machine a healthy client may take a
#: few times the quiet ~2 s; these are bounds against hangs, not timings.
CLIENT_TIMEOUT_MS = "60000"
#: The client's own bound of a scenario, in s (``--timeout``): below the
#: suite's, so that a client that is too slow says so in its stderr.
CLIENT_SCENARIO_TIMEOUT = "50"
#: Bound of one single-scenario run (healthy: ~1.5 s).
SCENARIO_RUN_TIMEOUT = 120.0
#: Bound of the 2026-07-28 requirement run (healthy: ~20 s; its scenarios run in parallel).
REQUIREMENTS_RUN_TIMEOUT = 180.0
#: Bound of each real-peer session test.
PEER_TIMEOUT = 30.0

# ------------------------------------------------------------ 0.1.16

V0_1_16 = Plan(
    key="0.1.16",
    scenarios=("initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"),
)


@pytest.fixture(scope="module")
def runs_0_1_16(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SuiteRun]:
    """One suite run per scenario, in turn (sse-retry measures timing: no parallel load)."""
    command = client_command("--timeout", CLIENT_SCENARIO_TIMEOUT)
    return {
        scenario: run_suite(
            "0.1.16",
            ["client", "--command", command, "--scenario", scenario, "--timeout", CLIENT_TIMEOUT_MS],
            tmp_path_factory.mktemp("c016"),
            timeout=SCENARIO_RUN_TIMEOUT,
        )
        for scenario in V0_1_16.scenarios
    }


@pytest.mark.parametrize("scenario", V0_1_16.scenarios)
def test_0_1_16_scenario_exit_status(runs_0_1_16: dict[str, SuiteRun], scenario: str) -> None:
    """Exit 0: no FAILURE, no WARNING, and the client itself exited 0."""
    run = runs_0_1_16[scenario]
    assert "Client exited with code" not in run.output, run.output[-3000:]
    assert run.returncode == 0, f"{run.describe()}; output tail:\n{run.output[-3000:]}"


@pytest.mark.parametrize(("plan", "scenario"), V0_1_16.check_cases())
def test_0_1_16_scenario(runs_0_1_16: dict[str, SuiteRun], plan: Plan, scenario: str) -> None:
    run = runs_0_1_16[scenario]
    assert_reported(run, Plan(key=plan.key, scenarios=(scenario,)))
    assert_scenario_passes(run, plan, scenario)


def test_0_1_16_initialize_details(runs_0_1_16: dict[str, SuiteRun]) -> None:
    seen = details(runs_0_1_16["initialize"], "initialize", "mcp-client-initialization")
    assert seen["versionMatch"] is True and seen["protocolVersionSent"] == "2025-11-25"
    assert (seen["clientName"], seen["clientVersion"]) == ("trio-mcp-conformance-client", "0.1.0")


def test_0_1_16_tools_call_details(runs_0_1_16: dict[str, SuiteRun]) -> None:
    seen = details(runs_0_1_16["tools_call"], "tools_call", "tool-add-numbers")
    assert seen == {"a": 2, "b": 3, "result": 5}


def test_0_1_16_elicitation_defaults_are_the_defaults(runs_0_1_16: dict[str, SuiteRun]) -> None:
    """The suite only checks each field's type; the values must be the schema's defaults."""
    run = runs_0_1_16["elicitation-sep1034-client-defaults"]
    scenario = "elicitation-sep1034-client-defaults"
    for kind in ("string", "integer", "number", "enum", "boolean"):
        seen = details(run, scenario, f"client-elicitation-sep1034-{kind}-default")
        assert seen["receivedValue"] == seen["expectedDefault"], (kind, seen)
        assert type(seen["receivedValue"]) is type(seen["expectedDefault"]), (kind, seen)


def test_0_1_16_sse_retry_resumes_the_closed_stream(runs_0_1_16: dict[str, SuiteRun]) -> None:
    """The resuming GET names the last event of the tools/call stream the server closed."""
    run = runs_0_1_16["sse-retry"]
    primings = [
        c["details"]["eventId"]
        for c in run.checks("sse-retry")
        if c["id"] == "outgoing-sse-event"
        and c["description"].startswith("Sent SSE priming event for tools/call")
    ]
    assert len(primings) == 1, primings
    assert details(run, "sse-retry", "client-sse-last-event-id")["lastEventIds"] == primings
    timing = details(run, "sse-retry", "client-sse-retry-timing")
    assert timing["withinTolerance"] is True, timing


# ------------------------------------------------------------ 2026-07-28

#: Required authorization scenarios: the client authorizes through :mod:`trio_mcp.auth`
#: (``OAuthClientAuth`` with its headless ``FollowRedirectHandler``: the mock
#: authorization server redirects straight back with a code).
AUTH = (
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
)

#: The authorization scenarios whose client MUST stop (the suite allows its
#: error exit) -> a pattern of why it stopped, in its stderr. OAuthClientAuth
#: logs every failure as "authorization failed: <error class>: <reason>", and
#: why it leaves a 403 alone (it reaches the session as the answer to server/discover).
AUTH_REFUSALS = {
    "auth/resource-mismatch": r"authorization failed: ResourceMismatchError: the protected resource "
    r"metadata is for 'https://evil\.example\.com/mcp', not for the MCP server 'http://localhost:\d+/mcp'",
    "auth/iss-supported-missing": r"authorization failed: AuthorizationResponseError: the authorization "
    r"response lacks iss although http://localhost:\d+ advertises it",
    "auth/iss-wrong-issuer": r"authorization failed: AuthorizationResponseError: the authorization response "
    r"comes from issuer 'https://evil\.example\.com', not from 'http://localhost:\d+'",
    "auth/iss-unexpected": r"authorization failed: AuthorizationResponseError: the authorization response "
    r"comes from issuer 'https://evil\.example\.com', not from 'http://localhost:\d+'",
    "auth/iss-normalized": r"authorization failed: AuthorizationResponseError: the authorization response "
    r"comes from issuer 'http://localhost:(\d+)/', not from 'http://localhost:\1'",
    "auth/metadata-issuer-mismatch": r"authorization failed: IssuerMismatchError: the authorization server "
    r"metadata names the issuer 'https://attacker\.example\.com', not 'http://localhost:\d+'",
    "auth/scope-retry-limit": r"the MCP server answers 403 insufficient_scope for scope 'mcp:admin', which "
    r"the token already has: not authorizing again",
}


#: The client_credentials extension (``io.modelcontextprotocol/oauth-client-credentials``),
#: which trio-mcp implements (:class:`trio_mcp.auth.ClientCredentials`): not scored
#: by the requirement run, tested like the scored scenarios all the same.
CLIENT_CREDENTIALS = (
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
)

#: The other authorization extensions, which trio-mcp implements too
#: (:class:`trio_mcp.auth.EnterpriseGrant`, ``OAuthClientAuth(dpop=True)``,
#: :class:`trio_mcp.auth.JwtBearerGrant`): not scored by the requirement run,
#: tested like the scored scenarios all the same.
AUTH_EXTENSIONS = (
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
)

V2026 = Plan(
    key="2026-07-28",
    scenarios=(
        "tools_call",
        "request-metadata",
        *AUTH,
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
    ),
    unscored=("json-schema-2020-12-preservation", *CLIENT_CREDENTIALS, *AUTH_EXTENSIONS),
)

#: Scenarios whose client run cannot end well, and why (the other ones must print "done").
CLIENT_FAILS = {g.scenario: g.reason for g in V2026.gaps if g.check is None}


@pytest.fixture(scope="module")
def run_2026(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    return run_suite(
        "0.2",
        [
            "client",
            "--command",
            client_command("--timeout", CLIENT_SCENARIO_TIMEOUT),
            "--requirements",
            "2026-07-28",
            "--timeout",
            CLIENT_TIMEOUT_MS,
            "--expected-failures",
            str(HERE / "baseline-client-2026-07-28.yml"),
        ],
        tmp_path_factory.mktemp("c2026"),
        timeout=REQUIREMENTS_RUN_TIMEOUT,
    )


@pytest.mark.parametrize("plan", [V2026.exit_case()])
def test_2026_exit_status(run_2026: SuiteRun, plan: Plan) -> None:
    assert run_2026.returncode == 0, f"{run_2026.describe()}; output tail:\n{run_2026.output[-3000:]}"


def test_2026_every_scenario_reported(run_2026: SuiteRun) -> None:
    assert_reported(run_2026, V2026)


@pytest.mark.parametrize(("plan", "scenario"), V2026.check_cases())
def test_2026_scenario(run_2026: SuiteRun, plan: Plan, scenario: str) -> None:
    assert_scenario_passes(run_2026, plan, scenario)


_GAPS = V2026.gap_cases()
if _GAPS:  # (none left on the client side; the mechanism stays for the next one)

    @pytest.mark.parametrize(("plan", "gap"), _GAPS)
    def test_2026_known_gap(run_2026: SuiteRun, plan: Plan, gap: Gap) -> None:
        assert_gap_closed(run_2026, gap)


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(
            s, marks=[pytest.mark.xfail(strict=True, reason=CLIENT_FAILS[s])] if s in CLIENT_FAILS else []
        )
        for s in (*V2026.scenarios, *V2026.unscored)
        if s not in AUTH_REFUSALS
    ],
)
def test_2026_client_completed(run_2026: SuiteRun, scenario: str) -> None:
    """The suite does not judge the client's exit status in a requirement run: its last words do."""
    stderr = run_2026.client_stderr.get(scenario, "")
    assert f"conformance client: {scenario} (modern) done" in stderr, stderr[-2000:]


def test_2026_mrtr_details(run_2026: SuiteRun) -> None:
    scenario = "sep-2322-client-request-state"
    echoed = details(run_2026, scenario, "sep-2322-client-request-state-echoed")
    assert echoed["requestStateReceived"] == echoed["requestStateSent"]
    ids = details(run_2026, scenario, "sep-2322-client-jsonrpc-id-different")
    assert ids["retryId"] != ids["originalId"]
    isolation = details(run_2026, scenario, "sep-2322-client-parallel-isolation")
    assert isolation.get("inputResponsesReceived") is None and isolation.get("requestStateReceived") is None


def test_2026_version_retry_details(run_2026: SuiteRun) -> None:
    """The request refused with -32022 came again with the version the server named."""
    seen = details(run_2026, "request-metadata", "sep-2575-client-retry-supported-version")
    assert (seen["retryHeaderVersion"], seen["retryMetaVersion"]) == ("2026-07-28", "2026-07-28"), seen


@pytest.mark.parametrize("scenario", list(AUTH_REFUSALS))
def test_2026_client_refuses_to_authorize(run_2026: SuiteRun, scenario: str) -> None:
    """Where the client must not go on, it stops, for the reason the scenario sets up."""
    stderr = run_2026.client_stderr.get(scenario, "")
    assert f"conformance client: {scenario} (modern) failed" in stderr, stderr[-2000:]
    assert re.search(AUTH_REFUSALS[scenario], stderr), stderr[-2000:]


@pytest.mark.parametrize(
    ("scenario", "check", "stop"),
    [
        ("auth/resource-mismatch", "resource-mismatch-rejected", "declined-after-reading-prm"),
        ("auth/iss-supported-missing", "sep-2468-client-reject-missing-iss", "declined-before-token-request"),
        ("auth/iss-wrong-issuer", "sep-2468-client-compare-iss-supported", "declined-before-token-request"),
        ("auth/iss-unexpected", "sep-2468-client-compare-iss-unadvertised", "declined-before-token-request"),
        ("auth/iss-normalized", "sep-2468-client-no-normalization", "declined-before-token-request"),
        (
            "auth/metadata-issuer-mismatch",
            "sep-2468-client-validate-metadata-issuer",
            "declined-poisoned-metadata",
        ),
    ],
)
def test_2026_auth_refusal_reached_the_property(
    run_2026: SuiteRun, scenario: str, check: str, stop: str
) -> None:
    """The refusal happened where the scenario tests it (not earlier, for another reason)."""
    seen = details(run_2026, scenario, check)
    assert (seen["propertyReached"], seen["stopReason"]) == (True, stop), seen


def test_2026_auth_scope_details(run_2026: SuiteRun) -> None:
    """Scope selection beyond what the lenient checks (WARNING / INFO) enforce."""
    union = details(run_2026, "auth/scope-step-up", "sep-2350-scope-union-on-reauth")
    assert union["requestedScope"].split() == ["mcp:basic", "mcp:write"], union
    # One authorization: a 403 naming a scope the token already has is not worth another.
    attempts = details(run_2026, "auth/scope-retry-limit", "scope-retry-limit")
    assert attempts["authorizationAttempts"] == 1, attempts
    assert run_2026.status("auth/offline-access-scope", "sep-2207-offline-access-requested") == "SUCCESS"
    offline = details(run_2026, "auth/offline-access-scope", "sep-2207-offline-access-requested")
    assert offline["requestedScope"].split() == ["mcp:basic", "offline_access"], offline
    omitted = details(run_2026, "auth/scope-omitted-when-undefined", "scope-omitted-when-undefined")
    assert omitted["scopeParameter"] == "omitted", omitted


def test_2026_auth_client_identity_details(run_2026: SuiteRun) -> None:
    """Which client identity and token endpoint authentication each server got."""
    cimd = details(run_2026, "auth/basic-cimd", "cimd-client-id-used")
    assert cimd["actualClientId"] == "https://conformance-test.local/client-metadata.json", cimd
    prereg = details(run_2026, "auth/pre-registration", "pre-registration-auth")
    assert prereg["clientId"] == "pre-registered-client", prereg
    for kind, method in (("basic", "client_secret_basic"), ("post", "client_secret_post"), ("none", "none")):
        seen = details(run_2026, f"auth/token-endpoint-auth-{kind}", "token-endpoint-auth-method")
        assert seen["actualAuthMethod"] == method, seen
    migration = details(run_2026, "auth/authorization-server-migration", "sep-2352-no-reuse-on-as-change")
    assert (migration["seenAtAuthorize"], migration["seenAtToken"]) == (False, False), migration


def test_2026_client_credentials_details(run_2026: SuiteRun) -> None:
    """The client_credentials grant with each client authentication, as the suite saw it."""
    basic = details(run_2026, "auth/client-credentials-basic", "client-credentials-basic-auth")
    assert basic["clientId"] == "conformance-test-client", basic
    jwt = details(run_2026, "auth/client-credentials-jwt", "client-credentials-jwt-verified")
    assert jwt["iss"] == jwt["sub"] == "conformance-test-client", jwt
    assert re.fullmatch(r"http://localhost:\d+", jwt["aud"]), jwt  # the issuer identifier
    for scenario in CLIENT_CREDENTIALS:
        assert run_2026.status(scenario, "client-credentials-grant-type") == "MISSING"  # never another grant
        assert run_2026.status(scenario, "token-request") == "SUCCESS"


@pytest.fixture(scope="module")
def runs_client_credentials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SuiteRun]:
    """One 0.2 suite run per authorization extension scenario (client_credentials,
    enterprise-managed, DPoP, workload identity), with the baseline (so a
    baselined scenario that passes, a WARNING or the client's exit status fail it)."""
    command = client_command("--timeout", CLIENT_SCENARIO_TIMEOUT)
    return {
        scenario: run_suite(
            "0.2",
            [
                "client",
                "--command",
                command,
                "--scenario",
                scenario,
                "--timeout",
                CLIENT_TIMEOUT_MS,
                "--expected-failures",
                str(HERE / "baseline-client-2026-07-28.yml"),
            ],
            tmp_path_factory.mktemp("ccred"),
            timeout=SCENARIO_RUN_TIMEOUT,
        )
        for scenario in (*CLIENT_CREDENTIALS, *AUTH_EXTENSIONS)
    }


@pytest.mark.parametrize("scenario", (*CLIENT_CREDENTIALS, *AUTH_EXTENSIONS))
def test_client_credentials_scenario_run(runs_client_credentials: dict[str, SuiteRun], scenario: str) -> None:
    run = runs_client_credentials[scenario]
    assert "Client exited with code" not in run.output, run.output[-3000:]
    assert run.returncode == 0, f"{run.describe()}; output tail:\n{run.output[-3000:]}"
    assert_reported(run, Plan(key="0.2", scenarios=(scenario,)))
    assert_scenario_passes(run, Plan(key="0.2", scenarios=(scenario,)), scenario)
    assert f"conformance client: {scenario} " in run.client_stderr.get(scenario, "")
    assert run.client_stderr[scenario].rstrip().endswith("done"), run.client_stderr[scenario][-2000:]


def test_2026_no_network_ref_fetched(run_2026: SuiteRun) -> None:
    seen = details(run_2026, "json-schema-ref-no-deref", "sep-2106-no-network-ref-deref")
    assert seen["toolsListed"] is True and seen["canaryRequestCount"] == 0


def _baseline_entries(path: Path) -> list[str]:
    return [
        line.split("#", 1)[0].strip()[2:].strip()
        for line in path.read_text().splitlines()
        if line.split("#", 1)[0].strip().startswith("- ")
    ]


def test_client_baseline_is_empty() -> None:
    assert _baseline_entries(HERE / "baseline-client-2026-07-28.yml") == []


def test_2026_auth_extension_details(run_2026: SuiteRun) -> None:
    """What the extension checks saw: DPoP-bound tokens presented with fresh
    proofs, nonces honoured at both servers, one JWT bearer grant each."""
    for scenario in ("auth/dpop", "auth/dpop-nonce"):
        scheme = details(run_2026, scenario, "sep-1932-client-dpop-auth-scheme")
        assert scheme["observedSchemes"] == ["DPoP"], scheme
        fresh = details(run_2026, scenario, "sep-1932-client-fresh-proof")
        assert fresh["distinctJtis"] == fresh["authenticatedRequests"] > 0, fresh
    for check in ("sep-1932-client-as-nonce", "sep-1932-client-rs-nonce"):
        seen = details(run_2026, "auth/dpop-nonce", check)
        assert seen == {"challengeIssued": True, "nonceHonored": True}, seen
    assert run_2026.status("auth/wif-jwt-bearer", "wif-assertion-verified") == "SUCCESS"
    for check in ("wif-no-retry", "wif-grant-fallback"):  # one grant, never another
        assert run_2026.status("auth/wif-jwt-bearer", check) == "MISSING"
    for check in ("complete-flow-token-exchange", "complete-flow-jwt-bearer"):
        assert run_2026.status("auth/enterprise-managed-authorization", check) == "SUCCESS"


# ------------------------------------------------------- real peers, era="auto"


async def _session_with(params: StdioServerParameters, check: Callable[[ClientSession], Any]) -> None:
    with trio.fail_after(PEER_TIMEOUT):
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(StdioTransport(params).run)
            async with open_session(stream, era="auto") as client:
                await check(client)
            nursery.cancel_scope.cancel()


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture
def sdk_python() -> Path:
    """The SDK venv's interpreter (mcp-server-time), resolved outside trio so a skip keeps its message."""
    return sdk_path("bin/python")


@pytest.fixture
def everything_stdio() -> tuple[Path, Path]:
    """Node 22 and server-everything's launcher."""
    return npm_path(".bin/node"), npm_path("@modelcontextprotocol/server-everything/dist/index.js")


async def test_auto_era_speaks_2026_to_mcp_server_time(sdk_python: Path) -> None:
    python = sdk_python

    async def check(client: ClientSession) -> None:
        assert client.era == "modern"
        assert client.protocol_version == "2026-07-28"
        assert client.server_info is not None and client.server_info.name == "mcp-time"
        result = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert result.is_error is not True, _text(result)
        assert json.loads(_text(result))["timezone"] == "UTC"

    await _session_with(StdioServerParameters(command=str(python), args=("-m", "mcp_server_time")), check)


async def test_auto_era_after_a_late_probe_still_speaks_2026_to_mcp_server_time(sdk_python: Path) -> None:
    """A server slow to answer the probe (here: a probe bound of 1 ms) has
    taken it all the same, and then refuses the handshake (-32022): the
    client probes again instead of failing to connect."""
    params = StdioServerParameters(command=str(sdk_python), args=("-m", "mcp_server_time"))
    with trio.fail_after(PEER_TIMEOUT):
        async with trio.open_nursery() as nursery:
            stream = await nursery.start(StdioTransport(params).run)
            async with open_session(stream, era="auto", discover_timeout=0.001) as client:
                assert (client.era, client.protocol_version) == ("modern", "2026-07-28")
                result = await client.call_tool("get_current_time", {"timezone": "UTC"})
                assert json.loads(_text(result))["timezone"] == "UTC"
            nursery.cancel_scope.cancel()


async def test_auto_era_falls_back_to_handshake_with_server_everything(
    everything_stdio: tuple[Path, Path],
) -> None:
    node, entry = everything_stdio

    async def check(client: ClientSession) -> None:
        assert client.era == "handshake"
        assert client.protocol_version == "2025-11-25"
        assert client.server_info is not None and client.server_info.name == "mcp-servers/everything"
        result = await client.call_tool("echo", {"message": "conformance"})
        assert result.is_error is not True and _text(result) == "Echo: conformance"

    await _session_with(StdioServerParameters(command=str(node), args=(str(entry), "stdio")), check)
