"""The exception hierarchy: every error lightmem raises is a :class:`LightMemError`."""

from __future__ import annotations


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


class BackendError(LightMemError):
    """An embedding model, compressor or remote endpoint failed or is unavailable."""
