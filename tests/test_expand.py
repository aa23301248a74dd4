"""Issue 16: expansion from the best hits' words, and readable text for the best memories."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import Entries
from lightmem import LightMemory
from lightmem.config import parse_config
from lightmem.embed.wordllama import WordLlamaEmbedder
from lightmem.errors import ConfigError
from lightmem.pipeline import neighbours
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.context_format import format_context
from lightmem.pipeline.neighbours import NearWords
from lightmem.pipeline.packing import Packer
from lightmem.pipeline.retrieve_params import RetrieveParams
from lightmem.text import MEANING_STOPWORDS, estimate_tokens
from lightmem.types import MemoryEntry, Scope

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
        # (and no memory passes others for holding a name: the expansion is what is measured)
        "retrieval": {"keep_first": 0, "answer_reach": 0, **retrieval},
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


def _readable_shown(
    tmp_path: Path,
    budget: int | None,
    share: float = 0.5,
    first: int = 1,
    text: str = "sentences",
    **cfg: Any,
) -> list[str]:
    config = {
        "store": {"path": str(tmp_path / f"r{budget}-{share}-{first}-{text}-{len(cfg)}.db")},
        "retrieval": {
            "readable_first": first,
            "readable_share": share,
            "readable_text": text,
            "keep_first": 0,
            "answer_reach": 0,
        },
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        **cfg,
    }
    with LightMemory.from_config(config) as mem:
        mem.add_memory(_msgs(), force_extract=True)
        got = mem.retrieve("Who moved to Lisbon?", limit=3, budget_tokens=budget)
        return [r.text for r in got]


def test_best_memories_show_readable_sentences_the_rest_stored_text(tmp_path: Path) -> None:
    def shown(budget: int | None, share: float = 0.5, first: int = 1) -> list[str]:
        return _readable_shown(tmp_path, budget, share, first)

    whole = "My sister Priya moved to Lisbon last spring."
    first, second, _ = shown(200)
    assert first == whole
    assert second == "sister move sofa"  # the rest: stored text
    assert whole not in shown(200, share=0.01)  # what it adds must fit its share
    assert whole not in shown(None)  # no budget: memories as stored
    # only memories that hold a query word ("move"): the third is shown as stored
    assert shown(200, share=1.0, first=3) == [whole, _TURNS[10][1], "near sister days"]


def test_best_memories_show_every_word_but_stopwords(tmp_path: Path) -> None:
    words = "sister Priya moved Lisbon last spring"  # the turn without "My", "to"

    def shown(budget: int | None, share: float = 0.5, first: int = 1, **cfg: Any) -> list[str]:
        return _readable_shown(tmp_path, budget, share, first, "words", **cfg)

    first, second, _ = shown(200)
    assert first == words
    assert second == "sister move sofa"  # the rest: stored text
    assert words not in shown(200, share=0.01)  # what it adds must fit its share
    assert words not in shown(None)  # no budget: memories as stored
    # no query word needed (the third turn's stored text is "near sister days"); the
    # second's words are its stored text already ("did", "by", "herself" are stopwords)
    assert shown(200, share=1.0, first=3) == [words, "sister move sofa", "live near sister days"]
    # stored text that holds every word (no pre-compression, or an LLM-written fact)
    # is never replaced by a shorter one
    assert shown(200, pre_compress=False)[0] == "My sister Priya moved to Lisbon last spring."


def test_readable_words_keep_the_stopwords_that_say_something(tmp_path: Path) -> None:
    turn = "Honestly I gave up smoking only after the move to Lisbon."
    cut = EntropyCompressor(1.0).cut
    assert cut(turn) == "Honestly gave smoking move Lisbon"
    assert cut(turn, MEANING_STOPWORDS) == "Honestly gave up smoking only after move Lisbon"
    cfg = {
        "store": {"path": str(tmp_path / "m.db")},
        "retrieval": {"readable_first": 1, "readable_share": 1.0, "keep_first": 0},
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
    }
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(
            {"speaker_name": "Ana", "content": turn, "timestamp": "2024-03-02T09:00"},
            force_extract=True,
        )
        (hit,) = mem.retrieve("When did Ana quit smoking?", limit=5, budget_tokens=100)
    assert hit.text == "Honestly gave up smoking only after move Lisbon"


def test_expansion_and_readable_options_are_validated() -> None:
    s = parse_config({"retrieval": {"expand_weight": 0.25, "expand_hits": 2, "readable_first": 4}})
    r = s.retrieve
    assert (r.expand_weight, r.expand_hits, r.readable_first) == (0.25, 2, 4)
    with pytest.raises(ConfigError, match=r"retrieval\.expand_weight"):
        parse_config({"retrieval": {"expand_weight": -1}})
    with pytest.raises(ConfigError, match=r"retrieval\.readable_first"):
        parse_config({"retrieval": {"readable_first": -1}})
    assert parse_config({}).retrieve.readable_text == "words"
    with pytest.raises(ConfigError, match=r"retrieval\.readable_text"):
        parse_config({"retrieval": {"readable_text": "all"}})


def test_expansion_only_from_hits_holding_a_query_word(tmp_path: Path) -> None:
    # no memory holds "relocated" or "Portugal": the best hits are guesses by meaning,
    # whose words would pull in more of their own topic
    query = "Who relocated to Portugal?"
    assert _ranked(tmp_path, query, expand_weight=1.0) == _ranked(
        tmp_path, query, expand_weight=0.0
    )


def _tail_shown(tmp_path: Path, budget: int | None, **retrieval: Any) -> list[str]:
    cfg = {
        "store": {"path": str(tmp_path / f"t{budget}-{sorted(retrieval.items())}.db")},
        "retrieval": {"readable_first": 0, "keep_first": 0, **retrieval},
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        "pre_compress": False,  # stored text = the turn, so the cut is easy to see
    }
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(_msgs(), force_extract=True)
        limit = 8 if budget is None else 20
        return [r.text for r in mem.retrieve("my sister", limit=limit, budget_tokens=budget)]


def test_memories_past_tail_after_show_their_rarest_words(tmp_path: Path) -> None:
    full = _tail_shown(tmp_path, 60, tail_rate=1.0)
    cut = _tail_shown(tmp_path, 60, tail_after=2, tail_rate=0.4)
    assert len(full) < len(_TURNS)  # the budget cannot hold every memory as stored
    assert cut[:2] == full[:2]  # the first two as stored
    tail = EntropyCompressor(0.4)  # the rest: their rarest words, names always
    stored = [c for _, c in _TURNS if c not in cut[:2]]
    assert set(cut[2:]) <= {tail.cut(c) for c in stored}
    assert len(cut) > len(full)  # so more of them fit
    # no budget: memories as stored
    plain = _tail_shown(tmp_path, None, tail_after=2, tail_rate=0.4)
    assert len(plain) == 8 and set(plain) <= {c for _, c in _TURNS}


def test_a_budget_that_holds_every_memory_cuts_none(tmp_path: Path) -> None:
    whole = _tail_shown(tmp_path, 2000, tail_after=2, tail_rate=0.4)
    assert sorted(whole) == sorted(c for _, c in _TURNS)


def test_cutting_keywords_keeps_names_anywhere_and_words_besides_the_forced_ones() -> None:
    tail = EntropyCompressor(0.4)
    # already compressed: "Silver" is the first word left, not a sentence start
    assert tail.cut("Silver Lake grew knew fast") == "Silver Lake grew fast"
    # numbers, quantities and negations do not use up the share of the other words
    assert tail.cut("10 days fencing no") == "10 days fencing no"
    # two other words at least, whatever the rate
    assert EntropyCompressor(0.2).cut("stopped pottery chess") == "pottery chess"
    assert tail.cut("") == ""


def test_tail_options_are_validated() -> None:
    r = parse_config({"retrieval": {"tail_after": 3, "tail_rate": 0.5}}).retrieve
    assert (r.tail_after, r.tail_rate) == (3, 0.5)
    assert parse_config({}).retrieve.tail_rate < 1.0  # on by default
    with pytest.raises(ConfigError, match=r"retrieval\.tail_rate"):
        parse_config({"retrieval": {"tail_rate": 0}})
    with pytest.raises(ConfigError, match=r"retrieval\.tail_after"):
        parse_config({"retrieval": {"tail_after": -1}})


def test_a_miss_before_the_tail_begins_cuts_nothing(tmp_path: Path) -> None:
    # One long memory about the sister ranks first and never fits: cutting the tail would
    # not make room for it, so every other memory keeps its words.
    long_turn = "My sister " + " ".join(["talked about her sister and her new flat"] * 25)
    cfg = {
        "store": {"path": str(tmp_path / "miss.db")},
        "retrieval": {"readable_first": 0, "keep_first": 0, "tail_after": 5, "tail_rate": 0.4},
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        "pre_compress": False,
    }
    msgs = [*_msgs(), {"id": "long", "speaker_name": "Ben", "content": long_turn}]
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(msgs, force_extract=True)
        got = mem.retrieve("my sister", limit=20, budget_tokens=250)
    texts = {c for _, c in _TURNS}
    assert "long" not in {s for r in got for s in r.source_ids}
    assert len(got) == len(_TURNS) and {r.text for r in got} == texts


def test_cutting_keeps_numbers_whole_and_never_lengthens() -> None:
    tail = EntropyCompressor(0.2)
    out = tail.cut("Caroline's talk moved to 2023-06-09 at 3:30 pm, costing $1,250.50.")
    assert {"2023-06-09", "$1,250.50", "Caroline's"} <= set(out.split())
    assert tail.cut("ok") == "ok"  # nothing shorter to make
    assert tail.cut("卡罗琳 喜欢 陶艺") == "卡罗琳 喜欢 陶艺"  # not English: as it was


def test_a_cut_packing_holding_fewer_memories_is_not_used() -> None:
    # Cut, the long second memory fits and crowds out the short ones that fitted whole.
    when = datetime(2023, 6, 9, tzinfo=UTC)
    texts = {
        "a": "Priya Lisbon",
        "b": "Priya Lisbon Porto Faro Braga Evora Sintra Cascais garden pottery chess",
        **{k: "Mel Jon" for k in "cdef"},
    }
    entries = {
        k: MemoryEntry(
            id=k, text=t, original_text=t, scope=Scope(), timestamp=when, speaker_name="Ana"
        )
        for k, t in texts.items()
    }
    ranked = [(k, 1.0) for k in texts]
    packer = Packer(store=None)  # type: ignore[arg-type]  # (no event: never read)
    p = RetrieveParams(budget_tokens=23, limit=50, readable_first=0, tail_after=1, tail_rate=0.2)
    whole = packer.pack_once(ranked, replace(p, tail_rate=1.0), "zzz", Entries(entries))[0]  # type: ignore[arg-type]
    cut = packer.pack_once(ranked, p, "zzz", Entries(entries))[0]  # type: ignore[arg-type]
    assert len(cut) < len(whole)  # the case: cutting alone would lose memories
    packed = packer.pack(ranked, p, "zzz", Entries(entries))  # type: ignore[arg-type]
    assert [r.entry.id for r in packed] == [r.entry.id for r in whole]


_NEAR_TURNS = [
    ("Ana", "The weather was grey all week."),
    ("Ben", "Which instruments did the band use at the party?"),
    ("Ana", "My guitar strings broke again."),
    ("Ben", "I bought a new bike for the commute."),
    ("Ana", "I am reading a novel about sailors."),
    ("Ben", "My violin teacher moved away."),
]


def _near_ranked(tmp_path: Path, query: str, near_weight: float) -> list[str]:
    cfg = {
        "store": {"path": str(tmp_path / f"near{near_weight}.db")},
        # BM25 alone: no query word is in the guitar turn, so only its near words find it
        "retrieve_strategy": "context",
        "retrieval": {"keep_first": 0, "near_weight": near_weight},
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
    }
    msgs = [
        {"id": f"n{i}", "speaker_name": s, "content": c, "timestamp": "2024-03-02T09:00"}
        for i, (s, c) in enumerate(_NEAR_TURNS)
    ]
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(msgs, force_extract=True)
        return [r.source_ids[0] for r in mem.retrieve(query, limit=10)]


def test_near_words_bring_up_the_named_speakers_memories_of_the_kind_asked(
    tmp_path: Path,
) -> None:
    # "instruments" is near "guitar" (and "violin") in the embedder's space
    query = "Which instruments does Ana play?"
    plain = _near_ranked(tmp_path, query, 0.0)
    near = _near_ranked(tmp_path, query, 0.5)
    assert plain[0] == "n1" and near[0] == "n2"
    # searched among Ana's memories only: Ben's violin turn is not pulled in
    assert "n5" not in near


def test_near_words_come_from_the_store_and_follow_its_changes(tmp_path: Path) -> None:
    cfg = {
        "store": {"path": str(tmp_path / "vocab.db")},
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        "pre_compress": False,
    }
    near = NearWords(WordLlamaEmbedder(), recheck_s=0)  # every query looks for changes
    with LightMemory.from_config(cfg) as mem:
        turn = {"speaker_name": "Ana", "timestamp": "2024-03-02T09:00"}
        mem.add_memory([{**turn, "id": "a", "content": "My guitar strings broke."}])
        mem.flush()
        scope = Scope()
        words = near.near(mem.store, scope, "Which instruments does Ana play?", 5, 0.35)
        assert "guitar" in words
        assert not {"ana", "instruments"} & set(words)  # neither names nor its own words
        assert "drums" not in words  # only words the store holds
        mem.add_memory([{**turn, "id": "b", "content": "I practised the drums for hours."}])
        mem.flush()
        assert "drums" in near.near(mem.store, scope, "Which instruments?", 5, 0.35)
        # a speaker's name is never a near word, even a name that is a word near the query's
        rose = {"speaker_name": "Rose", "timestamp": "2024-03-03T09:00"}
        mem.add_memory([{**rose, "id": "c", "content": "Rose here, I weeded the garden."}])
        mem.flush()
        words = near.near(mem.store, scope, "Which flowers?", 5, 0.3)
        assert "garden" in words and "rose" not in words


def test_a_large_vocabulary_is_read_again_only_after_a_twentieth_changed(
    tmp_path: Path,
) -> None:
    cfg = {
        "store": {"path": str(tmp_path / "big.db")},
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        "pre_compress": False,
    }
    near = NearWords(WordLlamaEmbedder(), recheck_s=0)  # every query looks for changes

    def turn(i: int, text: str) -> dict[str, Any]:
        return {"id": f"b{i}", "speaker_name": "Ana", "content": text, "timestamp": "2024-03-02"}

    with LightMemory.from_config(cfg) as mem:
        mem.add_memory([turn(i, f"Meeting number {i} ran long.") for i in range(40)])
        mem.add_memory([turn(40, "My guitar strings broke.")], force_extract=True)

        def found() -> list[str]:
            return near.near(mem.store, Scope(), "Which instruments?", 5, 0.35)

        assert found() == ["guitar"]
        # one more entry among 41: reading them all again on every add would not scale
        mem.add_memory([turn(41, "I practised the drums.")], force_extract=True)
        assert found() == ["guitar"]
        mem.add_memory([turn(i, f"Lunch number {i}.") for i in range(42, 46)], force_extract=True)
        assert set(found()) == {"guitar", "drums"}


def test_near_word_options_are_validated() -> None:
    r = parse_config({"retrieval": {"near_weight": 0.25, "near_words": 3}}).retrieve
    assert (r.near_weight, r.near_words, r.near_similarity) == (0.25, 3, 0.35)
    assert parse_config({}).retrieve.near_weight > 0  # on by default
    with pytest.raises(ConfigError, match=r"retrieval\.near_weight"):
        parse_config({"retrieval": {"near_weight": -1}})
    with pytest.raises(ConfigError, match=r"retrieval\.near_words"):
        parse_config({"retrieval": {"near_words": 0}})


def test_near_words_are_not_looked_up_when_the_limit_keeps_only_the_head(tmp_path: Path) -> None:
    # limit <= keep_first returns the plain head: no vocabulary is read or embedded.
    msgs = [
        {"id": f"n{i}", "speaker_name": s, "content": c, "timestamp": "2024-03-02T09:00"}
        for i, (s, c) in enumerate(_NEAR_TURNS)
    ]
    with LightMemory.from_config({"store": {"path": str(tmp_path / "head.db")}}) as mem:
        mem.add_memory(msgs, force_extract=True)

        def ops() -> set[str]:
            return {u["op"] for u in mem.stats()["usage"]["by_operation"]}

        mem.retrieve("What instruments does Ana play?", limit=10)
        assert "vocabulary" not in ops()
        mem.retrieve("What instruments does Ana play?", limit=50)
        assert "vocabulary" in ops()


def test_a_vocabulary_keeps_the_scopes_most_frequent_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bounded memory whatever a tenant stores: the most frequent words only ("guitar",
    # said once, is left out of a vocabulary of 3 words; "violin", said thrice, is in).
    monkeypatch.setattr(neighbours, "_VOCABULARY", 3)
    texts = ["My violin lesson ran late."] * 3 + ["The lesson room was late again."] * 2
    texts.append("My guitar strings broke.")
    msgs = [
        {"id": f"v{i}", "speaker_name": "Ana", "content": t, "timestamp": "2024-03-02"}
        for i, t in enumerate(texts)
    ]
    cfg = {
        "store": {"path": str(tmp_path / "voc.db")},
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        "pre_compress": False,
    }
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(msgs, force_extract=True)
        found = NearWords(WordLlamaEmbedder(), recheck_s=0).near(
            mem.store, Scope(), "instruments", 5, 0.2
        )
    assert "violin" in found and "guitar" not in found


def test_a_vocabulary_is_checked_for_changes_at_most_every_recheck_s(tmp_path: Path) -> None:
    # Counting a scope's entries is linear in it: a large store is not counted per query.
    now = [0.0]
    near = NearWords(WordLlamaEmbedder(), recheck_s=2.0, clock=lambda: now[0])
    cfg = {
        "store": {"path": str(tmp_path / "recheck.db")},
        "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        "pre_compress": False,
    }
    with LightMemory.from_config(cfg) as mem:
        turn = {"speaker_name": "Ana", "timestamp": "2024-03-02T09:00"}
        mem.add_memory([{**turn, "id": "a", "content": "My guitar strings broke."}])
        mem.flush()

        def found() -> list[str]:
            return near.near(mem.store, Scope(), "Which instruments?", 5, 0.35)

        assert found() == ["guitar"]
        mem.add_memory([{**turn, "id": "b", "content": "I practised the drums for hours."}])
        mem.flush()
        now[0] = 1.0
        assert found() == ["guitar"]  # not looked at again yet
        now[0] = 2.5
        assert set(found()) == {"guitar", "drums"}


def test_a_budget_holds_the_whole_contexts_estimate_not_each_lines_rounded_up() -> None:
    # "Ana: one two three" is 4 words, 5.2 tokens: rounded up per line (6), five of them
    # and the date header (3.9) would not fit 30 tokens; their whole context does (29.9)
    when = datetime(2023, 6, 9, tzinfo=UTC)
    entries = {
        k: MemoryEntry(
            id=k,
            text=f"{k} two three",
            original_text="",
            scope=Scope(),
            timestamp=when,
            speaker_name="Ana",
        )
        for k in ("one", "uno", "eins", "un", "jeden", "ichi")
    }
    packer = Packer(store=None)  # type: ignore[arg-type]  # (no event: never read)
    p = RetrieveParams(budget_tokens=30, limit=50, readable_first=0, tail_rate=1.0)
    packed = packer.pack([(k, 1.0) for k in entries], p, "zzz", Entries(entries))  # type: ignore[arg-type]
    assert len(packed) == 5
    context = format_context(packed)
    assert sum(r.tokens for r in packed) == estimate_tokens(context) == 30


def test_a_readable_line_that_misses_the_budget_falls_back_to_the_stored_text() -> None:
    when = datetime(2023, 6, 9, tzinfo=UTC)
    long = " ".join(f"w{i}" for i in range(29))
    turn = "I finally adopted a rescue greyhound called Biscuit from the shelter near Porto"
    entries = {
        "a": MemoryEntry(
            id="a", text=long, original_text="", scope=Scope(), timestamp=when, speaker_name="Ana"
        ),
        "b": MemoryEntry(
            id="b",
            text="adopted greyhound Biscuit",
            original_text=turn,
            scope=Scope(),
            timestamp=when,
            speaker_name="Ana",
        ),
    }
    packer = Packer(store=None)  # type: ignore[arg-type]  # (no event: never read)
    ranked = [("a", 1.0), ("b", 0.9)]
    p = RetrieveParams(budget_tokens=80, readable_share=1.0)
    roomy = packer.pack(ranked, p, "dog", Entries(entries))  # type: ignore[arg-type]
    assert roomy[1].text.startswith("finally adopted rescue greyhound")  # readable, it fits
    # at 50 the readable line does not fit, the stored one does: the memory stays
    p = replace(p, budget_tokens=50)
    tight = packer.pack(ranked, p, "dog", Entries(entries))  # type: ignore[arg-type]
    assert [r.text for r in tight] == [long, "adopted greyhound Biscuit"]
    assert sum(r.tokens for r in tight) == estimate_tokens(format_context(tight)) <= 50
