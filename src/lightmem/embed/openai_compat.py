"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder
from lightmem.errors import BackendError, ConfigError
from lightmem.ledger import Ledger
from lightmem.llm.openai_compat import sdk_failure
from lightmem.retry import check_attempts

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder(Embedder):
    """OpenAI, vLLM, Ollama or llama.cpp server embeddings (needs the ``openai`` extra).

    ``base_url`` and ``api_key`` default to ``LIGHTMEM_EMBED_BASE_URL`` /
    ``LIGHTMEM_EMBED_API_KEY`` (then ``OPENAI_API_KEY``). TLS verification stays on.
    A failed request worth retrying (timeout, lost connection, HTTP 408, 409, 429, 5xx) is
    retried ``max_retries`` times by :class:`Embedder` (the SDK's own retries are off), so
    each attempt is accounted; the server's reported ``usage`` is the call's token count.
    """

    def __init__(
        self,
        model: str,
        embedding_dims: int,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        batch_size: int = 256,
        ledger: Ledger | None = None,
    ) -> None:
        super().__init__(ledger)
        if not model:
            raise ConfigError("text_embedder.configs.model: required for the openai embedder")
        if embedding_dims <= 0:
            raise ConfigError("text_embedder.configs.embedding_dims: must be a positive integer")
        self.max_attempts = check_attempts(max_retries, "max_retries", least=0) + 1
        self.backoff_s = backoff_s
        try:
            import openai
        except ImportError as exc:
            raise BackendError("the openai embedder needs: pip install 'lightmem[openai]'") from exc
        key = (
            api_key
            or os.environ.get("LIGHTMEM_EMBED_API_KEY")
            or os.environ.get("OPENAI_API_KEY")
            or "unused"
        )
        self._client: Any = openai.OpenAI(
            api_key=key,
            base_url=base_url or os.environ.get("LIGHTMEM_EMBED_BASE_URL") or None,
            timeout=timeout_s,
            max_retries=0,
        )
        self._openai = openai
        self._model = model
        self._batch = batch_size
        self.dim = embedding_dims
        self.name = f"openai:{model}:{embedding_dims}"

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        return self._embed_reported(texts)[0]

    def _embed_reported(self, texts: Sequence[str]) -> tuple[npt.NDArray[np.floating], int | None]:
        rows: list[list[float]] = []
        tokens: int | None = 0
        for start in range(0, len(texts), self._batch):
            batch = list(texts[start : start + self._batch])
            try:
                resp = self._client.embeddings.create(model=self._model, input=batch)
            except self._openai.OpenAIError as exc:
                raise sdk_failure(self._openai, exc, "embedding endpoint") from exc
            data = sorted(resp.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise BackendError(
                    f"embedding endpoint returned {len(data)} vectors for {len(batch)} texts"
                )
            rows.extend(list(d.embedding) for d in data)
            used = getattr(getattr(resp, "usage", None), "prompt_tokens", None)
            tokens = None if tokens is None or not isinstance(used, int) else tokens + used
        return np.asarray(rows, dtype=np.float32), tokens
