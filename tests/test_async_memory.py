"""``AsyncLightMemory``: the whole public API as coroutines, one implementation with the
sync facade (same results), calls run off the event loop, close waits for calls in flight."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from lightmem import AsyncLightMemory, InvalidInputError, LightMemory, WordLlamaEmbedder

_NOT_CALLS = {"from_config", "close", "format_context"}


def test_every_public_method_has_an_async_form() -> None:
    sync = {n for n, v in vars(LightMemory).items() if not n.startswith("_")} - _NOT_CALLS
    for name in sync:
        form = getattr(AsyncLightMemory, name, None)
        assert form is not None and inspect.iscoroutinefunction(form), name
        assert inspect.signature(form) == inspect.signature(getattr(LightMemory, name)), name


def test_async_calls_give_the_sync_results(
    store_config: dict[str, Any], conversation: list[dict[str, Any]]
) -> None:
    async def main() -> None:
        async with await AsyncLightMemory.from_config({"store": store_config}) as mem:
            added = await mem.add_memory(conversation, force_extract=True, user_id="maya")
            assert added.entries_created
            found = await mem.retrieve("Which knee hurt after the 10k?", limit=3, user_id="maya")
            assert found == mem.sync.retrieve(
                "Which knee hurt after the 10k?", limit=3, user_id="maya"
            )
            eid = next(r.entry.id for r in found if r.entry.kind == "entry")
            context = await mem.retrieve_context("knee", user_id="maya", cite=True)
            assert context == mem.sync.retrieve_context("knee", user_id="maya", cite=True)
            assert (await mem.get(eid, user_id="maya")).id == eid
            assert await mem.sources(eid, user_id="maya")
            assert (await mem.update(eid, "Maya's left knee hurts", user_id="maya")).version == 2
            assert (await mem.delete(eid, user_id="maya")).id == eid
            assert [e.op for e in await mem.history(eid, user_id="maya")] == [
                "add",
                "update",
                "delete",
            ]
            assert (await mem.restore(eid, 1, user_id="maya")).version == 3
            assert await mem.list_entries(user_id="maya", limit=5)
            assert await mem.construct_update_queue_all_entries(user_id="maya") > 0
            await mem.offline_update_all_entries(0.99, user_id="maya")
            assert (await mem.summarize("30d", user_id="maya")).windows >= 1
            assert (await mem.flush(user_id="maya")).entries_created == ()
            assert (await mem.stats(user_id="maya"))["entries"] > 0
            assert (await mem.purge(user_id="maya")).total > 0
            with pytest.raises(InvalidInputError, match=r"^query: "):
                await mem.retrieve("")

    asyncio.run(main())


class _GatedEmbedder(WordLlamaEmbedder):
    """Blocks in ``embed`` until the test's event loop opens the gate: if the call ran on
    the loop's own thread, the loop could never open it."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate
        self.threads: set[str] = set()

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.floating]:
        self.threads.add(threading.current_thread().name)
        if not self.gate.wait(timeout=30):
            raise TimeoutError("the event loop was blocked")
        return super()._embed(texts)


def test_calls_run_off_the_event_loop_and_close_waits(tmp_path: Path) -> None:
    gate = threading.Event()
    emb = _GatedEmbedder(gate)

    async def main() -> None:
        mem = AsyncLightMemory(
            LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}, embedder=emb)
        )
        add = asyncio.create_task(
            mem.add_memory({"id": "t", "content": "Tea at five."}, force_extract=True)
        )
        await asyncio.sleep(0)  # the loop keeps running while the add waits in its thread
        closing = asyncio.create_task(mem.close())
        await asyncio.sleep(0.05)
        assert not add.done() and not closing.done()  # close waits for the call in flight
        gate.set()
        assert (await add).entries_created
        await closing
        with pytest.raises(InvalidInputError, match="closed"):
            await mem.retrieve("tea")

    asyncio.run(main())
    assert emb.threads and all(t.startswith("lightmem") for t in emb.threads)


def test_workers_is_checked(tmp_path: Path) -> None:
    sync = LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}})
    with pytest.raises(InvalidInputError, match=r"^workers: "):
        AsyncLightMemory(sync, workers=0)
    sync.close()
