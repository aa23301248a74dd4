"""The offline default embedder: WordLlama static embeddings (19 MB, loads with no network)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder, LazyModel
from lightmem.errors import BackendError, ConfigError
from lightmem.ledger import Ledger

__all__ = ["WordLlamaEmbedder"]


class WordLlamaEmbedder(Embedder):
    """WordLlama ``l2_supercat`` weights shipped inside the ``wordllama`` wheel.

    Loading never touches the network: the weights are read from the installed package.
    """

    def __init__(
        self, dim: int = 256, *, config: str = "l2_supercat", ledger: Ledger | None = None
    ) -> None:
        super().__init__(ledger)
        if dim not in (64, 128, 256):
            raise ConfigError(
                f"text_embedder.configs.embedding_dims: wordllama ships 256-d weights "
                f"(truncatable to 64 or 128), got {dim}"
            )
        self.dim = dim
        self.name = f"wordllama:{config}:{dim}"
        self._config = config
        self._weights: LazyModel[Any] = LazyModel(self._load)

    def _load(self) -> Any:
        # wordllama calls logging.basicConfig(level=INFO) on import, which would make the
        # host application's root logger chatty; undo that side effect.
        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError as exc:  # pragma: no cover - a core dependency
            raise BackendError("wordllama is not installed: pip install wordllama") from exc
        finally:
            root.setLevel(level)
            for h in [h for h in root.handlers if h not in handlers]:
                root.removeHandler(h)
        try:
            return WordLlama.load(
                config=self._config,
                cache_dir=Path(wordllama.__file__).parent,
                disable_download=True,
                dim=256,
                trunc_dim=self.dim if self.dim < 256 else None,
            )
        except Exception as exc:
            raise BackendError(f"cannot load wordllama weights offline: {exc}") from exc

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        return np.asarray(self._weights.get().embed(list(texts), norm=False), dtype=np.float32)
