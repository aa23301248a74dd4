"""Issue 11, item 1: the work one text or one request causes is bounded, whatever its size.

The full-size figures (7 x 1,000,000 characters over REST, peak RSS) come from
``lightmem bench rss``; these tests check the bounds themselves, quickly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from lightmem import BackendError, LightMemory, SQLiteStore, WordLlamaEmbedder
from lightmem.embed.base import (
    EMBED_BATCH_CHARS,
    EMBED_BATCH_ITEMS,
    EMBED_CHUNK_CHARS,
    EMBED_MAX_CHUNKS,
    Embedder,
    windows,
)


class Recording(Embedder):
    """Bag-of-letters vectors; records every batch the backend is given."""

    name = "recording"
    dim = 26

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        self.batches.append(list(texts))
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out + 1e-3


def test_every_backend_call_is_bounded_whatever_the_text_lengths() -> None:
    e = Recording()
    texts = ["x" * 1_000_000] * 7 + ["a" * 50_000] + [f"short {i}" for i in range(63)]
    out = e.embed(texts)
    assert out.shape == (71, 26)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    for batch in e.batches:
        longest = max(len(t) for t in batch)
        assert longest <= EMBED_CHUNK_CHARS
        assert len(batch) <= EMBED_BATCH_ITEMS and len(batch) * longest <= EMBED_BATCH_CHARS
    sent = sum(len(b) for b in e.batches)
    assert sent <= 7 * EMBED_MAX_CHUNKS + EMBED_MAX_CHUNKS + 63


def test_long_text_is_the_mean_of_windows_spread_over_all_of_it() -> None:
    text = "a" * 30_000 + "z" * 30_000
    parts = windows(text)
    assert len(parts) == EMBED_MAX_CHUNKS and all(len(p) == EMBED_CHUNK_CHARS for p in parts)
    assert parts[0].startswith("a") and parts[-1].endswith("z")  # both ends represented
    e = Recording()
    vec = e.embed([text])[0]
    assert vec[0] > 0.5 and vec[25] > 0.5  # neither half is truncated away
    short = windows("b" * 3 * EMBED_CHUNK_CHARS)
    assert "".join(short) == "b" * 3 * EMBED_CHUNK_CHARS  # consecutive when few enough


def _huge(marker: str, chars: int) -> str:
    words = [marker] + ["piano garden river lamp"] * (chars // 24)
    return " ".join(words)[:chars]


def test_a_long_message_among_short_ones_is_stored_and_retrievable(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [{"id": "big", "content": _huge("zqbigmark", 120_000)}]
    messages += [{"id": f"s{i}", "content": f"short note {i} about tea"} for i in range(63)]
    with LightMemory.from_config({"store": {"path": str(tmp_path / "b.db")}}) as mem:
        mem.add_memory(messages, force_extract=True)
        hits = mem.retrieve("zqbigmark")
        assert any("big" in r.entry.source_ids for r in hits)
        calls = mem.stats()["usage"]["by_operation"]
        assert sum(r["calls"] for r in calls if r["kind"] == "embed") >= 1


class _Failing:
    name = "offline"

    def extract(self, segments: Sequence[Any], new_id: Any) -> list[Any]:
        raise BackendError("extraction interrupted")


def test_a_store_left_mid_pipeline_with_huge_messages_recovers(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    big = [{"id": f"b{i}", "content": _huge(f"zqr{i}mark", 100_000)} for i in range(2)]
    with (
        LightMemory(SQLiteStore(path), WordLlamaEmbedder(), memory_manager=_Failing()) as mem,
        pytest.raises(BackendError, match="interrupted"),
    ):
        mem.add_memory(big, force_extract=True)
    with LightMemory.from_config({"store": {"path": path}}) as mem:
        assert mem.stats()["messages_segmented"] + mem.stats()["messages_pending"] == 2
        mem.flush()
        assert mem.stats()["messages_segmented"] + mem.stats()["messages_pending"] == 0
        for i in range(2):
            assert any(f"b{i}" in r.entry.source_ids for r in mem.retrieve(f"zqr{i}mark"))
