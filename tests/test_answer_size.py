"""A search's answer is bounded in size like a listing page: its results end once their
memory text would pass ``max_chars`` (marked ``truncated``), and entries are fetched a
bounded number at a time, so a large ``limit`` over megabyte memories holds neither
every entry nor a huge answer in memory."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lightmem import LightMemory, RetrievalResults
from lightmem.errors import InvalidInputError
from lightmem.pipeline.candidates import Candidates
from lightmem.pipeline.packing import Packer
from lightmem.pipeline.retrieve_params import RetrieveParams
from lightmem.server.schemas import compact_retrieval
from lightmem.types import MemoryEntry, Scope


class _Counted:
    """Entries by id that remember how many ids each fetch asked for."""

    def __init__(self, entries: dict[str, MemoryEntry]) -> None:
        self.entries = entries
        self.asked: list[int] = []

    def get_entries(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]:
        self.asked.append(len(entry_ids))
        return {i: self.entries[i] for i in entry_ids if i in self.entries}


def _entries(n: int, chars: int) -> dict[str, MemoryEntry]:
    when = datetime(2024, 5, 1, tzinfo=UTC)
    return {
        f"e{i}": MemoryEntry(
            id=f"e{i}",
            text=f"memo {i}",
            original_text=f"memo {i} " + "x" * chars,
            scope=Scope(),
            timestamp=when,
            speaker_name="Ana",
        )
        for i in range(n)
    }


def test_results_end_at_max_chars_and_are_marked_truncated() -> None:
    entries = _entries(300, 1_000)
    ranked = [(k, 1.0 - i / 1000) for i, k in enumerate(entries)]
    packer = Packer(store=None)  # type: ignore[arg-type]  # (no event: never read)
    p = RetrieveParams(limit=1000)
    every = packer.pack(ranked, p, "memo", Candidates(_Counted(entries)))
    assert len(every) == 300 and not every.truncated  # the store ran out, not the answer
    source = _Counted(entries)
    capped = packer.pack(
        ranked, RetrieveParams(limit=1000, max_chars=10_500), "memo", Candidates(source)
    )
    assert isinstance(capped, RetrievalResults) and capped.truncated
    assert [r.id for r in capped] == [r.id for r in every][: len(capped)]  # the best first
    assert sum(r.chars for r in capped) <= 10_500 < sum(r.chars for r in every[: len(capped) + 1])
    # fetched a bounded number at a time, and no more than the answer needed
    assert max(source.asked) <= 64 and sum(source.asked) <= 64
    # the first result is kept whatever its size: an answer is never empty for it
    one = packer.pack(
        ranked, RetrieveParams(limit=5, max_chars=10), "memo", Candidates(_Counted(entries))
    )
    assert len(one) == 1 and one.truncated
    # a limit reached before the cap is no truncation
    few = packer.pack(
        ranked, RetrieveParams(limit=3, max_chars=10_500), "memo", Candidates(_Counted(entries))
    )
    assert len(few) == 3 and not few.truncated


def test_a_large_limit_is_fetched_in_bounded_chunks() -> None:
    entries = _entries(300, 10)
    source = _Counted(entries)
    packer = Packer(store=None)  # type: ignore[arg-type]
    ranked = [(k, 1.0) for k in entries]
    assert len(packer.pack(ranked, RetrieveParams(limit=1000), "memo", Candidates(source))) == 300
    assert max(source.asked) <= 64 and sum(source.asked) == 300


def test_search_answers_of_the_server_are_bounded(tmp_path: Path) -> None:
    from lightmem.server import service
    from lightmem.server.tenancy import open_tenant

    tenant = open_tenant("acme", {"store": {"path": str(tmp_path / "t.db")}})
    try:
        turns = [f"Garden note {i}: the tomatoes " + "grow tall " * 300 for i in range(40)]
        tenant.memory.add_memory([{"content": t} for t in turns], force_extract=True)
        whole = service.retrieve(tenant, "tomatoes garden", limit=40, max_chars=10**9)
        assert len(whole["results"]) == 40 and whole["truncated"] is False
        capped = service.retrieve(tenant, "tomatoes garden", limit=40, max_chars=20_000)
        assert capped["truncated"] is True and 1 <= len(capped["results"]) < 40
        ids = [r["id"] for r in capped["results"]]
        assert ids == [r["id"] for r in whole["results"]][: len(ids)]
        held = sum(
            len(r["text"]) + len(r["original_text"]) + len(r["context"]) for r in capped["results"]
        )
        assert held <= 20_000
        assert compact_retrieval(capped, full=False)["truncated"] is True  # MCP says so too
        default = service.retrieve(tenant, "tomatoes garden", limit=40)
        assert default["truncated"] is False  # 8,000,000 characters hold these
    finally:
        tenant.memory.close()


def test_max_chars_is_checked(tmp_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        for bad in (0, -3, 1.5, True):
            with pytest.raises(InvalidInputError, match="max_chars"):
                mem.retrieve("anything", max_chars=bad)  # type: ignore[arg-type]
