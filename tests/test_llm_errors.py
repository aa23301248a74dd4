"""LLM client errors: one exception root, retry counts used as given, ``json_mode`` obeyed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lightmem import (
    BackendError,
    ChatReply,
    ConfigError,
    LightMemError,
    LightMemory,
    LLMClient,
    OpenAIChatClient,
    TransientLLMError,
)
from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.llm.schema import OutputSchema
from lightmem.testing import OpenAIStubServer


class _Scripted(LLMClient):
    """Answers from a script: an exception in it is raised by that request instead."""

    name = "scripted"

    def __init__(self, script: list[str | Exception], **kwargs: Any) -> None:
        super().__init__(sleep=lambda _s: None, **kwargs)
        self.script = script
        self.requests = 0

    def _chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        output: OutputSchema | None,
        max_tokens: int | None,
    ) -> ChatReply:
        self.requests += 1
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return ChatReply(step, 5, 5)


def _ops(client: LLMClient) -> dict[str, tuple[int, int]]:
    return {r.op: (r.calls, r.errors) for r in client.ledger.totals()}


def _answer(value: Any) -> Any:
    return value["a"]


def test_transient_llm_error_is_a_backend_error_and_still_retried() -> None:
    """Fix 21: under the one root, and caught as retryable before any BackendError clause."""
    assert issubclass(TransientLLMError, BackendError)
    assert issubclass(TransientLLMError, LightMemError)
    client = _Scripted([TransientLLMError("HTTP 503"), json.dumps({"a": 1})], max_attempts=2)
    assert client.complete_json([{"role": "user", "content": "q"}], _answer, op="t") == 1
    assert client.requests == 2 and _ops(client) == {"t": (2, 1)}


def test_retries_run_out_as_a_plain_backend_error() -> None:
    client = _Scripted([TransientLLMError("HTTP 503")] * 3, max_attempts=3)
    with pytest.raises(BackendError, match="failed 3 times: HTTP 503") as info:
        client.complete_json([{"role": "user", "content": "q"}], _answer, op="t")
    assert not isinstance(info.value, TransientLLMError)  # exhausted: no longer retryable
    assert _ops(client) == {"t": (3, 3)}


def test_a_permanent_backend_error_is_not_retried() -> None:
    client = _Scripted([BackendError("HTTP 401"), json.dumps({"a": 1})], max_attempts=4)
    with pytest.raises(BackendError, match="HTTP 401"):
        client.complete_json([{"role": "user", "content": "q"}], _answer, op="t")
    assert client.requests == 1 and _ops(client) == {"t": (1, 1)}


def test_invalid_reply_is_a_lightmem_error_that_asks_for_a_repair() -> None:
    """Fix 21: InvalidReply joins the hierarchy and stays a ValueError, so parsers that raise
    either still get a repair round."""
    assert issubclass(InvalidReply, LightMemError) and issubclass(InvalidReply, ValueError)

    def strict(value: Any) -> int:
        if value.get("a") != 2:
            raise InvalidReply("a must be 2")
        return 2

    client = _Scripted([json.dumps({"a": 1}), json.dumps({"a": 2})], json_repairs=1)
    assert client.complete_json([{"role": "user", "content": "q"}], strict, op="t") == 2
    assert client.requests == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"json_repairs": -1}, "json_repairs"),
    ],
)
def test_retry_counts_are_refused_not_clamped(kwargs: dict[str, Any], field: str) -> None:
    """Smaller note: LLMClient used to turn max_attempts=0 into 1 and json_repairs=-1 into 0."""
    with pytest.raises(ConfigError, match=rf"^{field}: expected an integer of at least"):
        _Scripted([], **kwargs)


def _bodies(stub: OpenAIStubServer) -> list[dict[str, Any]]:
    return [b for b in stub.counters.bodies if "messages" in b]


def test_json_mode_false_sends_no_response_format_under_auto() -> None:
    """Fix 8: ``json_mode: false`` with ``structured_output`` left at "auto" used to send a
    json_schema ``response_format`` anyway."""
    schema = OutputSchema("answer", {"type": "object"}, max_tokens=50)
    with OpenAIStubServer(chat_handler=lambda _m: json.dumps({"a": 3})) as stub:
        client = OpenAIChatClient("m", base_url=stub.base_url, api_key="k", json_mode=False)
        assert client.structured == "none"
        messages: list[ChatMessage] = [{"role": "user", "content": "q"}]
        assert client.complete_json(messages, _answer, op="t", output=schema) == 3
        (body,) = _bodies(stub)
        assert "response_format" not in body


def test_json_mode_false_from_config(tmp_path: Path) -> None:
    with OpenAIStubServer() as stub:
        cfg = {
            "store": {"path": str(tmp_path / "m.db")},
            "memory_manager": {
                "model_name": "openai",
                "configs": {"model": "m", "openai_base_url": stub.base_url, "json_mode": False},
            },
        }
        with LightMemory.from_config(cfg) as mem:
            assert mem.memory_manager.client.structured == "none"  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
def test_json_mode_false_contradicting_a_structured_output_is_refused(mode: str) -> None:
    with pytest.raises(ConfigError, match=rf"json_mode: false contradicts .*'{mode}'"):
        OpenAIChatClient(
            "m",
            base_url="http://127.0.0.1:9/v1",
            api_key="k",
            json_mode=False,
            structured_output=mode,  # type: ignore[arg-type]
        )
    assert (
        OpenAIChatClient(
            "m", base_url="http://127.0.0.1:9/v1", json_mode=False, structured_output="none"
        ).structured
        == "none"
    )


def test_the_retry_backoff_comes_from_the_config() -> None:
    from lightmem.config import build_embedder, build_llm, parse_config
    from lightmem.ledger import Ledger

    def config(llm: dict[str, Any], embedder: dict[str, Any]) -> dict[str, Any]:
        return {
            "memory_manager": {"model_name": "openai", "configs": {"model": "m", **llm}},
            "text_embedder": {
                "model_name": "openai",
                "configs": {"model": "e", "embedding_dims": 8, **embedder},
            },
        }

    settings = parse_config(config({"backoff_s": 0.25, "max_backoff_s": 2}, {"backoff_s": 0}))
    client = build_llm(settings, Ledger())
    assert client is not None and (client.backoff_s, client.max_backoff_s) == (0.25, 2.0)
    assert build_embedder(settings, Ledger()).backoff_s == 0.0
    defaults = parse_config(config({}, {}))
    assert defaults.llm is not None and (defaults.llm.backoff_s, defaults.llm.max_backoff_s) == (
        0.5,
        8.0,
    )
    assert defaults.embedder_backoff_s == 0.5
    for llm, embedder, field in (
        ({"backoff_s": -1}, {}, "memory_manager.configs.backoff_s"),
        ({"max_backoff_s": 10**6}, {}, "memory_manager.configs.max_backoff_s"),
        ({"backoff_s": "1"}, {}, "memory_manager.configs.backoff_s"),
        ({}, {"backoff_s": 61}, "text_embedder.configs.backoff_s"),
    ):
        with pytest.raises(ConfigError, match=rf"^{field}"):
            parse_config(config(llm, embedder))
