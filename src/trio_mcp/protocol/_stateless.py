"""Payloads of the stateless era (2026-07-28): input requests embedded in
results, input-required results and ``subscriptions/listen``."""

from __future__ import annotations

from typing import Any, TypeAlias

from msgspec import UNSET, UnsetType, field

from ._client_types import (
    CreateMessageRequestParams,
    ElicitRequestParams,
)
from ._common import (
    RESULT_INPUT_REQUIRED,
    McpStruct,
    NotificationParams,
    RequestParams,
    Result,
    ResultType,
)

__all__ = [
    "CreateMessageRequest",
    "ListRootsRequest",
    "ElicitRequest",
    "InputRequest",
    "InputRequests",
    "InputResponses",
    "InputRequiredResult",
    "SubscriptionFilter",
    "SubscriptionsListenRequestParams",
    "SubscriptionsListenResult",
    "SubscriptionsAcknowledgedNotificationParams",
]

# --------------------------------------------------------------------------
# Stateless era (2026-07-28)


class CreateMessageRequest(
    McpStruct, tag_field="method", tag="sampling/createMessage", frozen=True, kw_only=True
):
    """A sampling input request inside :class:`InputRequiredResult`."""

    params: CreateMessageRequestParams


class ListRootsRequest(McpStruct, tag_field="method", tag="roots/list", frozen=True, kw_only=True):
    """A roots input request inside :class:`InputRequiredResult`."""

    params: RequestParams | UnsetType = UNSET


class ElicitRequest(McpStruct, tag_field="method", tag="elicitation/create", frozen=True, kw_only=True):
    """An elicitation input request inside :class:`InputRequiredResult`."""

    params: ElicitRequestParams


#: A server-to-client request embedded in a result (tagged on ``method``).
InputRequest: TypeAlias = CreateMessageRequest | ListRootsRequest | ElicitRequest
InputRequests: TypeAlias = dict[str, InputRequest]
#: Values are :class:`CreateMessageResult`, :class:`ListRootsResult` or
#: :class:`ElicitResult` (untagged: decode per key with ``coerce``).
InputResponses: TypeAlias = dict[str, Any]


class InputRequiredResult(Result, frozen=True, kw_only=True):
    """The server needs client input before it can complete the request: the
    client fulfils ``input_requests`` and retries with ``inputResponses`` and
    ``requestState``. At least one of the two fields must be set."""

    result_type: ResultType | UnsetType = RESULT_INPUT_REQUIRED
    input_requests: dict[str, InputRequest] | UnsetType = UNSET
    request_state: str | UnsetType = UNSET


class SubscriptionFilter(McpStruct, frozen=True, kw_only=True):
    """Notification types opted in to on a ``subscriptions/listen`` stream."""

    tools_list_changed: bool | UnsetType = UNSET
    prompts_list_changed: bool | UnsetType = UNSET
    resources_list_changed: bool | UnsetType = UNSET
    resource_subscriptions: list[str] | UnsetType = UNSET


class SubscriptionsListenRequestParams(RequestParams, frozen=True, kw_only=True):
    notifications: SubscriptionFilter


class SubscriptionsListenResult(Result, frozen=True, kw_only=True):
    """Sent when the server ends a subscription; ``_meta`` must carry
    :data:`META_SUBSCRIPTION_ID` (the listen request's id)."""

    meta: dict[str, Any] = field(name="_meta")


class SubscriptionsAcknowledgedNotificationParams(NotificationParams, frozen=True, kw_only=True):
    """First notification on a subscription stream: what the server honours.
    ``_meta`` carries :data:`META_SUBSCRIPTION_ID`."""

    notifications: SubscriptionFilter
