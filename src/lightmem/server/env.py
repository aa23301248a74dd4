"""The server settings read from the environment: by ``uvicorn --factory``
(:func:`lightmem.server.rest.app_from_env`) and, where no flag gives them, by
``lightmem serve`` and ``lightmem mcp``. A value that cannot be read is a ``ConfigError``
naming its variable."""

from __future__ import annotations

import json
import os
from typing import Any

from lightmem.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_BODY",
    "MAX_BODY_VAR",
    "SERVER_CONFIG_VAR",
    "bytes_from_env",
    "config_from_env",
]

#: The tenants' library config, a JSON object (the ``--config`` file's contents).
SERVER_CONFIG_VAR = "LIGHTMEM_SERVER_CONFIG"
#: The largest request body accepted, in bytes.
MAX_BODY_VAR = "LIGHTMEM_MAX_BODY_BYTES"
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
    text = os.environ.get(name) or ""
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"{name}: expected a positive integer of bytes, got {text!r}")
    return value
