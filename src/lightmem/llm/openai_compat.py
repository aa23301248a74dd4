"""Chat through any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lightmem.errors import BackendError, ConfigError
from lightmem.ledger import Ledger
from lightmem.llm.base import ChatMessage, ChatReply, LLMClient, TransientLLMError
from lightmem.text import estimate_tokens


class OpenAIChatClient(LLMClient):
    """The ``openai`` SDK pointed at ``base_url`` (needs the ``openai`` extra).

    Unset arguments come from ``LIGHTMEM_LLM_BASE_URL``, ``LIGHTMEM_LLM_MODEL`` and
    ``LIGHTMEM_LLM_API_KEY`` (then ``OPENAI_API_KEY``). TLS certificates are verified.
    Retries are done by :class:`LLMClient` (the SDK's own are off) so each is accounted.
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
        ledger: Ledger | None = None,
        **retry: Any,
    ) -> None:
        super().__init__(ledger=ledger, **retry)
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
        self.model = model
        self.name = f"openai:{model}"
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._json_mode = json_mode

    def _chat(self, messages: Sequence[ChatMessage], *, json_mode: bool) -> ChatReply:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": self._temperature,
        }
        if self._max_tokens:
            kwargs["max_tokens"] = self._max_tokens
        if json_mode and self._json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        oa = self._openai
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except (oa.APITimeoutError, oa.APIConnectionError, oa.RateLimitError) as exc:
            raise TransientLLMError(f"{type(exc).__name__}: {exc}") from exc
        except oa.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (408, 409, 429):
                raise TransientLLMError(f"HTTP {exc.status_code}: {exc.message}") from exc
            raise BackendError(
                f"LLM endpoint {self.base_url or 'api.openai.com'} refused the request: "
                f"HTTP {exc.status_code}: {exc.message}"
            ) from exc
        except oa.OpenAIError as exc:
            raise BackendError(f"LLM endpoint failed: {exc}") from exc
        if not resp.choices:
            raise TransientLLMError("reply had no choices")
        text = resp.choices[0].message.content or ""
        usage = getattr(resp, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        return ChatReply(
            text=text,
            prompt_tokens=int(prompt)
            if prompt is not None
            else sum(estimate_tokens(m["content"]) for m in messages),
            completion_tokens=int(completion) if completion is not None else estimate_tokens(text),
        )
