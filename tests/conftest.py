from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory, SQLiteStore, WordLlamaEmbedder

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


@pytest.fixture
def conversation() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((FIXTURES / "conversation.json").read_text())
    return data


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "mem.db"


@pytest.fixture
def memory(store_path: Path) -> Iterator[LightMemory]:
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as mem:
        yield mem


@pytest.fixture
def filled(memory: LightMemory, conversation: list[dict[str, Any]]) -> LightMemory:
    memory.add_memory(conversation, force_extract=True, user_id="maya")
    return memory


@pytest.fixture
def mem_store() -> Iterator[SQLiteStore]:
    s = SQLiteStore(":memory:")
    yield s
    s.close()


# Hypothesis: quick by default; `HYPOTHESIS_PROFILE=long make test` (or pytest) runs the
# 10,000-examples-per-entry-point campaign.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "default", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
