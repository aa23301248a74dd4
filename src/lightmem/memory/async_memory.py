"""``AsyncLightMemory``: the public API of :class:`LightMemory` as coroutines.

One implementation behind both: every coroutine runs the very same synchronous method in a
worker thread of the instance's own pool, so validation, the writers' lock (one write at a
time per instance, reads alongside), the ledger and the store's transactions are those of
the sync facade. The event loop never blocks on the store, the embedder or an LLM call.

Cancelling an awaiting task does not stop the call already running in its thread (a
database transaction is never cut in half): its effect, say an add, still lands.
:meth:`AsyncLightMemory.close` waits for the calls in flight, then closes the store.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from lightmem.embed.base import Embedder
from lightmem.errors import InvalidInputError
from lightmem.memory.lightmem import LightMemory
from lightmem.pipeline.context_format import format_context

__all__ = ["AsyncLightMemory", "P", "R"]

P = ParamSpec("P")
R = TypeVar("R")


def _threaded(
    method: Callable[Concatenate[LightMemory, P], R],
) -> Callable[Concatenate[AsyncLightMemory, P], Coroutine[Any, Any, R]]:
    """The coroutine form of a :class:`LightMemory` method (same arguments, same result)."""

    async def call(self: AsyncLightMemory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self._run(functools.partial(method, self.sync, *args, **kwargs))

    functools.update_wrapper(call, method)
    call.__qualname__ = f"AsyncLightMemory.{method.__name__}"
    return call


class AsyncLightMemory:
    """Async long-term memory: ``await`` any method of :class:`LightMemory`.

    ``AsyncLightMemory(LightMemory(...))`` wraps an instance (which it then owns and
    closes), ``await AsyncLightMemory.from_config(config)`` builds one off the event loop.
    ``workers``: threads running calls at once (reads run in parallel; writes queue on the
    facade's lock).
    """

    def __init__(self, memory: LightMemory, *, workers: int = 4) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
            raise InvalidInputError("workers: expected an integer in [1, 64]")
        self.sync = memory
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="lightmem")
        self._closing = threading.Event()

    @classmethod
    async def from_config(
        cls,
        config: Mapping[str, Any] | None = None,
        *,
        embedder: Embedder | None = None,
        workers: int = 4,
    ) -> AsyncLightMemory:
        """:meth:`LightMemory.from_config` in a thread (opening a store, loading a model)."""
        memory = await asyncio.to_thread(LightMemory.from_config, config, embedder=embedder)
        try:
            return cls(memory, workers=workers)
        except BaseException:
            memory.close()
            raise

    async def _run(self, fn: Callable[[], R]) -> R:
        if self._closing.is_set():
            raise InvalidInputError("memory: this AsyncLightMemory is closed")
        ctx = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._pool, ctx.run, fn)

    add_memory = _threaded(LightMemory.add_memory)
    flush = _threaded(LightMemory.flush)
    retrieve = _threaded(LightMemory.retrieve)
    retrieve_context = _threaded(LightMemory.retrieve_context)
    get = _threaded(LightMemory.get)
    list_entries = _threaded(LightMemory.list_entries)
    sources = _threaded(LightMemory.sources)
    update = _threaded(LightMemory.update)
    delete = _threaded(LightMemory.delete)
    purge = _threaded(LightMemory.purge)
    history = _threaded(LightMemory.history)
    restore = _threaded(LightMemory.restore)
    construct_update_queue_all_entries = _threaded(LightMemory.construct_update_queue_all_entries)
    offline_update_all_entries = _threaded(LightMemory.offline_update_all_entries)
    offline_update_pending = _threaded(LightMemory.offline_update_pending)
    summarize = _threaded(LightMemory.summarize)
    stats = _threaded(LightMemory.stats)
    format_context = staticmethod(format_context)

    async def close(self) -> None:
        """Refuse new calls, wait for those in flight, then close the store (idempotent)."""
        if self._closing.is_set():
            return
        self._closing.set()
        await asyncio.to_thread(self._pool.shutdown, wait=True)
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncLightMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
