"""A BERT sentence encoder (sentence-transformers layout: BERT, mean pooling) as a numpy
forward pass: no torch, no onnxruntime. Reads a model folder's ``config.json``,
``model.safetensors`` and ``tokenizer.json`` (``safetensors`` and ``tokenizers`` are
wordllama's dependencies, so already installed)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.errors import BackendError

F32 = npt.NDArray[np.float32]
_FILES = ("config.json", "model.safetensors", "tokenizer.json")


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
        tok.enable_padding(pad_id=int(cfg.get("pad_token_id", 0)))
        self.tokenizer = tok

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

    def encode(self, texts: Sequence[str]) -> F32:
        """One mean-pooled row per text (padding excluded), float32."""
        enc = self.tokenizer.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in enc], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in enc], dtype=np.float32)
        length = ids.shape[1]
        x = self.words[ids] + self.positions[:length] + self.token_type
        x = self._norm(x, self.ln0)
        # Padded keys get a large negative score, so softmax gives them no weight.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self.layers:
            x = self._block(x, layer, bias)
        summed: F32 = np.einsum("nld,nl->nd", x, mask)
        count: F32 = np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
        return np.asarray(summed / count, dtype=np.float32)

    def _block(self, x: F32, ly: _Layer, bias: F32) -> F32:
        n, length, d = x.shape
        h, hd = self.heads, d // self.heads
        qkv = (x.reshape(-1, d) @ ly.qkv + ly.qkv_b).reshape(n, length, 3, h, hd)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / math.sqrt(hd)) + bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(-1, d)
        a = self._norm(ctx @ ly.out + ly.out_b + x.reshape(-1, d), ly.ln1)
        up = _gelu(a @ ly.up + ly.up_b)
        return self._norm(up @ ly.down + ly.down_b + a, ly.ln2).reshape(n, length, d)

    def _norm(self, x: F32, wb: tuple[F32, F32]) -> F32:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        out = (x - mean) / np.sqrt(var + np.float32(self.eps)) * wb[0] + wb[1]
        return np.asarray(out, dtype=np.float32)


def _gelu(x: F32) -> F32:
    """BERT's exact GELU, x * Phi(x), with erf from Abramowitz & Stegun 7.1.26 (absolute
    error under 1.5e-7, below float32 resolution of the activations)."""
    z = np.abs(x) * np.float32(1.0 / math.sqrt(2.0))
    t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * z)
    poly = t * (
        np.float32(0.254829592)
        + t
        * (
            np.float32(-0.284496736)
            + t
            * (
                np.float32(1.421413741)
                + t * (np.float32(-1.453152027) + t * np.float32(1.061405429))
            )
        )
    )
    erf = np.float32(1.0) - poly * np.exp(-z * z)
    return np.asarray(np.float32(0.5) * x * (np.float32(1.0) + np.sign(x) * erf), np.float32)
