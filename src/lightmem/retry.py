"""The one retry loop of model calls: exponential backoff with jitter on
:class:`~lightmem.errors.TransientBackendError`, shared by LLM clients and embedders."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TypeVar

from lightmem.errors import BackendError, ConfigError, TransientBackendError
from lightmem.validate import whole_number

__all__ = ["check_attempts", "with_retries"]

T = TypeVar("T")
log = logging.getLogger("lightmem.retry")


def with_retries(
    attempt: Callable[[], T],
    *,
    attempts: int,
    what: str,
    backoff_s: float,
    max_backoff_s: float,
    sleep: Callable[[float], None],
    on_retry: Callable[[TransientBackendError], None] | None = None,
) -> T:
    """``attempt()``, called again after a :class:`TransientBackendError` up to ``attempts``
    times in all, sleeping ``backoff_s`` (doubling, at most ``max_backoff_s``, halved at
    random) between tries. ``on_retry`` sees each failure that is retried. The last failure
    becomes ``BackendError("<what> failed <n> times: ...")``."""
    delay = backoff_s
    for n in range(1, attempts + 1):
        try:
            return attempt()
        except TransientBackendError as exc:
            if n == attempts:
                raise BackendError(f"{what} failed {n} times: {exc}") from exc
            if on_retry is not None:
                on_retry(exc)
            log.warning("%s: attempt %d failed (%s); retrying", what, n, exc)
            sleep(min(max_backoff_s, delay) * (0.5 + random.random() / 2))
            delay *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def check_attempts(value: object, field: str, least: int) -> int:
    """``value`` if it is an integer of at least ``least``, else a ConfigError naming
    ``field`` (:func:`lightmem.validate.whole_number`): a count of tries the caller gave is
    used as given, never clamped."""
    return whole_number(field, value, least, error=ConfigError)
