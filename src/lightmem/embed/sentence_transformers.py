"""sentence-transformers from a local folder (the published ``huggingface`` embedder)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder
from lightmem.errors import BackendError, ConfigError
from lightmem.ledger import Ledger

__all__ = ["SentenceTransformerEmbedder"]


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model loaded from ``model_path`` (never downloaded).

    Needs the ``huggingface`` extra (``pip install 'lightmem[huggingface]'``).
    """

    def __init__(
        self,
        model_path: str,
        *,
        embedding_dims: int | None = None,
        device: str = "cpu",
        ledger: Ledger | None = None,
    ) -> None:
        super().__init__(ledger)
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise ConfigError(
                f"text_embedder.configs.model: {model_path!r} is not a local folder; "
                "lightmem never downloads weights, so point it at a saved model"
            )
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise BackendError(
                "the huggingface embedder needs: pip install 'lightmem[huggingface]'"
            ) from exc
        self._model: Any = SentenceTransformer(str(path), device=device, local_files_only=True)
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = int(get_dim())
        if embedding_dims is not None and embedding_dims != dim:
            raise ConfigError(
                f"text_embedder.configs.embedding_dims: {embedding_dims} but the model "
                f"produces {dim}"
            )
        self.dim = dim
        self.name = f"sentence-transformers:{path.name}:{dim}"

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        return np.asarray(self._model.encode(list(texts), convert_to_numpy=True))
