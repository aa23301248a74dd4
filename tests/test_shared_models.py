"""A server loads each model once for all its tenants: the LLMLingua-2 pre-compressor like
the embedder. The real llmlingua package needs hub downloads, so a stand-in module (the
interface lightmem calls) plays the model, counting its loads and its concurrent calls."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest

from conftest import stand_in_llmlingua
from lightmem import ConfigError, Ledger, LightMemory, config
from lightmem.config import Settings, SharedEmbedders, build_embedder
from lightmem.embed.base import Embedder
from lightmem.embed.wordllama import WordLlamaEmbedder
from lightmem.pipeline.compress import LLMLingua2Compressor
from lightmem.server.tenancy import TenantPool


class _Model:
    """What ``llmlingua.PromptCompressor`` offers lightmem: keep every other word. Each
    instance is one load; ``busy`` counts the calls running at this moment."""

    loads: ClassVar[list[_Model]] = []
    most_at_once: ClassVar[int] = 0

    def __init__(self, model_name: str, device_map: str, use_llmlingua2: bool) -> None:
        assert use_llmlingua2 and Path(model_name).is_dir()
        self.busy = 0
        self._count = threading.Lock()
        _Model.loads.append(self)

    def compress_prompt(self, text: str, rate: float, force_tokens: list[str]) -> dict[str, Any]:
        with self._count:
            self.busy += 1
            _Model.most_at_once = max(_Model.most_at_once, self.busy)
        time.sleep(0.05)  # long enough for a second caller to arrive
        with self._count:
            self.busy -= 1
        return {"compressed_prompt": " ".join(text.split()[::2])}


@pytest.fixture
def model_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(_Model, "loads", [])
    monkeypatch.setattr(_Model, "most_at_once", 0)
    return stand_in_llmlingua(monkeypatch, tmp_path, _Model)


def _config(model_dir: Path) -> dict[str, Any]:
    return {
        "pre_compressor": {
            "model_name": "llmlingua-2",
            "configs": {"llmlingua_config": {"model_name": str(model_dir)}},
        }
    }


def _calls(ledger: Ledger) -> int:
    return sum(r.calls for r in ledger.totals() if (r.kind, r.op) == ("compress", "llmlingua-2"))


def test_tenants_share_one_llmlingua_model_and_account_apart(
    model_dir: Path, tmp_path: Path
) -> None:
    """Finding 2 (second review): three tenants load LLMLingua-2 once, not three times, and
    each tenant's compressions are accounted in that tenant's ledger only."""
    pool = TenantPool(tmp_path / "data", _config(model_dir))
    try:
        a, b, c = (pool.get(name) for name in ("a", "b", "c"))
        assert len(_Model.loads) == 1
        a.memory.add_memory([{"id": "t1", "content": "My left knee hurt after the run."}])
        b.memory.add_memory(
            [
                {"id": "t1", "content": "I moved to Lisbon in May."},
                {"id": "t2", "content": "The flat has a view of the river."},
            ]
        )
        assert [_calls(t.memory.ledger) for t in (a, b, c)] == [1, 2, 0]
        assert len(_Model.loads) == 1
    finally:
        pool.close()


def test_tenants_never_run_the_shared_model_at_once(model_dir: Path, tmp_path: Path) -> None:
    """The shared model is called by one tenant at a time (its tokenizer is not safe for
    concurrent use), though the tenants themselves write concurrently."""
    pool = TenantPool(tmp_path / "data", _config(model_dir))
    try:
        tenants = [pool.get(f"t{i}") for i in range(4)]
        start = threading.Barrier(len(tenants))

        def add(i: int) -> None:
            start.wait()
            tenants[i].memory.add_memory([{"id": "m", "content": f"Tenant {i} likes tea."}])

        with ThreadPoolExecutor(len(tenants)) as ex:
            list(ex.map(add, range(len(tenants))))
        assert [_calls(t.memory.ledger) for t in tenants] == [1, 1, 1, 1]
        assert _Model.most_at_once == 1
    finally:
        pool.close()


def test_a_given_compressor_must_agree_with_the_config(model_dir: Path, tmp_path: Path) -> None:
    """A loaded compressor passed to from_config is used in the memory's ledger; a config
    selecting another kind is refused rather than one of the two being ignored."""
    shared = LLMLingua2Compressor(str(model_dir))
    store = {"store": {"path": str(tmp_path / "m.db")}}
    with LightMemory.from_config(store, compressor=shared) as mem:
        mem.add_memory([{"id": "t1", "content": "I adopted a cat named Miso."}])
        assert _calls(mem.ledger) == 1 and _calls(shared.ledger) == 0
    with pytest.raises(ConfigError, match=r"pre_compressor: the config selects 'off'"):
        LightMemory.from_config({**store, "pre_compress": False}, compressor=shared)
    assert len(_Model.loads) == 1


def test_a_tenant_reembedded_on_its_own_opens_with_its_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's tenants share the configured embedder, but one tenant's store moved to
    another (``lightmem re-embed`` on its file) opens with that one; it used to be refused
    as built with another embedder. One model is built per embedder setting."""
    data = tmp_path / "data"
    pool = TenantPool(data)
    try:
        for name in ("a", "b"):
            pool.get(name).memory.add_memory(
                [{"content": f"Tenant {name} keeps bees on the roof."}], force_extract=True
            )
    finally:
        pool.close()
    with LightMemory.from_config({"store": {"path": str(data / "tenants" / "a.db")}}) as mem:
        mem.store.reembed(WordLlamaEmbedder(128))
    built: list[str] = []

    def build(s: Settings, ledger: Ledger) -> Embedder:
        built.append(f"{s.embedder}:{s.embedding_dims}")
        return build_embedder(s, ledger)

    monkeypatch.setattr(config, "build_embedder", build)
    pool = TenantPool(data)
    try:
        a, b, c = (pool.get(name) for name in ("a", "b", "c"))
        assert a.memory.embedder.name == "wordllama:l2_supercat:128"
        assert b.memory.embedder.name == c.memory.embedder.name == WordLlamaEmbedder().name
        assert any("was built with wordllama:l2_supercat:128" in n for n in a.memory.settings.notes)
        for t in (a, b):
            found = t.memory.retrieve("bees", limit=1)
            assert f"Tenant {t.name}" in found[0].entry.original_text
            assert t.agent.embedder.name == t.memory.embedder.name
        # one embedder built per setting, shared by its tenants, each with its own ledger
        assert sorted(built) == ["wordllama:128", "wordllama:None"], built
        assert len({id(t.memory.ledger) for t in (a, b, c)}) == 3
        assert [r.op for r in c.memory.ledger.totals()] == []
    finally:
        pool.close()


def test_an_embedder_and_a_builder_of_embedders_are_not_both_taken(tmp_path: Path) -> None:
    store = {"store": {"path": str(tmp_path / "m.db")}}
    with pytest.raises(ConfigError, match=r"^text_embedder: given both as a builder"):
        LightMemory.from_config(store, embedder=WordLlamaEmbedder(), embedders=SharedEmbedders())
    assert not (tmp_path / "m.db").exists()
