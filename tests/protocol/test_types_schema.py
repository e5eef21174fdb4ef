"""MCP types, registry and compat against the official JSON schemas.

For every version and every method the registry says exists there, rich
(every optional field set) and minimal params / results are built, adapted
for the version, wrapped in the JSON-RPC envelope and validated against the
schema; they also round-trip through the codec.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec import UNSET, Raw

from trio_mcp import protocol as p
from trio_mcp.protocol import (
    LATEST_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    METHODS,
    SUPPORTED_VERSIONS,
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
    Annotations,
    AudioContent,
    CallToolRequestParams,
    CallToolResult,
    CancelledNotificationParams,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    DiscoverResult,
    ElicitationCapability,
    ElicitationCompleteNotificationParams,
    ElicitRequest,
    ElicitRequestedSchema,
    ElicitRequestParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    Icon,
    ImageContent,
    Implementation,
    InitializeRequestParams,
    InitializeResult,
    InputRequiredResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListRootsRequest,
    ListRootsResult,
    ListToolsResult,
    LoggingMessageNotificationParams,
    ModelHint,
    ModelPreferences,
    MultiSelectItems,
    Notification,
    NotificationParams,
    PaginatedRequestParams,
    PrimitiveSchemaDefinition,
    ProgressNotificationParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptReference,
    PromptsCapability,
    ReadResourceRequestParams,
    ReadResourceResult,
    Request,
    RequestMeta,
    RequestParams,
    Resource,
    ResourceContents,
    ResourceLink,
    ResourcesCapability,
    ResourceTemplate,
    ResourceTemplateReference,
    ResourceUpdatedNotificationParams,
    Response,
    Root,
    RootsCapability,
    SamplingCapability,
    SamplingMessage,
    ServerCapabilities,
    SetLevelRequestParams,
    SubscribeRequestParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolChoice,
    ToolExecution,
    ToolResultContent,
    ToolsCapability,
    ToolUseContent,
    UnsubscribeRequestParams,
    adapt,
    coerce,
    decode,
    encode,
    has_capability,
    is_modern,
    lookup,
    method_available,
    methods_for,
    request_meta,
    result_type_of,
    strip_modern,
)

try:  # tests/ is on sys.path (rootdir-relative imports) ...
    import schema_check
except ImportError:  # ... or tests is a package
    from tests import schema_check

VERSIONS = schema_check.VERSIONS
definitions = schema_check.definitions
schema_methods = schema_check.schema_methods
validate_definition = schema_check.validate_definition
validate_message = schema_check.validate_message


# ----------------------------------------------------------------------------- fixtures

META = {"com.example/trace": "t-1"}
ICON = Icon(src="https://example.com/icon.png", mime_type="image/png", sizes=["48x48", "96x96"], theme="dark")
ANNOTATIONS = Annotations(audience=["user", "assistant"], priority=0.5, last_modified="2025-01-12T15:00:58Z")
CLIENT_INFO = Implementation(
    name="client",
    version="1.2.3",
    title="Client",
    description="A client",
    icons=[ICON],
    website_url="https://example.com/client",
)
SERVER_INFO = Implementation(
    name="server",
    version="4.5.6",
    title="Server",
    description="A server",
    icons=[ICON],
    website_url="https://example.com/server",
)
CLIENT_CAPS = ClientCapabilities(
    experimental={"com.example/feature": {"level": 2}},
    roots=RootsCapability(list_changed=True),
    sampling=SamplingCapability(context={}, tools={}),
    elicitation=ElicitationCapability(form={}, url={}),
    tasks={"list": {}, "cancel": {}},
    extensions={"com.example/ext": {"enabled": True}},
)
SERVER_CAPS = ServerCapabilities(
    experimental={"com.example/feature": {"level": 1}},
    logging={},
    completions={},
    prompts=PromptsCapability(list_changed=True),
    resources=ResourcesCapability(subscribe=True, list_changed=True),
    tools=ToolsCapability(list_changed=True),
    tasks={"list": {}},
    extensions={"com.example/ext": {}},
)
RICH_TOOL = Tool(
    name="add",
    title="Add",
    description="Adds numbers",
    input_schema={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    output_schema={"type": "object", "properties": {"sum": {"type": "integer"}}},
    annotations=ToolAnnotations(
        title="Add", read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
    icons=[ICON],
    execution=ToolExecution(task_support="optional"),
    meta=META,
)
# 2026-07-28 allows any output schema; older versions need "type": "object".
ARRAY_TOOL = Tool(name="list", input_schema={"type": "object"}, output_schema={"type": "array"})


def content_blocks() -> list[Any]:
    return [
        TextContent(text="hello", annotations=ANNOTATIONS, meta=META),
        ImageContent(data="aGVsbG8=", mime_type="image/png", annotations=ANNOTATIONS, meta=META),
        AudioContent(data="aGVsbG8=", mime_type="audio/wav", annotations=ANNOTATIONS, meta=META),
        ResourceLink(
            uri="file:///a.txt",
            name="a.txt",
            title="A",
            description="file a",
            mime_type="text/plain",
            size=5,
            icons=[ICON],
            annotations=ANNOTATIONS,
            meta=META,
        ),
        EmbeddedResource(
            resource=ResourceContents.from_text("file:///a.txt", "hello", mime_type="text/plain", meta=META),
            annotations=ANNOTATIONS,
            meta=META,
        ),
        EmbeddedResource(resource=ResourceContents.from_blob("file:///b.bin", b"\x00\x01\x02")),
    ]


def sampling_messages() -> list[SamplingMessage]:
    return [
        SamplingMessage(role="user", content=TextContent(text="What is 1+2?"), meta=META),
        SamplingMessage(
            role="assistant",
            content=[
                TextContent(text="Let me add."),
                ToolUseContent(id="u1", name="add", input={"a": 1}, meta=META),
            ],
        ),
        SamplingMessage(
            role="user",
            content=[
                ToolResultContent(
                    tool_use_id="u1",
                    content=content_blocks(),
                    structured_content={"sum": 3},
                    is_error=False,
                    meta=META,
                ),
                ImageContent(data="aGk=", mime_type="image/png"),
                AudioContent(data="aGk=", mime_type="audio/wav"),
            ],
        ),
        SamplingMessage(role="user", content=AudioContent(data="aGk=", mime_type="audio/mpeg")),
    ]


def rich_create_message(version: str) -> CreateMessageRequestParams:
    return CreateMessageRequestParams(
        messages=sampling_messages(),
        max_tokens=100,
        model_preferences=ModelPreferences(
            hints=[ModelHint(name="claude"), ModelHint()],
            cost_priority=0.2,
            speed_priority=0.3,
            intelligence_priority=0.9,
        ),
        system_prompt="Be brief.",
        include_context="thisServer",
        temperature=0.5,
        stop_sequences=["\n\n"],
        metadata={"origin": "test"},
        tools=[RICH_TOOL, ARRAY_TOOL],
        tool_choice=ToolChoice(mode="auto"),
        meta=rmeta(version) if not is_modern(version) else META,
    )


FIELDS = {
    "name": PrimitiveSchemaDefinition.string(
        title="Name", description="Your name", format="email", min_length=1, max_length=50, default="a@b.c"
    ),
    "age": PrimitiveSchemaDefinition.number(integer=True, minimum=0, maximum=150, default=30, title="Age"),
    "ratio": PrimitiveSchemaDefinition.number(minimum=0, maximum=1, default=0.5, description="A ratio"),
    "ok": PrimitiveSchemaDefinition.boolean(default=True, title="OK", description="Agree?"),
    "color": PrimitiveSchemaDefinition.single_select(["red", "green"], default="red", title="Color"),
    "size": PrimitiveSchemaDefinition.single_select(
        {"s": "Small", "l": "Large"}, default="s", description="Size"
    ),
    "legacy": PrimitiveSchemaDefinition(
        type="string", enum=["a", "b"], enum_names=["A", "B"], title="Legacy"
    ),
    "tags": PrimitiveSchemaDefinition.multi_select(
        ["x", "y", "z"], min_items=1, max_items=2, default=["x"], title="Tags", description="Pick"
    ),
    "langs": PrimitiveSchemaDefinition.multi_select({"py": "Python", "rs": "Rust"}, title="Languages"),
}


def rmeta(version: str, rich: bool = True) -> Any:
    """Request ``_meta``: required (version + capabilities) in 2026-07-28."""
    if is_modern(version):
        if not rich:
            return request_meta(protocol_version=version, client_capabilities=ClientCapabilities())
        return request_meta(
            protocol_version=version,
            client_capabilities=CLIENT_CAPS,
            client_info=CLIENT_INFO,
            log_level="debug",
            progress_token="p-1",
            extra=META,
        )
    return {"progressToken": 7, **META} if rich else UNSET


def result_meta(version: str) -> dict[str, Any]:
    if is_modern(version):
        return {META_SERVER_INFO: msgspec.to_builtins(SERVER_INFO), **META}
    return dict(META)


def notification_meta(version: str) -> dict[str, Any]:
    return {META_SUBSCRIPTION_ID: 1, **META} if is_modern(version) else dict(META)


def retry_fields(version: str) -> dict[str, Any]:
    """2026 retry fields of requests that may get an InputRequiredResult."""
    if not is_modern(version):
        return {}
    responses = {
        "sample": msgspec.to_builtins(
            CreateMessageResult(
                role="assistant", content=TextContent(text="3"), model="m", stop_reason="endTurn"
            )
        ),
        "roots": msgspec.to_builtins(ListRootsResult(roots=[Root(uri="file:///w", name="w")])),
        "ask": msgspec.to_builtins(ElicitResult(action="accept", content={"name": "x", "tags": ["a"]})),
    }
    return {"input_responses": responses, "request_state": "opaque-state"}


Variants = dict[str, Any]


def params_variants(method: str, version: str) -> Variants:
    """Params instances for ``method`` in ``version``: label -> object."""
    m, mm = rmeta(version), rmeta(version, rich=False)
    nm = notification_meta(version)
    if method == "initialize":
        return {
            "rich": InitializeRequestParams(
                protocol_version=version, capabilities=CLIENT_CAPS, client_info=CLIENT_INFO, meta=m
            ),
            "minimal": InitializeRequestParams(
                protocol_version=version,
                capabilities=ClientCapabilities(),
                client_info=Implementation(name="c", version="0"),
            ),
        }
    if method in ("ping", "roots/list", "server/discover"):
        return {"rich": RequestParams(meta=m), "minimal": RequestParams(meta=mm)}
    if method in ("resources/list", "resources/templates/list", "prompts/list", "tools/list"):
        return {
            "rich": PaginatedRequestParams(cursor="c-1", meta=m),
            "minimal": PaginatedRequestParams(meta=mm),
        }
    if method == "resources/read":
        return {
            "rich": ReadResourceRequestParams(uri="file:///a.txt", meta=m, **retry_fields(version)),
            "minimal": ReadResourceRequestParams(uri="file:///a.txt", meta=mm),
        }
    if method == "resources/subscribe":
        return {
            "rich": SubscribeRequestParams(uri="file:///a.txt", meta=m),
            "minimal": SubscribeRequestParams(uri="file:///a.txt"),
        }
    if method == "resources/unsubscribe":
        return {
            "rich": UnsubscribeRequestParams(uri="file:///a.txt", meta=m),
            "minimal": UnsubscribeRequestParams(uri="file:///a.txt"),
        }
    if method == "prompts/get":
        return {
            "rich": GetPromptRequestParams(
                name="greet", arguments={"who": "world"}, meta=m, **retry_fields(version)
            ),
            "minimal": GetPromptRequestParams(name="greet", meta=mm),
        }
    if method == "tools/call":
        return {
            "rich": CallToolRequestParams(
                name="add",
                arguments={"a": 1, "b": [1, 2], "c": {"d": "e"}},
                meta=m,
                **retry_fields(version),
                **({"task": {"ttl": 60_000}} if version == V2025_11_25 else {}),
            ),
            "minimal": CallToolRequestParams(name="add", meta=mm),
        }
    if method == "logging/setLevel":
        return {
            "rich": SetLevelRequestParams(level="warning", meta=m),
            "minimal": SetLevelRequestParams(level="debug"),
        }
    if method == "completion/complete":
        return {
            "rich": CompleteRequestParams(
                ref=PromptReference(name="greet", title="Greet"),
                argument=CompletionArgument(name="who", value="wo"),
                context=CompletionContext(arguments={"lang": "en"}),
                meta=m,
            ),
            "minimal": CompleteRequestParams(
                ref=ResourceTemplateReference(uri="file:///{path}"),
                argument=CompletionArgument(name="path", value=""),
                meta=mm,
            ),
        }
    if method == "sampling/createMessage":
        return {
            "rich": rich_create_message(version),
            "minimal": CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(text="hi"))], max_tokens=1
            ),
        }
    if method == "elicitation/create":
        out: Variants = {
            "rich": ElicitRequestParams(
                message="Tell me",
                mode="form",
                requested_schema=ElicitRequestedSchema(
                    properties=FIELDS,
                    required=["name"],
                    schema="https://json-schema.org/draft/2020-12/schema",
                ),
                meta=m,
            ),
            "minimal": ElicitRequestParams.form_mode("Name?", {"name": PrimitiveSchemaDefinition.string()}),
        }
        if version >= V2025_11_25:
            out["url"] = ElicitRequestParams.url_mode(
                "Sign in", "https://example.com/login", elicitation_id="e-1", meta=m
            )
        return out
    if method == "subscriptions/listen":
        return {
            "rich": SubscriptionsListenRequestParams(
                notifications=SubscriptionFilter(
                    tools_list_changed=True,
                    prompts_list_changed=True,
                    resources_list_changed=True,
                    resource_subscriptions=["file:///a.txt"],
                ),
                meta=m,
            ),
            "minimal": SubscriptionsListenRequestParams(notifications=SubscriptionFilter(), meta=mm),
        }
    # notifications
    if method in (
        "notifications/initialized",
        "notifications/resources/list_changed",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/roots/list_changed",
    ):
        return {"rich": NotificationParams(meta=nm), "minimal": NotificationParams()}
    if method == "notifications/cancelled":
        return {
            "rich": CancelledNotificationParams(request_id=1, reason="timeout", meta=nm),
            "minimal": CancelledNotificationParams(request_id="req-1"),
        }
    if method == "notifications/progress":
        return {
            "rich": ProgressNotificationParams(
                progress_token="p-1", progress=5, total=10, message="half", meta=nm
            ),
            "minimal": ProgressNotificationParams(progress_token=3, progress=0.25),
        }
    if method == "notifications/message":
        return {
            "rich": LoggingMessageNotificationParams(
                level="error", data={"k": [1, "x"]}, logger="db", meta=nm
            ),
            "minimal": LoggingMessageNotificationParams(level="info", data="started"),
        }
    if method == "notifications/resources/updated":
        return {
            "rich": ResourceUpdatedNotificationParams(uri="file:///a.txt", meta=nm),
            "minimal": ResourceUpdatedNotificationParams(uri="file:///a.txt"),
        }
    if method == "notifications/elicitation/complete":
        return {
            "rich": ElicitationCompleteNotificationParams(elicitation_id="e-1", meta=nm),
            "minimal": ElicitationCompleteNotificationParams(elicitation_id="e-1"),
        }
    if method == "notifications/subscriptions/acknowledged":
        return {
            "rich": SubscriptionsAcknowledgedNotificationParams(
                notifications=SubscriptionFilter(
                    tools_list_changed=True, resource_subscriptions=["file:///a"]
                ),
                meta=nm,
            ),
            "minimal": SubscriptionsAcknowledgedNotificationParams(notifications=SubscriptionFilter()),
        }
    raise AssertionError(f"no params fixture for {method}")


def input_required(version: str) -> InputRequiredResult:
    return InputRequiredResult(
        input_requests={
            "sample": CreateMessageRequest(params=rich_create_message(version)),
            "roots": ListRootsRequest(params=RequestParams(meta=META)),
            "roots2": ListRootsRequest(),
            "ask": ElicitRequest(params=params_variants("elicitation/create", V2026_07_28)["rich"]),
            "login": ElicitRequest(
                params=ElicitRequestParams.url_mode("Sign in", "https://example.com/login")
            ),
        },
        request_state="opaque-state",
        meta=result_meta(version),
    )


def result_variants(method: str, version: str) -> Variants:
    """Result instances for ``method`` in ``version``: label -> object."""
    rm = result_meta(version)
    cache = {"ttl_ms": 60_000, "cache_scope": "public"}
    out: Variants
    if method == "initialize":
        out = {
            "rich": InitializeResult(
                protocol_version=version,
                capabilities=SERVER_CAPS,
                server_info=SERVER_INFO,
                instructions="Use it.",
                meta=rm,
            ),
            "minimal": InitializeResult(
                protocol_version=version,
                capabilities=ServerCapabilities(),
                server_info=Implementation(name="s", version="0"),
            ),
        }
    elif method in ("ping", "resources/subscribe", "resources/unsubscribe", "logging/setLevel"):
        out = {"rich": EmptyResult(meta=rm), "minimal": EmptyResult()}
    elif method == "server/discover":
        out = {
            "rich": DiscoverResult(
                supported_versions=list(SUPPORTED_VERSIONS),
                capabilities=SERVER_CAPS,
                instructions="Use it.",
                meta=rm,
                **cache,
            ),
            "minimal": DiscoverResult(supported_versions=[version], capabilities=ServerCapabilities()),
        }
    elif method == "resources/list":
        out = {
            "rich": ListResourcesResult(
                resources=[
                    Resource(
                        uri="file:///a.txt",
                        name="a.txt",
                        title="A",
                        description="file a",
                        mime_type="text/plain",
                        size=5,
                        icons=[ICON],
                        annotations=ANNOTATIONS,
                        meta=META,
                    ),
                    Resource(uri="file:///b", name="b"),
                ],
                next_cursor="c-2",
                meta=rm,
                **cache,
            ),
            "minimal": ListResourcesResult(resources=[]),
        }
    elif method == "resources/templates/list":
        out = {
            "rich": ListResourceTemplatesResult(
                resource_templates=[
                    ResourceTemplate(
                        uri_template="file:///{path}",
                        name="files",
                        title="Files",
                        description="Any file",
                        mime_type="text/plain",
                        icons=[ICON],
                        annotations=ANNOTATIONS,
                        meta=META,
                    )
                ],
                next_cursor="c-2",
                meta=rm,
                **cache,
            ),
            "minimal": ListResourceTemplatesResult(resource_templates=[]),
        }
    elif method == "resources/read":
        out = {
            "rich": ReadResourceResult(
                contents=[
                    ResourceContents.from_text("file:///a.txt", "hello", mime_type="text/plain", meta=META),
                    ResourceContents.from_blob(
                        "file:///b.bin", b"\xff\x00", mime_type="application/octet-stream"
                    ),
                ],
                meta=rm,
                **cache,
            ),
            "minimal": ReadResourceResult(contents=[ResourceContents.from_text("file:///a.txt", "")]),
        }
    elif method == "prompts/list":
        out = {
            "rich": ListPromptsResult(
                prompts=[
                    Prompt(
                        name="greet",
                        title="Greet",
                        description="Say hi",
                        arguments=[
                            PromptArgument(name="who", title="Who", description="Name", required=True),
                            PromptArgument(name="lang"),
                        ],
                        icons=[ICON],
                        meta=META,
                    ),
                    Prompt(name="bare"),
                ],
                next_cursor="c-2",
                meta=rm,
                **cache,
            ),
            "minimal": ListPromptsResult(prompts=[]),
        }
    elif method == "prompts/get":
        roles = ["user", "assistant"]
        out = {
            "rich": GetPromptResult(
                description="A greeting",
                messages=[
                    PromptMessage(role=roles[i % 2], content=block)
                    for i, block in enumerate(content_blocks())
                ],
                meta=rm,
            ),
            "minimal": GetPromptResult(messages=[]),
        }
    elif method == "tools/list":
        out = {
            "rich": ListToolsResult(
                tools=[RICH_TOOL, ARRAY_TOOL, Tool(name="bare", input_schema={"type": "object"})],
                next_cursor="c-2",
                meta=rm,
                **cache,
            ),
            "minimal": ListToolsResult(tools=[]),
        }
    elif method == "tools/call":
        out = {
            "rich": CallToolResult(
                content=content_blocks(), structured_content={"sum": 3}, is_error=False, meta=rm
            ),
            "minimal": CallToolResult(content=[]),
            "array-structured": CallToolResult(
                content=[TextContent(text="[1, 2]")], structured_content=[1, 2]
            ),
        }
    elif method == "completion/complete":
        out = {
            "rich": CompleteResult(
                completion=Completion(values=["world", "wonder"], total=10, has_more=True), meta=rm
            ),
            "minimal": CompleteResult(completion=Completion(values=[])),
        }
    elif method == "sampling/createMessage":
        out = {
            "rich": CreateMessageResult(
                role="assistant",
                content=[TextContent(text="Calling"), ToolUseContent(id="u2", name="add", input={"a": 2})],
                model="model-1",
                stop_reason="toolUse",
                meta=META,
            ),
            "minimal": CreateMessageResult(role="assistant", content=TextContent(text="3"), model="m"),
            "audio": CreateMessageResult(
                role="assistant", content=AudioContent(data="aGk=", mime_type="audio/wav"), model="m"
            ),
        }
    elif method == "roots/list":
        out = {
            "rich": ListRootsResult(
                roots=[Root(uri="file:///home", name="home", meta=META), Root(uri="file:///tmp")], meta=META
            ),
            "minimal": ListRootsResult(roots=[]),
        }
    elif method == "elicitation/create":
        out = {
            "rich": ElicitResult(
                action="accept",
                content={"name": "a@b.c", "age": 30, "ok": True, "tags": ["x", "y"]},
                meta=META,
            ),
            "minimal": ElicitResult(action="cancel"),
        }
    elif method == "subscriptions/listen":
        out = {
            "rich": SubscriptionsListenResult(meta={META_SUBSCRIPTION_ID: 1, **rm}),
            "minimal": SubscriptionsListenResult(meta={META_SUBSCRIPTION_ID: "sub"}),
        }
    else:
        raise AssertionError(f"no result fixture for {method}")
    spec = METHODS[method]
    if spec.may_require_input and is_modern(version):
        out["input-required"] = input_required(version)
        out["input-required-minimal"] = InputRequiredResult(request_state="s")
    return out


def senders(method: str, version: str) -> list[str]:
    spec = METHODS[method]
    return [side for side in ("client", "server") if spec.sendable_by(side, version)]


def _cases(kind: str) -> Iterator[Any]:
    for version in VERSIONS:
        for spec in methods_for(version, kind=kind):  # type: ignore[arg-type]
            yield pytest.param(version, spec.method, id=f"{version}-{spec.method}")


REQUEST_CASES = list(_cases("request"))
NOTIFICATION_CASES = list(_cases("notification"))


def test_schema_versions_are_the_supported_versions() -> None:
    assert VERSIONS == SUPPORTED_VERSIONS


# ----------------------------------------------------------------------------- schema validation


@pytest.mark.parametrize(("version", "method"), REQUEST_CASES)
def test_request_params_validate(version: str, method: str) -> None:
    for label, params in params_variants(method, version).items():
        message = adapt(Request(id=1, method=method, params=params), version)
        for sender in senders(method, version):
            try:
                validate_message(message, version, sender=sender)  # type: ignore[arg-type]
            except AssertionError as exc:
                raise AssertionError(f"[{label}] {exc}") from None


@pytest.mark.parametrize(("version", "method"), REQUEST_CASES)
def test_results_validate(version: str, method: str) -> None:
    for label, result in result_variants(method, version).items():
        message = adapt(Response(id="r-1", result=result), version)
        for requester in senders(method, version):
            responder = "server" if requester == "client" else "client"
            try:
                validate_message(message, version, method=method, sender=responder)  # type: ignore[arg-type]
            except AssertionError as exc:
                raise AssertionError(f"[{label}] {exc}") from None


@pytest.mark.parametrize(("version", "method"), NOTIFICATION_CASES)
def test_notification_params_validate(version: str, method: str) -> None:
    for label, params in params_variants(method, version).items():
        message = adapt(Notification(method=method, params=params), version)
        for sender in senders(method, version):
            try:
                validate_message(message, version, sender=sender)  # type: ignore[arg-type]
            except AssertionError as exc:
                raise AssertionError(f"[{label}] {exc}") from None


@pytest.mark.parametrize(
    ("method", "definition"),
    [
        ("sampling/createMessage", "CreateMessageRequest"),
        ("roots/list", "ListRootsRequest"),
        ("elicitation/create", "ElicitRequest"),
    ],
)
def test_modern_input_requests_validate(method: str, definition: str) -> None:
    result = input_required(V2026_07_28)
    assert result.input_requests is not UNSET
    for request in result.input_requests.values():
        if request.__struct_config__.tag == method:
            validate_definition(request, V2026_07_28, definition)
    for key, value in retry_fields(V2026_07_28)["input_responses"].items():
        validate_definition(value, V2026_07_28, "InputResponse")
        assert key in ("sample", "roots", "ask")


def test_unadapted_legacy_messages_are_rejected() -> None:
    """The adapt() step in the tests above is load-bearing."""
    result = result_variants("tools/call", V2024_11_05)["rich"]
    with pytest.raises(AssertionError, match="CallToolResult"):
        validate_message(Response(id=1, result=result), V2024_11_05, method="tools/call")
    params = params_variants("elicitation/create", V2025_06_18)["rich"]
    with pytest.raises(AssertionError):
        validate_message(Request(id=1, method="elicitation/create", params=params), V2025_06_18)


# ----------------------------------------------------------------------------- round trip


def _round_trip_cases() -> Iterator[Any]:
    # Every handshake-era method exists in 2025-11-25 (asserted below), whose
    # fixtures are the richest of the era; 2026-07-28 covers the other era.
    assert all(spec.available(V2025_11_25) for spec in methods_for(V2024_11_05))
    for version in (V2025_11_25, V2026_07_28):
        for spec in methods_for(version):
            for label in params_variants(spec.method, version):
                case_id = f"{version}-{spec.method}-{label}"
                yield pytest.param(version, spec.method, "params", label, id=case_id)
            if spec.is_request:
                for label in result_variants(spec.method, version):
                    yield pytest.param(
                        version, spec.method, "result", label, id=f"{version}-{spec.method}-result-{label}"
                    )


@pytest.mark.parametrize(("version", "method", "part", "label"), list(_round_trip_cases()))
def test_round_trip(version: str, method: str, part: str, label: str) -> None:
    spec = METHODS[method]
    if part == "params":
        obj = params_variants(method, version)[label]
        if spec.is_request:
            message: Any = Request(id=7, method=method, params=obj)
        else:
            message = Notification(method=method, params=obj)
        frame = decode(encode(message))
        assert isinstance(frame, type(message))
        assert coerce(frame.params, spec.params_type) == obj
        # the builtins path (in-memory transport) agrees with the bytes path
        assert coerce(msgspec.to_builtins(obj), spec.params_type) == obj
        assert coerce(obj, spec.params_type) is obj
    else:
        obj = result_variants(method, version)[label]
        frame = decode(encode(Response(id=7, result=obj)))
        assert isinstance(frame, Response)
        target = type(obj) if isinstance(obj, InputRequiredResult) else spec.result_type
        expected = "input_required" if isinstance(obj, InputRequiredResult) else "complete"
        assert result_type_of(frame.result) == expected
        assert coerce(frame.result, target) == obj


def test_every_field_is_exercised() -> None:
    """The rich fixtures set every field of every Struct they reach."""
    seen: dict[type, set[str]] = {}
    reached: set[type] = set()

    def walk(value: Any) -> None:
        if isinstance(value, msgspec.Struct):
            cls = type(value)
            reached.add(cls)
            fields = seen.setdefault(cls, set())
            for name in cls.__struct_fields__:
                item = getattr(value, name)
                if item is not UNSET:
                    fields.add(name)
                    walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for version in VERSIONS:
        for spec in methods_for(version):
            for obj in params_variants(spec.method, version).values():
                walk(obj)
            if spec.is_request:
                for obj in result_variants(spec.method, version).values():
                    walk(obj)
    walk(ElicitRequestParams.url_mode("m", "https://x", elicitation_id="e"))
    missing = {
        cls.__name__: sorted(set(cls.__struct_fields__) - seen[cls])
        for cls in reached
        if set(cls.__struct_fields__) - seen[cls]
    }
    assert not missing
    public = {
        obj
        for name in p._types.__all__
        if isinstance(obj := getattr(p, name), type) and issubclass(obj, msgspec.Struct)
    }
    abstract = {
        p.McpStruct,
        p.Result,
        p.PaginatedResult,
        p.CacheableResult,
        p.InputResponseRequestParams,
        RequestMeta,
    }
    assert not {cls.__name__ for cls in public - reached - abstract}


# ----------------------------------------------------------------------------- wire names


def _schema_property_names() -> set[str]:
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                names.update(props)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for version in VERSIONS:
        walk(definitions(version))
    return names


def test_wire_names_exist_in_the_schemas() -> None:
    known = _schema_property_names()
    bad = {}
    for name in p._types.__all__:
        cls = getattr(p, name)
        if isinstance(cls, type) and issubclass(cls, msgspec.Struct) and cls is not RequestMeta:
            unknown = set(cls.__struct_encode_fields__) - known
            tag_field = cls.__struct_config__.tag_field
            unknown.discard(tag_field)
            if unknown:
                bad[name] = sorted(unknown)
    assert not bad


@pytest.mark.parametrize(
    ("obj", "keys"),
    [
        (CallToolResult(content=[], is_error=True, structured_content={}), {"isError", "structuredContent"}),
        (Tool(name="t", input_schema={}, output_schema={}), {"inputSchema", "outputSchema"}),
        (ResourceContents(uri="u", mime_type="m", text=""), {"mimeType"}),
        (ResourceTemplate(uri_template="u", name="n"), {"uriTemplate"}),
        (ToolsCapability(list_changed=True), {"listChanged"}),
        (ListToolsResult(tools=[], next_cursor="c"), {"nextCursor", "ttlMs", "cacheScope", "resultType"}),
        (
            InitializeResult(
                protocol_version="v", capabilities=ServerCapabilities(), server_info=SERVER_INFO
            ),
            {"protocolVersion", "serverInfo"},
        ),
        (ProgressNotificationParams(progress_token=1, progress=1), {"progressToken"}),
        (Implementation(name="n", version="v", website_url="https://x"), {"websiteUrl"}),
        (RequestParams(meta={}), {"_meta"}),
        (ElicitRequestedSchema(properties={}, schema="s"), {"$schema", "type"}),
        (ToolResultContent(tool_use_id="u", content=[]), {"toolUseId", "type"}),
        (CancelledNotificationParams(request_id=1), {"requestId"}),
    ],
)
def test_wire_names(obj: msgspec.Struct, keys: set[str]) -> None:
    assert keys <= set(json.loads(encode(obj)))


# ----------------------------------------------------------------------------- registry


def test_registry_matches_schemas() -> None:
    for version in VERSIONS:
        expected = {
            key: senders_
            for key, senders_ in schema_methods(version).items()
            if not key[1].startswith(("tasks/", "notifications/tasks/"))
        }
        actual = {
            (spec.kind, spec.method): set(senders(spec.method, version)) for spec in methods_for(version)
        }
        assert actual == expected, version


def test_registry_api() -> None:
    assert lookup("nope") is None
    assert lookup("tools/call") is METHODS["tools/call"]
    assert not METHODS["initialize"].cancellable
    requests = [spec for spec in METHODS.values() if spec.is_request]
    assert all(spec.cancellable for spec in requests if spec.method != "initialize")
    assert all(spec.result_type is None for spec in METHODS.values() if not spec.is_request)
    assert method_available("initialize", V2025_11_25) and not method_available("initialize", V2026_07_28)
    assert method_available("server/discover", V2026_07_28)
    assert not method_available("server/discover", V2025_11_25)
    assert not method_available("elicitation/create", V2025_03_26)
    assert method_available("elicitation/create", V2025_06_18, sender="server")
    assert not method_available("elicitation/create", V2025_06_18, sender="client")
    assert method_available("notifications/progress", V2025_11_25, sender="client")
    assert not method_available("notifications/progress", V2026_07_28, sender="client")
    assert METHODS["sampling/createMessage"].input_request_available(V2026_07_28)
    assert not METHODS["sampling/createMessage"].input_request_available(V2025_11_25)
    assert METHODS["completion/complete"].capability_in(V2024_11_05) is None
    assert METHODS["completion/complete"].capability_in(V2025_03_26) == ("server", "completions")
    assert METHODS["ping"].direction_in(V2026_07_28) is None


def test_has_capability() -> None:
    assert has_capability(SERVER_CAPS, ("resources", "subscribe"))
    assert has_capability(SERVER_CAPS, ("tools",))
    assert not has_capability(ServerCapabilities(), ("tools",))
    assert not has_capability(ServerCapabilities(tools=ToolsCapability()), ("tools", "listChanged"))
    assert has_capability(ClientCapabilities(elicitation=ElicitationCapability()), ("elicitation",))
    assert has_capability({"sampling": {}}, ("sampling",))
    assert not has_capability({"roots": {"listChanged": False}}, ("roots", "listChanged"))
    assert not has_capability(None, ("roots",))
    assert has_capability(SERVER_CAPS, ("experimental", "com.example/feature"))
    for spec in METHODS.values():
        if spec.capability is not None:
            caps = CLIENT_CAPS if spec.capability[0] == "client" else SERVER_CAPS
            assert has_capability(caps, spec.capability[1:]), spec.method


# ----------------------------------------------------------------------------- adapt


def test_adapt_is_identity_for_the_newest_version() -> None:
    for spec in methods_for(LATEST_VERSION):
        for obj in params_variants(spec.method, LATEST_VERSION).values():
            assert adapt(obj, LATEST_VERSION) is obj
        if spec.is_request:
            for obj in result_variants(spec.method, LATEST_VERSION).values():
                assert adapt(obj, LATEST_VERSION) is obj


def test_adapt_leaves_untouched_what_needs_no_change() -> None:
    params = CallToolRequestParams(name="x")
    assert adapt(params, V2024_11_05) is params
    tool = Tool(name="t", input_schema={"type": "object"})
    assert adapt(tool, V2025_06_18) is tool
    result = CallToolResult(content=[TextContent(text="x")], result_type=UNSET)
    assert adapt(result, V2025_11_25) is result
    raw = Raw(b'{"content":[]}')
    assert adapt(raw, V2024_11_05) is raw


def test_adapt_content_blocks() -> None:
    result = CallToolResult(content=content_blocks())
    old = adapt(result, V2024_11_05)
    assert [type(b).__name__ for b in old.content] == [
        "TextContent",
        "ImageContent",
        "TextContent",
        "TextContent",
        "EmbeddedResource",
        "EmbeddedResource",
    ]
    assert "audio/wav" in old.content[2].text and "file:///a.txt" in old.content[3].text
    assert old.content[3].annotations == ANNOTATIONS
    mid = adapt(result, V2025_03_26)
    assert isinstance(mid.content[2], AudioContent) and isinstance(mid.content[3], TextContent)
    assert adapt(result, V2025_06_18).content == result.content


def test_adapt_strips_modern_fields_for_handshake_versions() -> None:
    result = ListToolsResult(tools=[], ttl_ms=5, cache_scope="public")
    for version in VERSIONS:
        data = json.loads(encode(adapt(result, version)))
        if is_modern(version):
            assert data == {"tools": [], "ttlMs": 5, "cacheScope": "public", "resultType": "complete"}
        else:
            assert data == {"tools": []}
    assert json.loads(encode(strip_modern(EmptyResult()))) == {}
    assert strip_modern(InputRequiredResult(request_state="s")).result_type == "input_required"
    # a legacy result decodes with the 2026 meaning of the absent fields
    legacy = coerce(Raw(b'{"tools": []}'), ListToolsResult)
    assert (legacy.result_type, legacy.ttl_ms, legacy.cache_scope) == ("complete", 0, "private")


def test_adapt_structured_content_and_output_schema() -> None:
    result = CallToolResult(content=[], structured_content=[1, 2])
    assert adapt(result, V2025_06_18).structured_content is UNSET
    assert adapt(result, V2025_11_25).structured_content is UNSET
    assert adapt(result, V2025_03_26).structured_content == [1, 2]  # undeclared there
    assert adapt(ARRAY_TOOL, V2025_11_25).output_schema is UNSET
    assert adapt(RICH_TOOL, V2025_11_25) is RICH_TOOL


def test_adapt_sampling() -> None:
    params = rich_create_message(V2025_11_25)
    latest_handshake = adapt(params, V2025_11_25)
    assert latest_handshake.messages is params.messages  # lists of blocks are fine here
    assert latest_handshake.tools[1].output_schema is UNSET  # ARRAY_TOOL's schema is not an object
    old = adapt(params, V2025_06_18)
    roles = ["user", "assistant", "assistant", "user", "user", "user", "user"]
    assert [m.role for m in old.messages] == roles
    assert all(not isinstance(m.content, list) for m in old.messages)
    assert isinstance(old.messages[-1].content, AudioContent)
    oldest = adapt(params, V2024_11_05)
    assert isinstance(oldest.messages[-1].content, TextContent)
    result = result_variants("sampling/createMessage", V2025_06_18)["rich"]
    joined = adapt(result, V2025_06_18).content
    assert isinstance(joined, TextContent) and "Calling" in joined.text and "add" in joined.text
    single = adapt(SamplingMessage(role="user", content=[TextContent(text="a")]), V2025_03_26)
    assert single.content == TextContent(text="a")


def test_adapt_elicitation() -> None:
    params = params_variants("elicitation/create", V2025_11_25)["rich"]
    old = adapt(params, V2025_06_18)
    fields = old.requested_schema.properties
    assert fields["size"].enum == ["s", "l"] and fields["size"].enum_names == ["Small", "Large"]
    assert fields["tags"].type == "string" and "x, y, z" in fields["tags"].description
    assert fields["name"] is FIELDS["name"]
    with pytest.raises(ValueError, match="URL-mode"):
        adapt(ElicitRequestParams.url_mode("m", "https://x", elicitation_id="e"), V2025_06_18)
    with pytest.raises(ValueError, match="elicitation_id"):
        adapt(ElicitRequestParams.url_mode("m", "https://x"), V2025_11_25)
    answer = ElicitResult(action="accept", content={"tags": ["x", "y"], "n": 1})
    assert adapt(answer, V2025_06_18).content == {"tags": "x, y", "n": 1}
    assert adapt(answer, V2025_11_25) is answer


def test_result_type_of() -> None:
    assert result_type_of(Raw(b'{"resultType":"input_required"}')) == "input_required"
    assert result_type_of(Raw(b"{}")) == "complete"
    assert result_type_of({"resultType": "x"}) == "x"
    assert result_type_of(ListRootsResult(roots=[])) == "complete"
    assert result_type_of(InputRequiredResult()) == "input_required"


# ----------------------------------------------------------------------------- types


def test_resource_contents() -> None:
    blob = ResourceContents.from_blob("u", b"\x01\x02")
    assert not blob.is_text and blob.blob_bytes() == b"\x01\x02"
    assert ResourceContents.from_text("u", "t").is_text
    with pytest.raises(ValueError):
        ResourceContents(uri="u")
    with pytest.raises(msgspec.ValidationError):
        coerce(Raw(b'{"uri":"u","text":"a","blob":"b"}'), ResourceContents)


def test_tagged_unions_decode() -> None:
    blocks = coerce(Raw(encode(content_blocks())), list[p.ContentBlock])
    assert blocks == content_blocks()
    with pytest.raises(msgspec.ValidationError):
        coerce(Raw(b'[{"type":"tool_use","id":"1","name":"n","input":{}}]'), list[p.ContentBlock])
    message = coerce(
        Raw(b'{"role":"user","content":[{"type":"tool_use","id":"1","name":"n","input":{}}]}'),
        SamplingMessage,
    )
    assert message.content == [ToolUseContent(id="1", name="n", input={})]
    result = coerce(Raw(encode(input_required(V2026_07_28))), InputRequiredResult)
    assert result == input_required(V2026_07_28)


def test_request_meta() -> None:
    meta = rmeta(V2026_07_28)
    typed = RequestMeta.from_meta(meta)
    assert typed.protocol_version == V2026_07_28
    assert typed.client_capabilities == CLIENT_CAPS
    assert typed.client_info == CLIENT_INFO
    assert typed.log_level == "debug" and typed.progress_token == "p-1"
    assert RequestMeta.from_meta(UNSET) == RequestMeta()
    with pytest.raises(msgspec.ValidationError):
        RequestMeta.from_meta({"io.modelcontextprotocol/logLevel": "loud"})


def test_field_schema_constructors() -> None:
    assert PrimitiveSchemaDefinition.multi_select(["a"]).items == MultiSelectItems(type="string", enum=["a"])
    assert PrimitiveSchemaDefinition.number().type == "number"
    form = ElicitRequestParams.form_mode("m", {"a": PrimitiveSchemaDefinition.boolean()}, required=["a"])
    assert not form.is_url_mode and form.requested_schema.required == ["a"]
    assert json.loads(encode(form))["requestedSchema"]["type"] == "object"


# ----------------------------------------------------------------------------- schema_check itself


def test_schema_check_reports_paths() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 3}}
    with pytest.raises(AssertionError, match=r"\$\.params\.name"):
        validate_message(message, V2025_06_18)
    with pytest.raises(AssertionError, match="not a request"):
        validate_message(Request(id=1, method="ping"), V2026_07_28)
    validate_message(Request(id=1, method="x/custom"), V2026_07_28, strict=False)
    validate_message(b'{"jsonrpc":"2.0","id":1,"result":{}}', V2025_03_26, method="ping")
    with pytest.raises(AssertionError, match="resultType"):
        validate_message({"jsonrpc": "2.0", "id": 1, "result": {}}, V2026_07_28)
    with pytest.raises(AssertionError, match="may not send"):
        validate_message(Request(id=1, method="tools/list"), V2025_06_18, sender="server")
    with pytest.raises(AssertionError, match="no MCP schema"):
        validate_message(Request(id=1, method="ping"), "1999-01-01")


# ----------------------------------------------------------------------------- hypothesis


def _wire_keys() -> list[str]:
    keys: set[str] = {"_meta", "type", "method", "resultType"}
    for name in p._types.__all__:
        cls = getattr(p, name)
        if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
            keys.update(cls.__struct_encode_fields__)
    return sorted(keys)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(
        [
            "text",
            "image",
            "audio",
            "resource",
            "resource_link",
            "tool_use",
            "tool_result",
            "ref/prompt",
            "ref/resource",
            "user",
            "assistant",
            "info",
            "form",
            "url",
            "accept",
        ]
    )
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_wire_keys()) | st.text(max_size=4), inner, max_size=5)
    ),
    max_leaves=20,
)
_objects = st.dictionaries(st.sampled_from(_wire_keys()), _json, max_size=8)

_TYPES: list[Any] = sorted(
    {spec.params_type for spec in METHODS.values()}
    | {spec.result_type for spec in METHODS.values() if spec.result_type is not None}
    | {InputRequiredResult, RequestMeta, ResourceContents, SamplingMessage, PromptMessage, Tool},
    key=lambda t: t.__name__,
) + [p.ContentBlock, p.SamplingContent, p.InputRequest, p.Reference]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_json | _objects)
def test_arbitrary_json_decodes_or_fails_cleanly(value: Any) -> None:
    """Every payload type either decodes a JSON value or raises
    msgspec.ValidationError / DecodeError, from bytes and from builtins."""
    raw = Raw(json.dumps(value).encode())
    for type_ in _TYPES:
        for payload in (raw, value):
            try:
                coerce(payload, type_)
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass
            except Exception as exc:
                raise AssertionError(f"{type_!r} raised {exc!r}") from exc


def _fixture_documents() -> list[tuple[Any, Any]]:
    docs = []
    for version in (V2025_11_25, V2026_07_28):
        for spec in methods_for(version):
            for obj in params_variants(spec.method, version).values():
                docs.append((spec.params_type, msgspec.to_builtins(obj)))
            if spec.is_request:
                for obj in result_variants(spec.method, version).values():
                    docs.append((type(obj), msgspec.to_builtins(obj)))
    return docs


def _mutated(doc: Any) -> st.SearchStrategy[Any]:
    """``doc`` with one nested value replaced by arbitrary JSON or one key dropped."""
    if isinstance(doc, dict) and doc:
        keys = sorted(doc)
        return st.one_of(
            st.sampled_from(keys).flatmap(lambda k: _mutated(doc[k]).map(lambda v: {**doc, k: v})),
            st.sampled_from(keys).map(lambda k: {kk: vv for kk, vv in doc.items() if kk != k}),
            _json,
        )
    if isinstance(doc, list) and doc:
        return st.one_of(
            st.integers(0, len(doc) - 1).flatmap(
                lambda i: _mutated(doc[i]).map(lambda v: [*doc[:i], v, *doc[i + 1 :]])
            ),
            _json,
        )
    return _json


_FIXTURE_DOCUMENTS = _fixture_documents()


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(_FIXTURE_DOCUMENTS).flatmap(lambda td: _mutated(td[1]).map(lambda d: (td[0], d))))
def test_mutated_payloads_decode_or_fail_cleanly(case: tuple[Any, Any]) -> None:
    type_, value = case
    for payload in (Raw(json.dumps(value).encode()), value):
        try:
            coerce(payload, type_)
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        except Exception as exc:
            raise AssertionError(f"{type_!r} raised {exc!r}") from exc
