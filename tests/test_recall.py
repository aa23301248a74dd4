"""Issue 16: speaker focus and sentence display in retrieval, answer-word cover and the run
configuration in ``bench locomo``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory
from lightmem.bench import locomo
from lightmem.bench.locomo_report import answer_cover, answer_words, by_conversation, redacted
from lightmem.config import parse_config
from lightmem.errors import ConfigError
from lightmem.pipeline.expand import named_speakers
from lightmem.pipeline.extractive import select_sentences
from lightmem.store.text_index import Stemmer
from lightmem.types import MemoryEntry, Scope

FIXTURES = Path(__file__).parent / "fixtures"


def _entry(eid: str, speaker: str, topic: str = "") -> MemoryEntry:
    return MemoryEntry(
        id=eid, text="x", original_text="x", scope=Scope(), speaker_name=speaker, topic_id=topic
    )


def test_named_speakers_by_first_name_full_name_and_possessive() -> None:
    people = [_entry("1", "Melanie Ross"), _entry("2", "Caroline"), _entry("3", "Al")]
    assert named_speakers("What books has Melanie read?", people) == ["Melanie Ross"]
    assert named_speakers("What are Caroline's hobbies?", people) == ["Caroline"]
    assert named_speakers("Did melanie ross and caroline meet?", people) == [
        "Melanie Ross",
        "Caroline",
    ]
    assert named_speakers("What did they say?", people) == []
    # a one-letter first name is never matched by a stray word
    assert named_speakers("What did a person buy?", [_entry("4", "A Smith")]) == []


def _chat() -> list[dict[str, Any]]:
    """Ana talks about her own hobbies; Ben keeps saying her name about other things."""
    turns = [
        ("Ben", "Ana, did you enjoy the match yesterday?"),
        ("Ana", "I went climbing at the gorge this weekend."),
        ("Ben", "Ana, I enjoy football so much, our striker scored twice."),
        ("Ana", "I also started learning the cello."),
        ("Ben", "Ana, I did not enjoy the referee, he was unfair."),
        ("Ana", "Pottery class on Tuesdays keeps me calm."),
        ("Ben", "Ana, enjoy the replay tonight."),
    ]
    return [
        {"id": f"t{i}", "speaker_name": s, "content": c, "timestamp": "2024-03-02T09:00"}
        for i, (s, c) in enumerate(turns)
    ]


@pytest.mark.parametrize("mode", ["hybrid", "embedding"])
def test_speaker_focus_ranks_the_named_speakers_own_memories_first(
    tmp_path: Path, mode: str
) -> None:
    query = "What does Ana enjoy?"

    def top(focus: float, keep: int = 0) -> list[str]:
        cfg = {
            "store": {"path": str(tmp_path / f"{mode}-{focus}-{keep}.db")},
            "retrieve_strategy": mode,
            "retrieval": {"speaker_focus": focus, "keep_first": keep},
            # each turn indexed alone: Ben's words do not reach Ana's turns as context
            "memory_manager": {"model_name": "offline", "configs": {"context_window": 0}},
        }
        with LightMemory.from_config(cfg) as mem:
            mem.add_memory(_chat(), force_extract=True)
            return [r.speaker for r in mem.retrieve(query, limit=3)]

    assert top(0.0).count("Ana") < 3  # Ben's "Ana, ..." turns crowd in without focus
    assert top(2.0) == ["Ana", "Ana", "Ana"]
    # the best plain hit can be kept in place ahead of the re-ranking
    plain = top(0.0)
    assert plain[0] == "Ben"
    assert top(2.0, keep=1) == ["Ben", "Ana", "Ana"]


def test_retrieval_options_are_validated() -> None:
    s = parse_config({"retrieval": {"speaker_focus": 1.5, "keep_first": 4}})
    assert (s.retrieve.speaker_focus, s.retrieve.keep_first) == (1.5, 4)
    with pytest.raises(ConfigError, match=r"retrieval\.speaker_focus"):
        parse_config({"retrieval": {"speaker_focus": -1}})
    with pytest.raises(ConfigError, match=r"retrieval\.context_text"):
        parse_config({"retrieval": {"context_text": "keywords"}})


def test_answer_cover_counts_content_words_only() -> None:
    assert answer_words("The Pride parade, and a school speech") == {
        "pride",
        "parade",
        "school",
        "speech",
    }
    assert answer_cover("pottery, camping", "- Mel: loves pottery class") == 0.5
    assert answer_cover(2022, "[7 May 2022]") == 1.0  # ints are answers too
    assert answer_cover("", "anything") is None


def test_bench_locomo_reports_cover_by_category_conversation_and_its_config() -> None:
    cfg = {"retrieval": {"speaker_focus": 1.0}}
    out = locomo.run(FIXTURES / "locomo_tiny.json", budget_tokens=200, config=cfg)
    s = out["summary"]
    assert 0.0 < s["answer_word_cover"] <= 1.0
    assert all("answer_word_cover" in v for v in s["by_category"].values())
    for q in out["questions"]:
        context = "\n".join(r["text"] for r in q["retrieved"])
        # cover is measured on the formatted context, which holds each retrieved text
        assert q["answer_cover"] >= answer_cover(q["answer"], context)
    conv = s["by_conversation"]
    assert set(conv["conversations"]) == {q["sample_id"] for q in out["questions"]}
    c = s["config"]
    assert c["config"] == cfg and c["retrieve"]["speaker_focus"] == 1.0
    assert c["embedder"].startswith("wordllama") and c["budget_tokens"] == 200
    assert len(c["data_sha256"]) == 64
    json.dumps(s)  # the whole summary is JSON


def test_by_conversation_spread() -> None:
    qs = [
        {"sample_id": "a", "category": 1, "all_evidence": True, "answer_cover": 1.0},
        {"sample_id": "a", "category": 4, "all_evidence": False, "answer_cover": 0.0},
        {"sample_id": "b", "category": 1, "all_evidence": False, "answer_cover": None},
    ]
    out = by_conversation(qs)
    assert out["conversations"]["a"] == {
        "n": 2,
        "all_evidence_recall": 0.5,
        "multi_hop_recall": 1.0,
        "answer_word_cover": 0.5,
    }
    assert out["all_evidence_recall_min"] == 0.0 and out["all_evidence_recall_max"] == 0.5


def test_select_sentences_keeps_whole_sentences_about_the_query() -> None:
    stem = Stemmer().tokens
    text = (
        "Work was long today. I painted a sunset by the lake last weekend! "
        "The kids loved it. We might go again."
    )
    assert select_sentences(text, set(stem("paint")), 100, stem) == text  # short: whole
    assert select_sentences(text, set(stem("paintings")), 12, stem) == (
        "I painted a sunset by the lake last weekend!"
    )
    # the rest fills up in text order, and the text keeps its order
    assert select_sentences(text, set(stem("paintings")), 13, stem) == (
        "Work was long today. I painted a sunset by the lake last weekend!"
    )
    assert select_sentences(text, set(stem("kids")), 5, stem) == "The kids loved it."
    long_one = "one two three four five six seven eight"
    assert select_sentences(long_one, set(), 3, stem) == "one two three …"


def test_context_shows_sentences_within_the_budget(tmp_path: Path) -> None:
    turn = (
        "My week was a blur of meetings and late trains home. "
        "On Saturday I finally adopted a grey cat named Pixel from the shelter. "
        "Tomorrow I have to call the plumber about the sink again."
    )
    msg = [{"id": "t1", "speaker_name": "Ana", "content": turn, "timestamp": "2024-03-02"}]
    shown = {}
    for how in ("stored", "sentences"):
        cfg = {
            "store": {"path": str(tmp_path / f"{how}.db")},
            # readable_first 0: the best memory is shown as stored text too
            "retrieval": {"context_text": how, "sentence_words": 14, "readable_first": 0},
        }
        with LightMemory.from_config(cfg) as mem:
            mem.add_memory(msg, force_extract=True)
            [r] = mem.retrieve("What cat did Ana adopt?", budget_tokens=200)
            shown[how] = r
    assert shown["sentences"].text == (
        "On Saturday I finally adopted a grey cat named Pixel from the shelter."
    )
    assert shown["stored"].text != shown["sentences"].text  # pre-compressed keywords
    assert shown["sentences"].tokens < len(turn.split())  # the budget counts what is shown


def test_run_config_never_carries_secrets() -> None:
    cfg = {"memory_manager": {"configs": {"api_key": "sk-1", "model": "m"}}, "n": [{"dsn": "x"}]}
    assert redacted(cfg) == {
        "memory_manager": {"configs": {"api_key": "<redacted>", "model": "m"}},
        "n": [{"dsn": "<redacted>"}],
    }
