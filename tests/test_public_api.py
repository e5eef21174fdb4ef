"""The curated public API: exactly these names, each importable and documented."""

import trio_mcp
import trio_mcp.observability
import trio_mcp.protocol
import trio_mcp.server
import trio_mcp.serving
import trio_mcp.serving.http
import trio_mcp.supervision
import trio_mcp.testing
import trio_mcp.transports

EXPECTED_TOP_LEVEL = {
    "__version__",
    "MCPServer",
    "LowLevelServer",
    "Context",
    "Image",
    "Audio",
    "ClientSession",
    "Connection",
    "ConnectionSettings",
    "Host",
    "ConsentPolicy",
    "ConsentRequest",
    "open_session",
    "ServerSession",
    "Peer",
    "PeerLimits",
    "PeerStatistics",
    "InboundRequest",
    "ExitReason",
    "MessageStream",
    "memory_pair",
    "TransportError",
    "TransportClosed",
    "McpError",
    "ParseError",
    "InvalidRequest",
    "MethodNotFound",
    "InvalidParams",
    "InternalError",
    "ServerOverloaded",
    "ResourceNotFound",
    "MissingClientCapability",
    "UnsupportedProtocolVersion",
    "ConnectionClosed",
}


def test_top_level_exports_are_exactly_the_curated_set() -> None:
    assert set(trio_mcp.__all__) == EXPECTED_TOP_LEVEL
    assert len(trio_mcp.__all__) == len(EXPECTED_TOP_LEVEL), "duplicates in __all__"


def test_every_export_exists_and_public_classes_are_documented() -> None:
    for module in (
        trio_mcp,
        trio_mcp.observability,
        trio_mcp.protocol,
        trio_mcp.server,
        trio_mcp.serving,
        trio_mcp.serving.http,
        trio_mcp.supervision,
        trio_mcp.testing,
        trio_mcp.transports,
    ):
        for name in module.__all__:
            obj = getattr(module, name)  # AttributeError is the failure
            if isinstance(obj, type) and module is not trio_mcp.protocol:
                assert obj.__doc__, f"{module.__name__}.{name} has no docstring"


def test_errors_form_one_hierarchy_with_distinct_codes() -> None:
    names = [
        "ParseError",
        "InvalidRequest",
        "MethodNotFound",
        "InvalidParams",
        "InternalError",
        "ServerOverloaded",
        "ResourceNotFound",
        "MissingClientCapability",
        "UnsupportedProtocolVersion",
        "ConnectionClosed",
    ]
    errors = [getattr(trio_mcp, n) for n in names]
    assert all(issubclass(e, trio_mcp.McpError) for e in errors)
    codes = [e.code for e in errors]
    assert len(codes) == len(set(codes)), codes
    assert (
        trio_mcp.ParseError.code,
        trio_mcp.InvalidRequest.code,
        trio_mcp.MethodNotFound.code,
        trio_mcp.InvalidParams.code,
        trio_mcp.InternalError.code,
    ) == (-32700, -32600, -32601, -32602, -32603)
    assert trio_mcp.ResourceNotFound.code == -32002
