"""The official Python SDK's client against our stdio servers.

``sdk_client_driver.py`` runs under the SDK's interpreter (``mcp==2.3.0`` in
``.cache/sdk-venv``): it starts ``examples/everything_server.py``,
``examples/conformance_server.py`` and ``examples/roots_server.py`` with the
SDK's stdio client, once in ``legacy`` mode (the initialize handshake) and
once in the default ``auto`` mode (a ``server/discover`` probe first, which
our servers answer: they speak the 2026-07-28 era), exercises tools,
progress, logging, sampling, elicitation, resources, subscriptions, prompts,
completion and roots (the SDK client's callbacks answer), and prints a JSON
report of what it observed. These tests run it once (a subprocess with a
timeout, in its own process group) and check the report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.interop

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "sdk_client_driver.py"
EXAMPLES = HERE.parents[1] / "examples"
#: The whole driver run (six connections; about ten seconds here).
DRIVER_TIMEOUT = 90
MODES = ("legacy", "auto")
EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28"}
PNG_MAGIC_HEX = "89504e470d0a1a0a"


@pytest.fixture(scope="module")
def report(sdk_python: Path, project_python: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    command = [str(sdk_python), str(DRIVER), "--python", str(project_python), "--examples", str(EXAMPLES)]
    proc = subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=DRIVER_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the servers it started
        out, err = proc.communicate()
        pytest.fail(
            f"the SDK driver took more than {DRIVER_TIMEOUT} s; stderr:\n{err.decode(errors='replace')[-4000:]}"
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != 0:
        pytest.fail(
            f"the SDK driver exited with {proc.returncode}; stderr:\n{err.decode(errors='replace')[-4000:]}"
        )
    data: dict[str, Any] = json.loads(out)
    data["stderr"] = err.decode(errors="replace")
    return data


def _run(report: dict[str, Any], server: str, mode: str) -> dict[str, Any]:
    run = report["runs"][f"{server}/{mode}"]
    assert "error" not in run, f"{server}/{mode}: {run['error']}\n{report['stderr'][-4000:]}"
    return run


def _step(report: dict[str, Any], server: str, mode: str, name: str) -> Any:
    value = _run(report, server, mode)["steps"][name]
    if isinstance(value, dict) and set(value) == {"error"}:
        pytest.fail(f"{server}/{mode} step {name!r}: {value['error']}")
    return value


def test_sdk_version(report: dict[str, Any]) -> None:
    assert report["sdk"] == "2.3.0"


@pytest.mark.parametrize("server", ["everything", "conformance", "roots"])
@pytest.mark.parametrize("mode", MODES)
def test_connect(report: dict[str, Any], server: str, mode: str) -> None:
    """legacy: initialize at 2025-11-25; auto: server/discover answered, so 2026-07-28 adopted (a probe
    the SDK gave up on would have settled on the handshake era)."""
    connect = _run(report, server, mode)["connect"]
    assert connect["protocol_version"] == EXPECTED_VERSION[mode]
    assert connect["server_info"]["name"] == f"trio-mcp-{server}"
    assert connect["instructions"]
    capabilities = connect["capabilities"]
    assert {"tools", "resources", "logging", "completions"} <= set(capabilities)


@pytest.mark.parametrize("mode", MODES)
def test_everything_tools(report: dict[str, Any], mode: str) -> None:
    tools = _step(report, "everything", mode, "tools")
    assert {
        "echo",
        "add",
        "long_running_operation",
        "log_messages",
        "sample_llm",
        "collect_preferences",
    } <= set(tools)
    assert tools["echo"]["annotations"] == {
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert tools["add"]["output_schema"] is True
    assert _step(report, "everything", mode, "echo") == ["hello from the SDK"]
    add = _step(report, "everything", mode, "add")
    assert add["structured"] == {"result": 5.0} and add["is_error"] is False
    weather = _step(report, "everything", mode, "structured")
    assert weather["city"] == "Lisbon" and set(weather) == {"city", "temperature_c", "conditions", "humidity"}
    media = _step(report, "everything", mode, "media")
    assert media == {
        "image": ["text", "image", "text"],
        "png": [PNG_MAGIC_HEX],
        "audio": [["audio", "audio/wav"]],
    }


@pytest.mark.parametrize("mode", MODES)
def test_everything_progress_and_logging(report: dict[str, Any], mode: str) -> None:
    progress = _step(report, "everything", mode, "progress")
    assert progress["progress"] == [[float(i), 4.0, f"step {i} of 4"] for i in (1, 2, 3, 4)]
    assert progress["texts"] == ["Long running operation completed: 4 steps in 0.2 seconds."]
    # legacy: logging/setLevel warning; auto: the level in every request's _meta.
    level = _step(report, "everything", mode, "log_level")
    assert level["via"] == ("logging/setLevel" if mode == "legacy" else "_meta")
    logging = _step(report, "everything", mode, "logging")
    assert logging["levels"] == ["warning", "error"]  # debug, info and notice filtered out


@pytest.mark.parametrize("mode", MODES)
def test_everything_sampling_and_elicitation(report: dict[str, Any], mode: str) -> None:
    sampling = _step(report, "everything", mode, "sampling")
    assert sampling["texts"] == ["LLM (sdk-test-model) says: The SDK's sampling callback answers."]
    asked = sampling["asked"]
    assert asked["maxTokens"] == 33 and asked["systemPrompt"] == "You are a helpful assistant."
    assert asked["messages"] == [{"role": "user", "content": {"type": "text", "text": "Say hi"}}]

    elicitation = _step(report, "everything", mode, "elicitation")
    assert elicitation["accepted"] == ["Hello Grace (85); newsletter: yes; theme: dark."]
    assert elicitation["declined"] == ["The user chose to decline."]
    schema = elicitation["asked"]["requestedSchema"]
    assert elicitation["asked"]["mode"] == "form" and schema["required"] == ["name"]
    assert schema["properties"]["theme"]["enum"] == ["dark", "light", "system"]


@pytest.mark.parametrize("mode", MODES)
def test_everything_url_elicitation(report: dict[str, Any], mode: str) -> None:
    url = _step(report, "everything", mode, "url_elicitation")
    asked = url["asked"]
    assert asked["mode"] == "url" and asked["url"].startswith(
        "https://auth.example.com/authorize?service=sdk"
    )
    assert url["texts"] == [f"URL elicitation {asked['elicitationId']}: the user chose to accept."]


@pytest.mark.parametrize("mode", MODES)
def test_everything_resources_prompts_completion(report: dict[str, Any], mode: str) -> None:
    resources = _step(report, "everything", mode, "resources")
    assert resources["resources"] == ["demo://counter", "demo://logo.png", "demo://readme"]
    assert resources["templates"] == ["demo://bytes/{size}", "demo://greeting/{name}"]
    assert resources["readme"] == ["text/markdown", "# Everything demo"]
    assert resources["logo"] == ["image/png", PNG_MAGIC_HEX]
    assert resources["greeting"] == "Hello, Ada!" and resources["bytes"] == [0, 1, 2, 3, 4]

    # legacy: resources/subscribe + notifications/resources/updated; auto: subscriptions/listen.
    subscription = _step(report, "everything", mode, "subscription")
    assert subscription["via"] == ("resources/subscribe" if mode == "legacy" else "subscriptions/listen")
    assert subscription["updated"] == ["demo://counter"]

    prompts = _step(report, "everything", mode, "prompts")
    assert prompts["prompts"] == ["code_review", "explain_resource", "simple"]
    assert prompts["simple"] == ["Tell me something interesting about trio."]
    assert prompts["review"][0] == ["user", "Please review this python code:\n\n```python\nprint(1)\n```"]
    assert prompts["review"][1][0] == "assistant"
    assert prompts["embedded"] == ["resource", "text"] and prompts["embedded_text"] == "Hello, Linus!"

    completion = _step(report, "everything", mode, "completion")
    assert completion == {"language": ["python"], "name": ["Alan"]}


@pytest.mark.parametrize("mode", MODES)
def test_conformance_fixture(report: dict[str, Any], mode: str) -> None:
    tools = _step(report, "conformance", mode, "tools")
    assert {"test_simple_text", "test_tool_with_logging", "test_tool_with_progress", "test_sampling"} <= set(
        tools
    )
    assert _step(report, "conformance", mode, "content") == {
        "test_simple_text": ["text"],
        "test_image_content": ["image"],
        "test_audio_content": ["audio"],
        "test_embedded_resource": ["resource"],
        "test_multiple_content_types": ["text", "image", "resource"],
    }
    error = _step(report, "conformance", mode, "error")
    assert error["is_error"] is True and "This tool intentionally returns an error" in error["texts"][0]

    logging = _step(report, "conformance", mode, "logging")
    if mode == "auto":  # the per-request _meta level (info) lets them through
        assert logging["logs"] == [
            ["info", "Tool execution started"],
            ["info", "Tool processing data"],
            ["info", "Tool execution completed"],
        ]
    else:  # Client(log_level=...) has no effect on a handshake-era connection: no setLevel was sent here
        assert [entry[1] for entry in logging["logs"]] == [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ]
    assert logging["texts"] == ["Tool with logging executed successfully"]
    progress = _step(report, "conformance", mode, "progress")
    assert progress["progress"] == [[0.0, 100.0], [50.0, 100.0], [100.0, 100.0]]

    assert _step(report, "conformance", mode, "sampling") == [
        "LLM response: The SDK's sampling callback answers."
    ]
    elicitation = _step(report, "conformance", mode, "elicitation")
    assert elicitation["basic"] == [
        'User response: action=accept, content={"username":"sdk","email":"sdk@example.com"}'
    ]
    assert elicitation["defaults_schema"] == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }
    assert elicitation["enum_keys"] == [
        "legacyEnum",
        "titledMulti",
        "titledSingle",
        "untitledMulti",
        "untitledSingle",
    ]
    assert elicitation["enums"][0].startswith("Elicitation completed: action=accept")

    resources = _step(report, "conformance", mode, "resources")
    assert resources["text"] == "This is the content of the static text resource."
    assert resources["binary"] == ["image/png", PNG_MAGIC_HEX]
    assert resources["template"] == {"id": "42", "templateTest": True, "data": "Data for ID: 42"}
    subscribe = _step(report, "conformance", mode, "subscribe")
    if mode == "auto":
        assert subscribe["honored"] == {"resourceSubscriptions": ["test://watched-resource"]}
    else:
        assert subscribe == {"via": "resources/subscribe", "ok": True}

    prompts = _step(report, "conformance", mode, "prompts")
    assert prompts["prompts"] == [
        "test_prompt_with_arguments",
        "test_prompt_with_embedded_resource",
        "test_prompt_with_image",
        "test_simple_prompt",
    ]
    assert prompts["args"] == "Prompt with arguments: arg1='a', arg2='b'"
    assert prompts["image"] == ["image", "text"]
    assert _step(report, "conformance", mode, "completion") == {
        "arg1": ["paris", "park", "party"],
        "arg2": ["paris-one", "paris-two"],
        "template": ["12", "123", "1234"],
    }


@pytest.mark.parametrize("mode", MODES)
def test_roots(report: dict[str, Any], mode: str) -> None:
    listed = _step(report, "roots", mode, "list_roots")
    assert listed["texts"] and not listed["texts"][0].startswith("Tool 'list_roots' failed"), listed["texts"]
    (root,) = listed["structured"]["result"]
    assert root["name"] == "workspace" and root["exists"] is True and root["uri"].startswith("file:///")
    assert listed["asked"] >= 1  # the SDK's list_roots_callback answered
    assert _step(report, "roots", mode, "read_file") == ["hello from a root\n"]
    if mode == "legacy":
        changed = _step(report, "roots", mode, "roots_changed")
        assert changed["asked_again"] == 1
        assert changed["roots"][1] == "file:///nonexistent-trio-mcp-root"
