"""A BERT sentence encoder (sentence-transformers layout: BERT, mean pooling) as a numpy
forward pass: no torch, no onnxruntime. Reads a model folder's ``config.json``,
``model.safetensors`` and ``tokenizer.json`` (``safetensors`` and ``tokenizers`` are
wordllama's dependencies, so already installed)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.errors import BackendError

__all__ = ["F32", "GROUP", "ROWS", "BertEncoder"]

F32 = npt.NDArray[np.float32]
_FILES = ("config.json", "model.safetensors", "tokenizer.json")
#: Texts run through the network together (sorted by token length first).
GROUP = 16
#: Rows of the feed-forward part computed together (its activations then fit in cache).
ROWS = 128


@dataclass(frozen=True, slots=True)
class _Layer:
    qkv: F32  # (hidden, 3 * hidden): query, key and value projections side by side
    qkv_b: F32
    out: F32
    out_b: F32
    ln1: tuple[F32, F32]
    up: F32
    up_b: F32
    down: F32
    down_b: F32
    ln2: tuple[F32, F32]


class BertEncoder:
    """Token ids -> mean-pooled last hidden states (not normalised), batch by batch."""

    def __init__(self, folder: Path, max_tokens: int) -> None:
        missing = [f for f in _FILES if not (folder / f).is_file()]
        if missing:
            raise BackendError(f"model folder {str(folder)!r} lacks {', '.join(missing)}")
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - wordllama's own dependencies
            raise BackendError(f"the BERT encoder needs safetensors and tokenizers: {exc}") from exc
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
            raise BackendError(f"{folder}/config.json: not a BERT model with GELU activations")
        self.hidden = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.max_tokens = min(max_tokens, int(cfg["max_position_embeddings"]))
        w = load_file(str(folder / "model.safetensors"))
        w = {k.removeprefix("bert."): v for k, v in w.items()}

        def get(name: str) -> F32:
            return np.ascontiguousarray(w[name], dtype=np.float32)

        self.words = get("embeddings.word_embeddings.weight")
        self.positions = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")[0]
        self.ln0 = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers = [
            self._layer(get, f"encoder.layer.{i}.") for i in range(cfg["num_hidden_layers"])
        ]
        tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tok.enable_truncation(max_length=self.max_tokens)
        tok.no_padding()  # padded here, per group
        self.tokenizer = tok
        self.pad_id = int(cfg.get("pad_token_id", 0))

    @staticmethod
    def _layer(get: Any, p: str) -> _Layer:
        att = p + "attention."
        qkv = [get(f"{att}self.{n}.weight").T for n in ("query", "key", "value")]
        return _Layer(
            qkv=np.ascontiguousarray(np.concatenate(qkv, axis=1)),
            qkv_b=np.concatenate([get(f"{att}self.{n}.bias") for n in ("query", "key", "value")]),
            out=np.ascontiguousarray(get(f"{att}output.dense.weight").T),
            out_b=get(f"{att}output.dense.bias"),
            ln1=(get(f"{att}output.LayerNorm.weight"), get(f"{att}output.LayerNorm.bias")),
            up=np.ascontiguousarray(get(f"{p}intermediate.dense.weight").T),
            up_b=get(f"{p}intermediate.dense.bias"),
            down=np.ascontiguousarray(get(f"{p}output.dense.weight").T),
            down_b=get(f"{p}output.dense.bias"),
            ln2=(get(f"{p}output.LayerNorm.weight"), get(f"{p}output.LayerNorm.bias")),
        )

    def encode(self, texts: Sequence[str], *, workers: int = 1) -> F32:
        """One mean-pooled row per text (padding excluded), float32."""
        sums, counts = self.encode_sums(texts, workers=workers)
        return np.asarray(sums / np.maximum(counts, 1)[:, None], dtype=np.float32)

    def encode_sums(
        self, texts: Sequence[str], *, workers: int = 1
    ) -> tuple[F32, npt.NDArray[np.int64]]:
        """Per text, the sum of its last hidden states and its number of tokens (special
        tokens included, as mean pooling counts them). Texts run in groups of
        :data:`GROUP` of similar token length, so little is spent on padding; with
        ``workers`` > 1 the groups are shared among that many threads (numpy releases the
        GIL in its loops and BLAS calls, so each thread keeps a core busy)."""
        enc = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        sums = np.zeros((len(enc), self.hidden), dtype=np.float32)
        counts = np.asarray([len(ids) for ids in enc], dtype=np.int64)
        order = sorted(range(len(enc)), key=counts.__getitem__)
        # At most GROUP texts a group, and with several workers at least two groups each when
        # there are as many texts, so a small batch (a session's turns, shortest first)
        # still keeps every worker busy to its end.
        size = max(1, min(GROUP, -(-len(order) // (2 * workers if workers > 1 else 1))))
        groups = [order[s : s + size] for s in range(0, len(order), size)]

        def run(group: list[int]) -> None:
            length = max(len(enc[i]) for i in group)
            ids = np.full((len(group), length), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(group), length), dtype=np.float32)
            for row, i in enumerate(group):
                ids[row, : len(enc[i])] = enc[i]
                mask[row, : len(enc[i])] = 1.0
            sums[group] = self._summed(ids, mask)

        if workers > 1 and len(groups) > 1:
            with ThreadPoolExecutor(max_workers=min(workers, len(groups))) as pool:
                list(pool.map(run, groups))  # list(): re-raises a worker's exception
        else:
            for group in groups:
                run(group)
        return sums, counts

    def _summed(self, ids: npt.NDArray[np.int64], mask: F32) -> F32:
        x = self.words[ids] + self.positions[: ids.shape[1]] + self.token_type
        x = self._norm(x, self.ln0)
        # Padded keys get a large negative score, so softmax gives them no weight.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self.layers:
            x = self._block(x, layer, bias)
        summed: F32 = np.einsum("nld,nl->nd", x, mask)
        return summed

    def _block(self, x: F32, ly: _Layer, bias: F32) -> F32:
        n, length, d = x.shape
        h, hd = self.heads, d // self.heads
        flat = x.reshape(-1, d)
        qkv = flat @ ly.qkv
        qkv += ly.qkv_b
        # (3, n, heads, length, head_dim); the per-head products as stacked matmuls (BLAS
        # per head: a fraction of the CPU time of einsum's own loops).
        q, k, v = np.ascontiguousarray(qkv.reshape(n, length, 3, h, hd).transpose(2, 0, 3, 1, 4))
        q *= np.float32(1.0 / math.sqrt(hd))
        scores = q @ k.transpose(0, 1, 3, 2)
        scores += bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(-1, d)
        a = ctx @ ly.out
        a += ly.out_b
        a += flat
        a = self._norm(a, ly.ln1)
        # The feed-forward part in blocks of rows, so its 4x wider activations stay in cache.
        out = np.empty_like(a)
        for s in range(0, len(a), ROWS):
            rows = a[s : s + ROWS]
            up = rows @ ly.up
            up += ly.up_b
            down = _gelu(up) @ ly.down
            down += ly.down_b
            down += rows
            out[s : s + ROWS] = down
        return self._norm(out, ly.ln2).reshape(n, length, d)

    def _norm(self, x: F32, wb: tuple[F32, F32]) -> F32:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        out = (x - mean) / np.sqrt(var + np.float32(self.eps)) * wb[0] + wb[1]
        return np.asarray(out, dtype=np.float32)


def _gelu(x: F32) -> F32:
    """BERT's exact GELU, x * Phi(x), in place, with erf from Abramowitz & Stegun 7.1.26
    (absolute error under 1.5e-7, below float32 resolution of the activations). Written as
    (x + |x| * erf(|x| / sqrt 2)) / 2 = (x + |x| - |x| * poly) / 2, so no sign branch."""
    z = np.abs(x)
    t = z * np.float32(0.3275911 / math.sqrt(2.0))
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    e = np.square(z)
    e *= np.float32(-0.5)
    np.exp(e, out=e)
    poly *= e  # 1 - erf(|x| / sqrt 2)
    poly *= z
    x += z
    x -= poly
    x *= np.float32(0.5)
    return x
