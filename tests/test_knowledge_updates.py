"""Knowledge updates (issue 13): facts that change are superseded, never deleted; the current
value ranks first for present questions, the old one stays for past ones; ``as_of``,
``history`` and ``restore`` see the chain; the LLM decides supersessions in its batches."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import llm_config
from lightmem import LightMemory
from lightmem.bench import locomo
from lightmem.errors import InvalidInputError
from lightmem.llm.base import InvalidReply
from lightmem.pipeline.prompts import update as update_prompt
from lightmem.pipeline.prompts import update_schema
from lightmem.pipeline.supersede import Detector
from lightmem.pipeline.validity import about_past
from lightmem.testing import OpenAIStubServer, ScriptedLLM
from lightmem.types import MemoryEntry, Scope

DAYS = ["2023-03-02T10:00:00", "2023-04-20T10:00:00", "2023-06-12T10:00:00"]


def _turn(i: str, who: str, text: str, day: int) -> dict[str, Any]:
    return {"id": i, "speaker_name": who, "content": text, "timestamp": DAYS[day]}


PRIYA = [
    _turn("p1", "Priya", "I live in Boston with my husband Raj.", 0),
    _turn("s1", "Sam", "Nice! How is work going these days?", 0),
    _turn("p2", "Priya", "I work as a nurse at Mass General, long shifts.", 0),
    _turn("s2", "Sam", "I live in Austin, it is hot all year.", 0),
    _turn("p3", "Priya", "My dog Biscuit is a golden retriever.", 0),
    _turn("s3", "Sam", "Did you watch the game on Sunday?", 1),
    _turn("p4", "Priya", "Haha no, I was too tired after my shift.", 1),
    _turn("p5", "Priya", "Big news, we moved to Denver last month!", 2),
    _turn("s4", "Sam", "Wow, congratulations on the move!", 2),
    _turn("p6", "Priya", "I started a new job at Denver Health on Monday.", 2),
    _turn("p7", "Priya", "Biscuit loves the snow here.", 2),
]


def _source(mem: LightMemory, turn: str, user_id: str | None = None) -> MemoryEntry:
    entries = mem.list_entries({"kind": "entry"}, user_id=user_id)
    return next(e for e in entries if turn in e.source_ids)


def _updated(memory: LightMemory) -> LightMemory:
    memory.add_memory(PRIYA, force_extract=True)
    memory.construct_update_queue_all_entries()
    memory.offline_update_all_entries()
    return memory


def test_a_changed_fact_is_superseded_not_deleted(memory: LightMemory) -> None:
    mem = _updated(memory)
    boston, denver = _source(mem, "p1"), _source(mem, "p5")
    assert boston.superseded_by == denver.id
    assert boston.valid_to == denver.timestamp
    assert _source(mem, "p2").superseded_by == _source(mem, "p6").id
    # stable facts and the other speaker's facts stay current
    for turn in ("p3", "s2", "p7", "s1"):
        assert _source(mem, turn).superseded_by == "", turn
    # the history shows the supersession; the snapshot names the replacing entry
    events = mem.history(boston.id)
    assert [e.op for e in events] == ["add", "update"]
    assert events[-1].after is not None and events[-1].after["superseded_by"] == denver.id
    assert events[-1].after["valid_to"] == denver.timestamp.isoformat()  # type: ignore[union-attr]
    assert "superseded by" in events[-1].reason


def test_current_value_first_for_present_questions_old_one_for_past(memory: LightMemory) -> None:
    mem = _updated(memory)
    boston, denver = _source(mem, "p1"), _source(mem, "p5")
    ranked = [r.id for r in mem.retrieve("Where does Priya live?", limit=8)]
    assert denver.id in ranked
    if boston.id in ranked:
        assert ranked.index(denver.id) < ranked.index(boston.id)
    past = mem.retrieve("Where did Priya live before?", limit=8)
    assert boston.id in [r.id for r in past]
    context = mem.format_context(past)
    assert "Boston with my husband" not in context or "(until 12 June 2023)" in context
    line = next(ln for ln in context.splitlines() if "Boston" in ln)
    assert line.endswith("(until 12 June 2023)")


def test_the_replacing_memory_is_brought_in_when_search_misses_it(memory: LightMemory) -> None:
    mem = _updated(memory)
    boston, denver = _source(mem, "p1"), _source(mem, "p5")
    # a query that matches the old wording only: the current value still comes first
    ranked = [r.id for r in mem.retrieve("Boston husband Raj", limit=3)]
    assert ranked.index(denver.id) < ranked.index(boston.id)


def test_as_of_returns_what_was_valid_then(memory: LightMemory) -> None:
    mem = _updated(memory)
    boston, denver = _source(mem, "p1"), _source(mem, "p5")
    then = [r.id for r in mem.retrieve("Where does Priya live?", limit=20, as_of="2023-05-01")]
    assert boston.id in then and denver.id not in then
    now = [r.id for r in mem.retrieve("Where does Priya live?", limit=20, as_of=datetime.now(UTC))]
    assert boston.id not in now and denver.id in now
    with pytest.raises(InvalidInputError, match="as_of"):
        mem.retrieve("Where does Priya live?", as_of="not a date")


def test_restore_undoes_a_supersession_and_delete_releases_it(memory: LightMemory) -> None:
    mem = _updated(memory)
    boston, job = _source(mem, "p1"), _source(mem, "p2")
    restored = mem.restore(boston.id)
    assert restored.superseded_by == "" and restored.valid_to is None
    assert mem.get(boston.id).superseded_by == ""
    assert mem.history(boston.id)[-1].reason.startswith("restored")
    # deleting the replacing entry makes the replaced one current again
    mem.delete(job.superseded_by)
    assert mem.get(job.id).superseded_by == ""
    assert "deleted" in mem.history(job.id)[-1].reason


def test_online_update_supersedes_at_insertion(store_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(store_path)}, "update": "online"}) as m:
        m.add_memory(PRIYA[:5], force_extract=True)
        m.add_memory(PRIYA[5:], force_extract=True)
        assert _source(m, "p1").superseded_by == _source(m, "p5").id
        assert _source(m, "p3").superseded_by == ""


def test_a_value_changed_twice_is_a_chain(memory: LightMemory) -> None:
    memory.add_memory(
        [
            _turn("a", "Lena", "I drive an old Honda Civic, it still runs great.", 0),
            _turn("b", "Lena", "I sold the old car, I drive a Subaru Outback now.", 1),
            _turn("c", "Lena", "Traded in the Subaru yesterday, my car is a Tesla now!", 2),
        ],
        force_extract=True,
    )
    memory.construct_update_queue_all_entries()
    memory.offline_update_all_entries()
    a, b, c = (_source(memory, t) for t in "abc")
    assert (a.superseded_by, b.superseded_by, c.superseded_by) == (b.id, c.id, "")
    ranked = [r.id for r in memory.retrieve("What car does Lena drive?", limit=5)]
    assert ranked[0] == c.id


def test_questions_and_other_people_supersede_nothing(embedder: Any) -> None:
    def entry(i: str, who: str, text: str, day: int) -> MemoryEntry:
        when = datetime.fromisoformat(DAYS[day]).replace(tzinfo=UTC)
        return MemoryEntry(i, text, text, Scope(), when, speaker_name=who, source_ids=(i,))

    det = Detector(lambda texts: embedder.embed(texts, op="test"))
    base = entry("a", "Ana", "I live in Porto with my sister.", 0)
    assert det.detect([base, entry("b", "Ben", "I moved to Lisbon now.", 1)]) == []
    assert det.detect([base, entry("c", "Ana", "Should I move to Lisbon now?", 1)]) == []
    found = det.detect([base, entry("d", "Ana", "I moved to Lisbon now.", 1)])
    assert [(f.old.id, f.new.id) for f in found] == [("a", "d")]
    # a named person: another speaker's report about Ana changes Ana's fact
    told = det.detect([base, entry("e", "Ben", "Ana moved to Lisbon now.", 1)])
    assert [(f.old.id, f.new.id) for f in told] == [("a", "e")]


@pytest.mark.parametrize(
    ("question", "past"),
    [
        ("Where does Priya live?", False),
        ("Where does Priya work now?", False),
        ("Where did Priya live before Denver?", True),
        ("Which car did Lena use to drive?", True),
        ("Where did Priya work in 2022?", True),
    ],
)
def test_questions_about_the_past_are_told_apart(question: str, past: bool) -> None:
    assert about_past(question) is past


BAKERY = [
    _turn("a", "Maya", "Maya works at a bakery in Lisbon.", 0),
    _turn("b", "Maya", "Maya works at a bank in Lisbon.", 1),
]


def _llm_supersedes(
    mem: LightMemory, llm: ScriptedLLM, old: MemoryEntry, by: str, user_id: str | None = None
) -> Any:
    """One offline update pass in which the model answers: ``old`` superseded by ``by``."""
    mem.construct_update_queue_all_entries(user_id=user_id)
    llm.queue(json.dumps({"actions": [{"id": old.id, "action": "supersede", "by": by}]}))
    return mem.offline_update_all_entries(score_threshold=0.1, user_id=user_id)


def test_llm_supersede_goes_through_validity(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    with LightMemory.from_config(llm_config(stub, store_path)) as mem:
        mem.add_memory(BAKERY, force_extract=True)
        old, new = _source(mem, "a"), _source(mem, "b")
        before = stub.counters.requests["/v1/chat/completions"]
        report = _llm_supersedes(mem, llm, old, new.id)
        assert stub.counters.requests["/v1/chat/completions"] - before == 1  # no extra call
        assert report.superseded == (old.id,) and report.deleted == ()
        assert mem.get(old.id).superseded_by == new.id
        assert "update/2" in mem.history(old.id)[-1].reason


def test_the_update_schema_offers_only_the_batch_newer_ids_to_cite() -> None:
    schema = json.dumps(update_schema.output(["old1"], None, ["new1"]).schema)
    assert '"enum": ["", "new1"]' in schema and '"supersede"' in schema
    assert "supersede" in update_prompt.SYSTEM
    with pytest.raises(InvalidReply, match="by"):
        update_prompt.parse({"actions": [{"id": "old1", "action": "supersede"}]})
    old_names = update_prompt.parse(
        {"actions": [{"id": "a", "action": "ignore"}, {"id": "b", "action": "delete"}]}
    )
    assert [a["action"] for a in old_names] == ["keep", "merge"]


def test_llm_supersede_citing_an_entry_outside_the_batch_is_refused(
    llm: ScriptedLLM, stub: OpenAIStubServer, store_path: Path
) -> None:
    with LightMemory.from_config(llm_config(stub, store_path)) as mem:
        mem.add_memory(BAKERY, force_extract=True, user_id="u1")
        mem.add_memory(
            _turn("x", "Zed", "Secret of another user", 2), force_extract=True, user_id="u2"
        )
        old = _source(mem, "a", user_id="u1")
        other = mem.list_entries({"kind": "entry"}, user_id="u2")[0]
        report = _llm_supersedes(mem, llm, old, other.id, user_id="u1")
        assert report.rejected == 1 and report.superseded == ()
        assert mem.get(old.id, user_id="u1").superseded_by == ""


UPDATE_SET = Path(__file__).parents[1] / "benchmarks" / "data" / "knowledge_updates.json"


def test_bench_reports_by_kind_and_the_out_fields() -> None:
    out = locomo.run(UPDATE_SET, budget_tokens=200, samples=3)
    summary = out["summary"]
    assert set(summary["by_kind"]) == {"current", "history", "stable"}
    assert summary["by_kind"]["current"]["n"] >= 3
    assert summary["false_supersession_rate"] == 0.0
    q = next(q for q in out["questions"] if q["kind"] == "current")
    assert q["context"] and q["stale_evidence"]
    memory = q["retrieved"][0]
    assert {"timestamp", "speaker", "source_ids", "superseded_by", "valid_to"} <= set(memory)
    # rank order (retrieve()'s), not the date order of the formatted context
    assert [m["rank"] for m in q["retrieved"]] == list(range(1, len(q["retrieved"]) + 1))
    dated = [[m["timestamp"] for m in x["retrieved"]] for x in out["questions"]]
    assert any(ts != sorted(ts) for ts in dated)
    # without the update pass the stale value is not marked, and comes first
    plain = locomo.run(UPDATE_SET, budget_tokens=200, samples=3, update=False)
    kinds, before = summary["by_kind"], plain["summary"]["by_kind"]
    assert kinds["current"]["current_first"] > before["current"]["current_first"]
