"""Work bounded against hostile input on the LLM path and in retrieval by time: the time of
a fact is looked for among the first times of its turns, not in the whole turn, once per
batch and not once per fact; a question's times are kept distinct and capped; and a model
reply nested too deep to parse is a bad reply like any other, never a raw RecursionError."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import openai  # noqa: F401  (imported here, so the first LLM test's time is its own)
import pytest

from conftest import llm_config
from lightmem import LightMemory
from lightmem import timeresolve as tr
from lightmem.errors import LightMemError
from lightmem.ledger import Ledger
from lightmem.llm import OpenAIChatClient
from lightmem.llm.base import UnusableOutputError
from lightmem.pipeline.extract_llm import FALLBACK, TIME_HINTS
from lightmem.pipeline.time_match import MAX_QUERY_TIMES, TimeQuery
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from lightmem.timespan import TimeSpan, day_span

SAID = "2024-03-02T10:00:00+00:00"


class _Counter:
    n = 0


@pytest.fixture
def mentions(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Counter]]:
    """Counts the time mentions the rules resolve, whichever entry point reads them."""

    class Counted(tr.Mention):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            _Counter.n += 1
            super().__init__(*args, **kwargs)

    _Counter.n = 0
    monkeypatch.setattr(tr, "Mention", Counted)
    yield _Counter


@pytest.fixture
def mem(stub: OpenAIStubServer, store_path: Path) -> Iterator[LightMemory]:
    with LightMemory.from_config({**llm_config(stub, store_path), "pre_compress": False}) as m:
        yield m


def _add(
    mem: LightMemory,
    llm: ScriptedLLM,
    turn: str,
    content: str,
    facts: int,
    time: str,
    counter: type[_Counter],
    timestamp: str | None = SAID,
) -> tuple[int, list[TimeSpan | None]]:
    """The mentions read while ``turn`` is added, the model answering ``facts`` facts that
    cite it with ``time``, and the facts' times."""
    llm.queue(
        json.dumps(
            {
                "facts": [
                    {"fact": f"{turn} {i}", "source_ids": [turn], "time": time}
                    for i in range(facts)
                ]
            }
        )
    )
    message: dict[str, Any] = {"id": turn, "content": content}
    if timestamp:
        message["timestamp"] = timestamp
    counter.n = 0
    mem.add_memory(message, force_extract=True)
    read = counter.n
    got = [e for e in mem.list_entries() if e.text.startswith(f"{turn} ")]
    assert len(got) == facts
    return read, [e.event_time for e in got]


# -- finding 1: the words of a model's time are looked for in a bounded part of the turn -----
def test_a_dated_fact_reads_no_more_of_a_long_turn_than_a_short_one(
    mem: LightMemory, llm: ScriptedLLM, mentions: type[_Counter]
) -> None:
    # a date the model inferred, which no phrase of the turn names: every phrase is a miss
    short, times = _add(mem, llm, "s", "May 3 " * 40, 3, "2001-01-01", mentions)
    long, _ = _add(mem, llm, "l", "May 3 " * 400, 3, "2001-01-01", mentions)
    assert TIME_HINTS <= long == short  # unbounded, the 10x turn read 3 x 360 mentions more
    assert all(t is not None and t.phrase == "2001-01-01" for t in times)
    assert all(t is not None and t.same_days(day_span(date(2001, 1, 1))) for t in times)
    # an ordinary turn keeps its choice: the words the model's date was said in, among
    # the times the prompt hinted
    content = "Then May 3 came. " * (TIME_HINTS - 2) + "I ran a marathon last Saturday."
    _, times = _add(mem, llm, "a", content, 1, "2024-02-24", mentions)
    assert times[0] is not None and times[0].phrase == "last Saturday"
    assert times[0].same_days(day_span(date(2024, 2, 24)))


def test_an_undated_turn_is_resolved_once_per_batch_not_once_per_fact(
    mem: LightMemory, llm: ScriptedLLM, mentions: type[_Counter]
) -> None:
    # undated, "May 3" is no day, so the rules read the whole turn looking for one
    one, _ = _add(mem, llm, "o", "May 3 " * 200, 1, "", mentions, None)
    four, times = _add(mem, llm, "f", "May 3 " * 200, 4, "", mentions, None)
    assert 200 <= four == one  # once per fact, four facts read the turn three more times
    assert times == [None] * 4


# -- finding 2: a question's times are distinct and capped ---------------------------------
def test_a_question_repeating_a_date_keeps_it_once() -> None:
    q = TimeQuery.of("When did I go out on 3 May 2023? " * 500)
    assert [(s.start, s.end) for s in q.spans if isinstance(s, TimeSpan)] == [
        (date(2023, 5, 3), date(2023, 5, 3))
    ]
    assert q.asks_when


def test_a_question_naming_many_dates_keeps_the_first_few(mentions: type[_Counter]) -> None:
    def question(n: int) -> str:
        days = (date(2023, 1, 1) + timedelta(days=i) for i in range(n))
        return "Was it on " + ", ".join(f"{d.day} {d:%B %Y}" for d in days) + "?"

    q = TimeQuery.of(question(10 * MAX_QUERY_TIMES))
    assert len(q.spans) == MAX_QUERY_TIMES
    assert q.spans == TimeQuery.of(question(MAX_QUERY_TIMES)).spans  # the first ones
    mentions.n = 0
    TimeQuery.of(question(100 * MAX_QUERY_TIMES))
    assert mentions.n == MAX_QUERY_TIMES  # and the rest of the text is not resolved


def test_retrieval_lifts_the_first_dates_a_question_names(tmp_path: Path) -> None:
    turns = [
        {"id": "m1", "content": "We painted the fence.", "timestamp": "2023-05-03T10:00"},
        {"id": "m2", "content": "We painted the garage.", "timestamp": "2023-07-09T10:00"},
    ]
    others = ", ".join(f"{d} June 2023, {d} August 2023" for d in range(1, 21))  # 40 days
    with LightMemory.from_config({"store": {"path": str(tmp_path / "s.db")}}) as mem:
        mem.add_memory(turns, force_extract=True)
        for first, then, lifted in (("9 July", "3 May", "m2"), ("3 May", "9 July", "m1")):
            q = f"What did we paint on {first} 2023, {others} or {then} 2023?"
            assert len(TimeQuery.of(q).spans) == MAX_QUERY_TIMES
            got = mem.retrieve(q, limit=2)
            assert got[0].source_ids == (lifted,)  # the date past the cap lifts nothing


# -- finding 4: a reply nested too deep to parse is an unusable answer ----------------------
def _deep() -> str:
    depth = 10 * sys.getrecursionlimit()
    return '{"facts": ' + "[" * depth + "]" * depth + "}"


def test_a_too_deep_reply_is_repaired_then_falls_back(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    llm.queue(_deep(), _deep(), _deep())
    with LightMemory.from_config(llm_config(stub, store_path)) as mem:
        mem.add_memory({"id": "a", "content": "I love jazz."}, force_extract=True)
        entries = mem.list_entries(filters={"kind": "entry"})
        assert [e.metadata["extractor"] for e in entries] == [FALLBACK]
        assert mem.stats()["messages_pending"] == 0
    bodies = [b for b in stub.counters.bodies if "messages" in b]
    assert len(bodies) == 3  # two repair rounds, as for any other bad reply
    assert "nested too deeply" in bodies[1]["messages"][-1]["content"]


def test_a_too_deep_reply_is_an_unusable_output_for_every_caller(
    llm: ScriptedLLM, stub: OpenAIStubServer
) -> None:
    llm.queue(_deep(), _deep())
    client = OpenAIChatClient(
        "stub", base_url=stub.base_url, api_key="k", ledger=Ledger(), json_repairs=1
    )
    with pytest.raises(UnusableOutputError, match="nested too deeply") as info:
        client.complete_json([{"role": "user", "content": "hi"}], lambda o: o, op="probe")
    assert isinstance(info.value, LightMemError)
    llm.queue(_deep(), '{"ok": true}')
    assert client.complete_json([{"role": "user", "content": "hi"}], lambda o: o, op="probe") == {
        "ok": True
    }
