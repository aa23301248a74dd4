"""The server settings read from the environment: by ``uvicorn --factory``
(:func:`lightmem.server.rest.app_from_env`) and, where no flag gives them, by
``lightmem serve`` and ``lightmem mcp``. A value that cannot be read is a ``ConfigError``
naming its variable."""

from __future__ import annotations

import json
import os
from typing import Any

from lightmem.config import MAX_STORE_MB
from lightmem.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_BODY_VAR",
    "SERVER_CONFIG_VAR",
    "TENANT_MAX_MB_VAR",
    "bytes_from_env",
    "config_from_env",
    "tenant_max_mb_from_env",
]

#: The tenants' library config, a JSON object (the ``--config`` file's contents).
SERVER_CONFIG_VAR = "LIGHTMEM_SERVER_CONFIG"
#: The largest request body accepted, in bytes.
MAX_BODY_VAR = "LIGHTMEM_MAX_BODY_BYTES"
#: The size limit of each tenant's store in MiB (``store.max_mb``); unset: none.
TENANT_MAX_MB_VAR = "LIGHTMEM_TENANT_MAX_MB"
#: Bytes of body a request may send unless ``--max-body-mb`` or :data:`MAX_BODY_VAR` says.
DEFAULT_MAX_BODY = 8 * 1024 * 1024


def config_from_env(name: str = SERVER_CONFIG_VAR) -> dict[str, Any]:
    """The JSON object in ``name`` (``{}`` when unset or empty)."""
    text = os.environ.get(name) or "{}"
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{name}: not valid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise ConfigError(f"{name}: expected a JSON object, got {type(config).__name__}")
    return config


def bytes_from_env(name: str, default: int) -> int:
    """The positive integer of bytes in ``name`` (``default`` when unset or empty)."""
    value = _positive(name, "bytes")
    return default if value is None else value


def tenant_max_mb_from_env() -> int | None:
    """The tenants' store limit in :data:`TENANT_MAX_MB_VAR` (None when unset or empty)."""
    value = _positive(TENANT_MAX_MB_VAR, "MiB")
    if value is not None and value > MAX_STORE_MB:
        raise ConfigError(f"{TENANT_MAX_MB_VAR}: expected at most {MAX_STORE_MB} MiB, got {value}")
    return value


def _positive(name: str, unit: str) -> int | None:
    text = os.environ.get(name) or ""
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"{name}: expected a positive integer of {unit}, got {text!r}")
    return value
