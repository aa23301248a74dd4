"""Issue 16: expansion from the best hits' words, and readable text for the best memories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory
from lightmem.config import parse_config
from lightmem.errors import ConfigError

_TURNS = [
    ("Ana", "My sister Priya moved to Lisbon last spring."),
    ("Ben", "My sister and I live for weekend football."),
    ("Ana", "Priya sends me postcards with azulejo tiles."),
    ("Ben", "Do you live near your sister these days?"),
    ("Ben", "My sister wants to live by the sea one day."),
    ("Ana", "The weather was grey all week."),
    ("Ben", "I bought a new bike for the commute."),
    ("Ben", "My sister hates the city traffic."),
    ("Ben", "Which movie should my sister watch?"),
    ("Ben", "The city marathon is next month."),
    ("Ben", "My sister did move the sofa by herself."),
]


def _msgs() -> list[dict[str, Any]]:
    return [
        {"id": f"t{i}", "speaker_name": s, "content": c, "timestamp": "2024-03-02T09:00"}
        for i, (s, c) in enumerate(_TURNS)
    ]


def _ranked(tmp_path: Path, query: str, **retrieval: Any) -> list[str]:
    name = "-".join(f"{k}{v}" for k, v in sorted(retrieval.items()))
    cfg = {
        "store": {"path": str(tmp_path / f"{name}.db")},
        "retrieval": {"keep_first": 0, **retrieval},
        # each turn indexed alone, so only the expansion links the two Priya turns
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
    }
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(_msgs(), force_extract=True)
        return [r.source_ids[0] for r in mem.retrieve(query, limit=len(_TURNS))]


def test_expansion_brings_up_memories_sharing_the_best_hits_rare_words(tmp_path: Path) -> None:
    # "Priya" is in the best hit for Lisbon, not in the query: the postcard turn shares it
    plain = _ranked(tmp_path, "Who moved to Lisbon?", expand_weight=0.0)
    grown = _ranked(tmp_path, "Who moved to Lisbon?", expand_weight=0.5, expand_hits=1)
    assert plain[0] == grown[0] == "t0"
    assert grown.index("t2") < plain.index("t2")
    assert grown.index("t2") == 2
    # the best plain hits keep their place ahead of the expansion
    kept = _ranked(tmp_path, "Who moved to Lisbon?", expand_weight=0.5, keep_first=3)
    assert kept[:3] == plain[:3]


def test_best_memories_show_readable_sentences_the_rest_stored_text(tmp_path: Path) -> None:
    def shown(budget: int | None, share: float = 0.5, first: int = 1) -> list[str]:
        cfg = {
            "store": {"path": str(tmp_path / f"r{budget}-{share}-{first}.db")},
            "retrieval": {"readable_first": first, "readable_share": share, "keep_first": 0},
            "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        }
        with LightMemory.from_config(cfg) as mem:
            mem.add_memory(_msgs(), force_extract=True)
            got = mem.retrieve("Who moved to Lisbon?", limit=3, budget_tokens=budget)
            return [r.text for r in got]

    whole = "My sister Priya moved to Lisbon last spring."
    first, second, _ = shown(200)
    assert first == whole
    assert second == _TURNS[10][1] or len(second.split()) < 5  # the rest: stored text
    assert whole not in shown(200, share=0.01)  # what it adds must fit its share
    assert whole not in shown(None)  # no budget: memories as stored
    # only memories that hold a query word ("move"): the third is shown as stored
    assert shown(200, share=1.0, first=3) == [whole, _TURNS[10][1], "near sister days"]


def test_expansion_and_readable_options_are_validated() -> None:
    s = parse_config({"retrieval": {"expand_weight": 0.25, "expand_hits": 2, "readable_first": 4}})
    r = s.retrieve
    assert (r.expand_weight, r.expand_hits, r.readable_first) == (0.25, 2, 4)
    with pytest.raises(ConfigError, match=r"retrieval\.expand_weight"):
        parse_config({"retrieval": {"expand_weight": -1}})
    with pytest.raises(ConfigError, match=r"retrieval\.readable_first"):
        parse_config({"retrieval": {"readable_first": -1}})


def test_expansion_only_from_hits_holding_a_query_word(tmp_path: Path) -> None:
    # no memory holds "relocated" or "Portugal": the best hits are guesses by meaning,
    # whose words would pull in more of their own topic
    query = "Who relocated to Portugal?"
    assert _ranked(tmp_path, query, expand_weight=1.0) == _ranked(
        tmp_path, query, expand_weight=0.0
    )
