"""Resolved time on memory entries: extracted offline and by the LLM path, kept by both
stores, shown in the context, used by retrieval, and measured by the LoCoMo bench."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lightmem import LightMemory
from lightmem.bench import locomo, locomo_time
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from lightmem.timespan import TimeSpan, week_span
from lightmem.types import MemoryEntry, Scope

MAY_8 = "1:56 pm on 8 May, 2023"
TURNS = [
    {"id": "t1", "content": "I went to a support group yesterday.", "speaker_name": "Caroline",
     "timestamp": MAY_8},
    {"id": "t2", "content": "That sounds powerful. I paint on weekends.", "speaker_name": "Mel",
     "timestamp": MAY_8},
    {"id": "t3", "content": "We had a blast last year at the Pride fest.",
     "speaker_name": "Caroline", "timestamp": "2:00 pm on 17 August, 2023"},
]  # fmt: skip


def _entries(mem: LightMemory) -> dict[str, MemoryEntry]:
    return {e.source_ids[0]: e for e in mem.list_entries(filters={"kind": "entry"})}


def test_offline_extraction_resolves_time_and_keeps_the_text(
    store_config: dict[str, Any],
) -> None:
    with LightMemory.from_config({"store": store_config}) as mem:
        mem.add_memory(TURNS, force_extract=True)
        got = _entries(mem)
        t1 = got["t1"]
        assert t1.original_text == TURNS[0]["content"]  # the text as said
        assert t1.event_time is not None and t1.event_time.label() == "on 7 May 2023"
        assert t1.event_time.phrase == "yesterday" and t1.event_time.unit == "day"
        assert got["t2"].event_time is None
        assert got["t3"].event_time is not None and got["t3"].event_time.label() == "in 2022"
        # shown in the context, on the memory's own line
        results = mem.retrieve("support group", limit=3)
        context = mem.format_context(results)
        line = next(ln for ln in context.splitlines() if "yesterday" in ln)
        assert line.endswith("(on 7 May 2023)")
        snap = t1.to_dict()["event_time"]
        assert snap["start"] == "2023-05-07" and snap["label"] == "on 7 May 2023"
        assert MemoryEntry.from_dict(t1.to_dict()) == t1
        # and in the history's snapshots
        history = mem.history(t1.id)
        assert history[0].after is not None
        assert history[0].after["event_time"]["phrase"] == "yesterday"


def test_the_context_writes_relative_weeks_and_weekdays_as_said(
    store_config: dict[str, Any],
) -> None:
    june_9 = "7:55 pm on 9 June, 2023"
    turns = [
        {"id": "w", "content": "My school talk last week went great.", "speaker_name": "Caroline",
         "timestamp": june_9},
        {"id": "f", "content": "I ran a charity race last Friday.", "speaker_name": "Mel",
         "timestamp": june_9},
    ]  # fmt: skip
    with LightMemory.from_config({"store": store_config}) as mem:
        mem.add_memory(turns, force_extract=True)
        got = _entries(mem)
        assert got["w"].event_time is not None and got["w"].event_time.unit == "week"
        context = mem.format_context(mem.retrieve("school talk charity race", limit=5))
        assert "Caroline: " in context and "(week before 9 June 2023)" in context
        assert "(Friday before 9 June 2023)" in context
        # the entry keeps its calendar span and label; only the context words it as said
        assert got["w"].event_time.label() == "week of 29 May 2023"


def test_a_manual_edit_resolves_the_new_text(store_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as mem:
        mem.add_memory(TURNS[:1], force_extract=True)
        t1 = _entries(mem)["t1"]
        moved = mem.update(t1.id, "I went to a support group last week.")
        assert moved.event_time is not None and moved.event_time.label() == "week of 1 May 2023"
        fixed = mem.update(t1.id, "I went to a support group.")  # names no time: kept
        assert fixed.event_time == moved.event_time


def test_resolution_can_be_switched_off(store_path: Path) -> None:
    cfg = {
        "store": {"path": str(store_path)},
        "memory_manager": {"configs": {"resolve_time": False}},
    }
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(TURNS, force_extract=True)
        assert all(e.event_time is None for e in _entries(mem).values())
        assert "(on 7 May 2023)" not in mem.format_context(mem.retrieve("support group"))


def test_bulk_import_keeps_resolved_time(store_config: dict[str, Any]) -> None:
    """Both stores' bulk paths (PostgreSQL streams rows with binary COPY)."""
    span = week_span(date(2023, 5, 29)).with_phrase("last week")
    with LightMemory.from_config({"store": store_config}) as mem:
        entry = MemoryEntry(
            id="x1", text="school talk", original_text="school talk", scope=Scope("u"),
            event_time=span,
        )  # fmt: skip
        vec = np.zeros(mem.embedder.dim, dtype=np.float32)
        vec[0] = 1.0
        assert mem.store.import_entries([(entry, vec)]) == 1
        back = mem.store.get_entry("x1", Scope("u"))
        assert back is not None and back.event_time == span


def _dated(mem: LightMemory) -> None:
    mem.add_memory(
        [
            {"id": "aug", "content": "I went hiking in the hills with the dog",
             "speaker_name": "Maya", "timestamp": "9:00 am on 21 August, 2023"},
            {"id": "oct", "content": "The weather is cold and grey", "speaker_name": "Maya",
             "timestamp": "9:00 am on 2 October, 2023"},
            {"id": "jun", "content": "Hiking was fun last week", "speaker_name": "Maya",
             "timestamp": "9:00 am on 20 June, 2023"},
        ],
        force_extract=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    "question",
    [
        # names a time: "last week" said on 20 June is 12-18 June
        "Who went hiking in the hills with the dog in June?",
        # asks when: the memory that states a time comes first
        "When did Maya go hiking in the hills?",
    ],
)
def test_time_in_a_question_lifts_memories_of_that_time(store_path: Path, question: str) -> None:
    first = {}
    for weight in (0.0, 0.5):
        cfg = {
            "store": {"path": str(store_path.with_name(f"w{weight}.db"))},
            "retrieval": {"time_weight": weight},
            "memory_manager": {"configs": {"context_window": 0}},  # each turn on its own
        }
        with LightMemory.from_config(cfg) as mem:
            _dated(mem)
            first[weight] = mem.retrieve(question, limit=3)[0].source_ids
    assert first[0.0] == ("aug",)  # more of the question's words
    assert first[0.5] == ("jun",)


def _llm_config(stub: OpenAIStubServer, path: Path) -> dict[str, Any]:
    return {
        "store": {"path": str(path)},
        "memory_manager": {
            "model_name": "openai",
            "configs": {"model": "m", "openai_base_url": stub.base_url, "api_key": "k"},
        },
    }


def test_the_llm_resolves_time_and_the_rules_cover_what_it_leaves(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    llm.queue(
        json.dumps(
            {
                "facts": [
                    {"fact": "Caroline went to a support group on 7 May 2023.",
                     "source_ids": ["t1"], "time": "2023-05-07"},
                    {"fact": "Mel paints on weekends.", "source_ids": ["t2"], "time": "soon"},
                    {"fact": "Caroline went to the Pride fest last year.", "source_ids": ["t3"]},
                ]
            }
        )
    )  # fmt: skip
    with LightMemory.from_config(_llm_config(stub, store_path)) as mem:
        mem.add_memory(TURNS, force_extract=True)
        got = _entries(mem)
        # the model's days, with the words the fact says them in
        assert got["t1"].event_time == TimeSpan(
            date(2023, 5, 7), date(2023, 5, 7), "day", "7 May 2023"
        )
        assert got["t1"].text == "Caroline went to a support group on 7 May 2023."
        assert got["t2"].event_time is None  # "soon" is no date, and the turn names none
        assert got["t3"].event_time is not None and got["t3"].event_time.label() == "in 2022"
        usage = {(r["kind"], r["op"]): r for r in mem.stats()["usage"]["by_operation"]}
        assert usage[("llm", "extract.unread_time")]["items"] == 1
    body = next(b for b in stub.counters.bodies if "messages" in b)
    assert '"time"' in body["messages"][0]["content"]
    # the rules' reading goes to the model beside the turn, for it to check
    assert "yesterday [times: yesterday = 2023-05-07]" in (body["messages"][1]["content"])
    schema = json.dumps(body["response_format"])
    assert '"required": ["fact", "source_ids", "time"]' in schema


def test_the_models_time_keeps_the_words_it_was_said_in(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    june_9, june_1 = "7:55 pm on 9 June, 2023", "7:55 pm on 1 June, 2023"
    turns = [
        {"id": "a", "content": "Busy days.", "speaker_name": "Mel", "timestamp": june_1},
        {"id": "w", "content": "I gave a talk at a school last week.", "speaker_name": "Caroline",
         "timestamp": june_9},
        {"id": "m", "content": "We met last Friday.", "speaker_name": "Mel", "timestamp": june_9},
    ]  # fmt: skip
    llm.queue(
        json.dumps(
            {
                "facts": [
                    {"fact": "Caroline gave a talk at a school.", "source_ids": ["w"],
                     "time": "2023-05-29/2023-06-04"},
                    # "last Friday" names other days than the model's
                    {"fact": "Mel met someone.", "source_ids": ["m"],
                     "time": "2023-03-01/2023-05-31"},
                    # "last week" said on 9 June names these days, but the fact is dated
                    # 1 June (its first turn), where those words meant other days
                    {"fact": "Mel was busy.", "source_ids": ["a", "w"],
                     "time": "2023-05-29/2023-06-04"},
                ]
            }
        )
    )  # fmt: skip
    with LightMemory.from_config(_llm_config(stub, store_path)) as mem:
        mem.add_memory(turns, force_extract=True)
        got = {e.text: e.event_time for e in mem.list_entries(filters={"kind": "entry"})}
        talk = week_span(date(2023, 5, 29))
        # the rules read the same days from the turn: its words are kept
        assert got["Caroline gave a talk at a school."] == talk.with_phrase("last week")
        assert "(week before 9 June 2023)" in mem.format_context(mem.retrieve("school talk"))
        # no words said on the entry's day name the model's days: its ISO text stays
        met = got["Mel met someone."]
        assert met is not None and met.phrase == "2023-03-01/2023-05-31"
        assert got["Mel was busy."] == talk.with_phrase("2023-05-29/2023-06-04")


def test_an_events_time_keeps_the_words_it_was_said_in(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    turn = {"id": "w", "content": "I gave a talk at a school last week.",
            "speaker_name": "Caroline", "timestamp": "7:55 pm on 9 June, 2023"}  # fmt: skip
    week = "2023-05-29/2023-06-04"
    fact = {"fact": "Caroline gave a talk.", "source_ids": ["w"], "time": ""}
    event = {"id": "e0", "summary": "Caroline's school talk", "time": week,
             "participants": ["Caroline"], "cause": "", "effect": "", "facts": [fact]}  # fmt: skip
    llm.queue(json.dumps({"events": [event], "relations": []}))
    cfg = {**_llm_config(stub, store_path), "extraction_mode": "event"}
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory([turn], force_extract=True)
        stored = mem.list_entries(filters={"kind": "event"})[0]
        assert stored.event_time == week_span(date(2023, 5, 29)).with_phrase("last week")
        context = mem.format_context(mem.retrieve("school talk", filters={"kind": "event"}))
        assert "(event)" in context and "(week before 9 June 2023)" in context


def test_the_bench_measures_answers_found_in_the_context(tmp_path: Path) -> None:
    sample = {
        "sample_id": "t",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Mel",
            "session_1_date_time": "7:55 pm on 9 June, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1",
                 "text": "Hey Mel! I gave a talk at a school last week."},
                {"speaker": "Mel", "dia_id": "D1:2", "text": "Wow, how did the students take it?"},
                {"speaker": "Caroline", "dia_id": "D1:3",
                 "text": "They loved it, I met my mentors too."},
            ],
        },
        "qa": [
            {"question": "When did Caroline give a talk at a school?",
             "answer": "The week before 9 June 2023", "evidence": ["D1:1"], "category": 2},
        ],
    }  # fmt: skip
    path = tmp_path / "l.json"
    path.write_text(json.dumps([sample]))
    found = {}
    for on in (True, False):
        cfg = {"memory_manager": {"configs": {"resolve_time": on}}}
        out = locomo.run(path, budget_tokens=400, config=cfg)
        cat = out["summary"]["by_category"]["2"]
        assert cat["timed_answers"] == 1
        found[on] = cat["answer_time_in_context"]
        assert out["questions"][0]["answer_time"] == "The week before 9 June 2023"
    assert found == {True: 1.0, False: 0.0}


def test_answer_times_match_by_their_days() -> None:
    ctx = "[9 June 2023]\n- Caroline: talk at school (week of 29 May 2023)\n- Mel: in 2022"
    assert locomo_time.answer_in_context("The week before 9 June 2023", ctx)[
        "answer_time_in_context"
    ]
    assert locomo_time.answer_in_context(2022, ctx)["answer_time_in_context"]
    assert locomo_time.answer_in_context("9 June 2023", ctx)["answer_time_in_context"]
    assert not locomo_time.answer_in_context("8 June 2023", ctx)["answer_time_in_context"]
    assert locomo_time.answer_in_context("10 years ago", ctx) == {}
    assert locomo_time.answer_in_context("Pixel", ctx) == {}


def test_the_scripted_model_takes_the_resolved_times_in_event_mode(
    stub: OpenAIStubServer, store_path: Path
) -> None:
    cfg = {**_llm_config(stub, store_path), "extraction_mode": "event"}
    with LightMemory.from_config(cfg) as mem:
        mem.add_memory(TURNS, force_extract=True)
        facts = _entries(mem)
        assert facts["t1"].event_time is not None
        # the model's days (from the rules' hint), in the words the turn said them
        assert facts["t1"].event_time == TimeSpan(
            date(2023, 5, 7), date(2023, 5, 7), "day", "yesterday"
        )
        assert "[times:" not in facts["t1"].text
        events = mem.list_entries(filters={"kind": "event"})
        may = next(e for e in events if "t1" in e.source_ids)
        assert may.event_time == facts["t1"].event_time
