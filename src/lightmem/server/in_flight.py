"""Requests of one tenant served at once, counted per worker (:class:`InFlight`): taken
by the REST API's tenant dependency, by MCP over HTTP (``body_gate.TenantInFlight``) and,
for the bodies a tenant has being read, by the body gate."""

from __future__ import annotations

import threading
from collections import Counter

from lightmem.errors import ConfigError
from lightmem.validate import whole_number

__all__ = ["MAX_IN_FLIGHT", "InFlight", "busy"]

#: Requests of one tenant served at a time (of the 40 threads the handlers share).
MAX_IN_FLIGHT = 8


class InFlight:
    """At most ``limit`` requests of one tenant served at a time. The handlers share one
    thread pool, and a tenant's store serialises its writers: without this, one tenant's
    many slow requests held every thread while they waited for their own store, and every
    other tenant queued behind them (a 15 ms search took 24 s)."""

    def __init__(self, limit: int, name: str = "max_in_flight") -> None:
        """``name``: the setting ``limit`` comes from, named when it is refused."""
        self.limit = whole_number(name, limit, 1, error=ConfigError)
        self._lock = threading.Lock()
        self._serving: Counter[str] = Counter()

    def enter(self, tenant: str) -> bool:
        """Count one more request of ``tenant``; False (nothing counted) if it is at the limit."""
        with self._lock:
            if self._serving[tenant] >= self.limit:
                return False
            self._serving[tenant] += 1
            return True

    def leave(self, tenant: str) -> None:
        with self._lock:
            self._serving[tenant] -= 1
            if not self._serving[tenant]:
                del self._serving[tenant]


def busy(limit: int) -> str:
    """The message of the 429 a tenant at its limit gets."""
    return f"tenant: {limit} requests already in flight; retry"
