"""LLMLingua-2 runs a model on every message: its calls are accounted in the memory's
ledger like the embedder's and the LLM's. The real package needs hub downloads, so a
stand-in ``llmlingua`` module (the interface lightmem calls) plays the model here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import stand_in_llmlingua
from lightmem import BackendError, LightMemory


class _PromptCompressor:
    """What ``llmlingua.PromptCompressor`` offers lightmem: keep every other word."""

    def __init__(self, model_name: str, device_map: str, use_llmlingua2: bool) -> None:
        assert use_llmlingua2 and Path(model_name).is_dir()

    def compress_prompt(self, text: str, rate: float, force_tokens: list[str]) -> dict[str, Any]:
        if "explode" in text:
            raise RuntimeError("model failure")
        return {"compressed_prompt": " ".join(text.split()[::2])}


@pytest.fixture
def llmlingua(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return stand_in_llmlingua(monkeypatch, tmp_path, _PromptCompressor)


def test_every_compression_is_a_call_in_the_memorys_ledger(llmlingua: Path, tmp_path: Path) -> None:
    config = {
        "store": {"path": str(tmp_path / "m.db")},
        "pre_compress": True,
        "pre_compressor": {
            "model_name": "llmlingua-2",
            "configs": {"llmlingua_config": {"model_name": str(llmlingua)}},
        },
    }
    with LightMemory.from_config(config) as mem:
        turns = [
            {"id": "t1", "content": "My left knee hurt after my last long run."},
            {"id": "t2", "content": "So I want flat routes for a while."},
        ]
        mem.add_memory(turns, force_extract=True)
        usage = {r.op: r for r in mem.ledger.totals() if r.kind == "compress"}
        assert usage["llmlingua-2"].calls == 2 and usage["llmlingua-2"].items == 2
        assert usage["llmlingua-2"].prompt_tokens > 0
        assert usage["llmlingua-2.estimated"].calls == 2  # token counts are estimates
        with pytest.raises(BackendError, match="LLMLingua-2"):
            mem.add_memory([{"id": "t3", "content": "this will explode"}])
        failed = {r.op: r for r in mem.ledger.totals() if r.kind == "compress"}["llmlingua-2"]
        assert failed.calls == 3 and failed.errors == 1
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as again:
        saved = {(r.kind, r.op) for r in again.store.usage()}
        assert ("compress", "llmlingua-2") in saved  # persisted with the rest of the usage


def test_a_compressor_given_with_a_ledger_of_its_own_is_saved_too(
    llmlingua: Path, tmp_path: Path
) -> None:
    """Every backend that accounts model calls is saved, not only what ``from_config``
    wired to the embedder's ledger."""
    from lightmem.embed.wordllama import WordLlamaEmbedder
    from lightmem.pipeline.compress import LLMLingua2Compressor
    from lightmem.store.sqlite import SQLiteStore

    compressor = LLMLingua2Compressor(str(llmlingua))  # its own ledger
    store = SQLiteStore(tmp_path / "m.db")
    with LightMemory(store, WordLlamaEmbedder(), compressor=compressor) as mem:
        mem.add_memory([{"id": "t1", "content": "My knee hurt after the run."}], force_extract=True)
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as again:
        assert ("compress", "llmlingua-2") in {(r.kind, r.op) for r in again.store.usage()}
