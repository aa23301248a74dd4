"""The exception hierarchy: every error lightmem raises is a :class:`LightMemError`."""

from __future__ import annotations

__all__ = [
    "BackendError",
    "ConfigError",
    "InvalidInputError",
    "LightMemError",
    "NotFoundError",
    "StoreError",
    "StoreFullError",
    "TransientBackendError",
]


class LightMemError(Exception):
    """Root of all lightmem errors."""


class ConfigError(LightMemError):
    """A configuration value is missing, unknown or invalid; the message names the key."""


class InvalidInputError(LightMemError, ValueError):
    """An argument given to a public method is invalid; the message names the field."""


class NotFoundError(LightMemError, KeyError):
    """The requested memory entry (or message) does not exist in the caller's scope."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class StoreError(LightMemError):
    """The store cannot be opened or written (foreign file, newer schema, I/O failure)."""


class StoreFullError(StoreError):
    """The store holds its size limit (``store.max_mb``): nothing more is added until
    memories are purged (deletes are restorable and keep their text) or the limit raised.
    Reads, deletes, purges and the offline update still work."""


class BackendError(LightMemError):
    """An embedding model, compressor or remote endpoint failed or is unavailable."""


class TransientBackendError(BackendError):
    """A backend failure worth retrying (HTTP 429 or 5xx, a timeout, a lost connection).

    A model client's private hook raises it (``LLMClient._chat``, ``Embedder._embed``); the
    public call retries, accounting each attempt, and raises a plain :class:`BackendError`
    once its attempts run out."""
