"""Reading one mapping of the published config: typed getters that name the field in every
error, and ``done()`` rejecting every key nobody read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from lightmem.errors import ConfigError

__all__ = ["ConfigSection", "T"]

T = TypeVar("T")


class ConfigSection:
    """A config mapping read key by key; ``done()`` rejects every key nobody read."""

    def __init__(self, raw: object, path: str) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {type(raw).__name__}")
        for key in raw:
            if not isinstance(key, str):
                raise ConfigError(f"{path}: keys must be strings, got {key!r}")
        self._raw = dict(raw)
        self._path = path
        self._seen: set[str] = set()

    def _name(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def _get(self, key: str, default: T, types: type | tuple[type, ...]) -> T:
        self._seen.add(key)
        if key not in self._raw or self._raw[key] is None:
            return default
        value = self._raw[key]
        if isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,)
        ):
            raise ConfigError(f"{self._name(key)}: expected {_tname(types)}, got a boolean")
        if not isinstance(value, types):
            raise ConfigError(
                f"{self._name(key)}: expected {_tname(types)}, got {type(value).__name__}"
            )
        return value  # type: ignore[return-value]

    def get_bool(self, key: str, default: bool) -> bool:
        return self._get(key, default, bool)

    def get_str(self, key: str, default: str) -> str:
        return self._get(key, default, str)

    def get_choice(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.get_str(key, default)
        if value not in allowed:
            raise ConfigError(f"{self._name(key)}: {value!r} is not one of {', '.join(allowed)}")
        return value

    def get_int(self, key: str, default: int, lo: int, hi: int) -> int:
        value = self._get(key, default, int)
        if not lo <= value <= hi:
            raise ConfigError(f"{self._name(key)}: {value} is outside [{lo}, {hi}]")
        return value

    def get_opt_int(self, key: str, lo: int, hi: int) -> int | None:
        value = self._get(key, None, int)
        if value is not None and not lo <= value <= hi:
            raise ConfigError(f"{self._name(key)}: {value} is outside [{lo}, {hi}]")
        return value

    def get_float(self, key: str, default: float, lo: float, hi: float) -> float:
        value = float(self._get(key, default, (int, float)))
        if not lo <= value <= hi:
            raise ConfigError(f"{self._name(key)}: {value} is outside [{lo}, {hi}]")
        return value

    def section(self, key: str) -> ConfigSection:
        self._seen.add(key)
        return ConfigSection(self._raw.get(key), self._name(key))

    def has(self, key: str) -> bool:
        """Whether the user wrote ``key`` in this section."""
        return key in self._raw

    def given(self) -> bool:
        """Whether the user wrote anything in this section."""
        return bool(self._raw)

    def get_number(self, key: str) -> float | None:
        """An optional int or float."""
        value = self._get(key, None, (int, float))
        return None if value is None else float(value)

    def done(self, used: str = "") -> None:
        """Refuse the first key nobody read; ``used`` says what the supported keys are
        supported by, e.g. "by the 'wordllama' embedder", when that depends on a choice."""
        unknown = sorted(set(self._raw) - self._seen)
        if unknown:
            where = f" in {self._path}" if self._path else ""
            by = f" {used}" if used else ""
            raise ConfigError(
                f"{self._name(unknown[0])}: unknown or unsupported config key{where} "
                f"(supported{by}: {', '.join(sorted(self._seen)) or 'none'})"
            )


def _tname(types: type | tuple[type, ...]) -> str:
    ts = types if isinstance(types, tuple) else (types,)
    return " or ".join(t.__name__ for t in ts)
