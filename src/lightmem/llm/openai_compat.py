"""Chat through any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Literal

from lightmem.errors import BackendError, ConfigError, TransientBackendError
from lightmem.ledger import Ledger
from lightmem.llm.base import ChatMessage, ChatReply, LLMClient, TransientLLMError
from lightmem.llm.schema import OutputSchema
from lightmem.text import estimate_tokens

__all__ = ["STRUCTURED_MODES", "OpenAIChatClient", "StructuredMode", "sdk_failure"]

StructuredMode = Literal["auto", "json_schema", "json_object", "none"]
STRUCTURED_MODES: tuple[StructuredMode, ...] = ("auto", "json_schema", "json_object", "none")
#: words in a 400/422 message that blame the requested output format
_FORMAT_WORDS = ("response_format", "schema", "json", "grammar")
_WEAKER: dict[str, StructuredMode] = {"json_schema": "json_object", "json_object": "none"}


class OpenAIChatClient(LLMClient):
    """The ``openai`` SDK pointed at ``base_url`` (needs the ``openai`` extra).

    Unset arguments come from ``LIGHTMEM_LLM_BASE_URL``, ``LIGHTMEM_LLM_MODEL`` and
    ``LIGHTMEM_LLM_API_KEY`` (then ``OPENAI_API_KEY``). TLS certificates are verified.
    Retries are done by :class:`LLMClient` (the SDK's own are off) so each is accounted.

    ``structured_output`` says how answers are constrained: ``"json_schema"`` sends each
    call's bounded schema as ``response_format`` (OpenAI, vLLM, llama.cpp server and Ollama
    accept it), ``"json_object"`` asks only for JSON, ``"none"`` relies on the prompt and
    the repair rounds. ``"auto"`` (the default) starts with ``json_schema`` and steps down
    once for the client's lifetime when the endpoint refuses it with HTTP 400/422.
    ``json_mode=False`` is ``"none"`` (and refused beside any other explicit mode). Every
    answer is parsed and validated the same way whatever the mode, since servers that accept
    a schema do not always enforce it.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = True,
        structured_output: StructuredMode = "auto",
        context_tokens: int | None = None,
        ledger: Ledger | None = None,
        **retry: Any,
    ) -> None:
        super().__init__(
            ledger=ledger, context_tokens=context_tokens, max_tokens=max_tokens, **retry
        )
        if structured_output not in STRUCTURED_MODES:
            raise ConfigError(
                f"memory_manager.configs.structured_output: {structured_output!r} is not one "
                f"of {', '.join(STRUCTURED_MODES)}"
            )
        if not json_mode:
            # json_mode=False asks for no response_format at all: "auto" means "none" then,
            # and an explicit format contradicts it (neither setting is silently dropped).
            if structured_output not in ("auto", "none"):
                raise ConfigError(
                    "memory_manager.configs.json_mode: false contradicts "
                    f"structured_output {structured_output!r} (set one of them)"
                )
            structured_output = "none"
        model = model or os.environ.get("LIGHTMEM_LLM_MODEL")
        if not model:
            raise ConfigError("memory_manager.configs.model: required (or set LIGHTMEM_LLM_MODEL)")
        try:
            import openai
        except ImportError as exc:
            raise BackendError(
                "the openai LLM client needs: pip install 'lightmem[openai]'"
            ) from exc
        self._openai = openai
        key = (
            api_key
            or os.environ.get("LIGHTMEM_LLM_API_KEY")
            or os.environ.get("OPENAI_API_KEY")
            or "unused"
        )
        self.base_url = base_url or os.environ.get("LIGHTMEM_LLM_BASE_URL") or None
        self._client: Any = openai.OpenAI(
            api_key=key, base_url=self.base_url, timeout=timeout_s, max_retries=0
        )
        self._endpoint = f"LLM endpoint {self.base_url or 'api.openai.com'}"
        self.model = model
        self.name = f"openai:{model}"
        self._temperature = temperature
        self._auto = structured_output == "auto"
        #: the mode in use (``auto`` settles on one at the first refusal)
        self.structured: StructuredMode = "json_schema" if self._auto else structured_output

    def _chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        output: OutputSchema | None,
        max_tokens: int | None,
    ) -> ChatReply:
        while True:
            kwargs: dict[str, Any] = {
                "model": self.model,
                "messages": list(messages),
                "temperature": self._temperature,
            }
            if max_tokens:
                kwargs["max_tokens"] = max_tokens
            mode = self.structured
            if mode == "json_schema" and output is not None:
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": output.name, "schema": dict(output.schema)},
                }
            elif mode != "none":
                kwargs["response_format"] = {"type": "json_object"}
            try:
                return self._send(kwargs, messages)
            except _Refused as exc:
                weaker = _WEAKER.get(mode)
                if not (self._auto and weaker and "response_format" in kwargs):
                    raise BackendError(str(exc)) from exc
                self.structured = weaker

    def _send(self, kwargs: dict[str, Any], messages: Sequence[ChatMessage]) -> ChatReply:
        oa = self._openai
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except oa.APIStatusError as exc:
            if (
                exc.status_code in (400, 422)
                and "response_format" in kwargs
                and any(w in str(exc.message).lower() for w in _FORMAT_WORDS)
            ):
                raise _Refused(
                    f"{self._endpoint} refused the request: HTTP {exc.status_code}: {exc.message}"
                ) from exc
            raise sdk_failure(oa, exc, self._endpoint, TransientLLMError) from exc
        except oa.OpenAIError as exc:
            raise sdk_failure(oa, exc, self._endpoint, TransientLLMError) from exc
        if not resp.choices:
            raise TransientLLMError("reply had no choices")
        text = resp.choices[0].message.content or ""
        usage = getattr(resp, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        if prompt is not None and completion is not None:
            return ChatReply(text, int(prompt), int(completion))
        return ChatReply(
            text=text,
            prompt_tokens=sum(estimate_tokens(m["content"]) for m in messages),
            completion_tokens=estimate_tokens(text),
            usage_reported=False,
        )


def sdk_failure(
    oa: Any,
    exc: Exception,
    endpoint: str,
    transient: type[TransientBackendError] = TransientBackendError,
) -> BackendError:
    """The lightmem error for an exception ``exc`` of the openai SDK (module ``oa``), for
    every client of an OpenAI-compatible endpoint: ``transient`` (retried) for timeouts,
    lost connections and HTTP 408, 409, 429 and 5xx, else a permanent BackendError.
    ``endpoint`` opens the message."""
    if isinstance(exc, oa.APIConnectionError):  # timeouts included
        return transient(f"{endpoint} failed: {type(exc).__name__}: {exc}")
    if isinstance(exc, oa.APIStatusError):
        message = f"{endpoint} failed: HTTP {exc.status_code}: {exc.message}"
        if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
            return transient(message)
        return BackendError(message)
    return BackendError(f"{endpoint} failed: {exc}")


class _Refused(Exception):
    """The endpoint rejected a request that carried a ``response_format`` (HTTP 400/422)."""
