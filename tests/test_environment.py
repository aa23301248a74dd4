"""The suite does not depend on the caller's environment (issue 11, item 9)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import library_vars
from lightmem import LightMemory

POISON = {
    "LIGHTMEM_PG_DSN": "postgresql://nobody@127.0.0.1:9/none",
    "LIGHTMEM_STORE": "/nonexistent/dir/store.db",
    "LIGHTMEM_DATA_DIR": "/nonexistent/dir",
    "LIGHTMEM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
    "LIGHTMEM_LLM_API_KEY": "sk-poison",
    "LIGHTMEM_LLM_MODEL": "poison",
    "OPENAI_API_KEY": "sk-poison",
}


def test_library_variables_are_cleared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert library_vars(os.environ) == []
    monkeypatch.chdir(tmp_path)
    with LightMemory.from_config({}) as mem:  # the offline defaults, not the caller's
        assert mem.stats()["store"].endswith("lightmem.db")


def test_suite_passes_with_library_variables_set() -> None:
    """Run the test above in a child pytest whose environment sets every variable the
    library reads to something that would break it: the autouse fixture must clear them."""
    env = {**os.environ, **POISON}
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_library_variables_are_cleared",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_the_harness_switches_reach_the_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """CI's LIGHTMEM_REQUIRE_* flags (a missing service fails instead of skipping) and the
    LIGHTMEM_TEST_* settings are the harness's, not the library's: they are not cleared."""
    monkeypatch.setenv("LIGHTMEM_REQUIRE_BROWSER", "1")
    monkeypatch.setenv("LIGHTMEM_TEST_PG_DSN", "postgresql://x@127.0.0.1:1/x")
    assert library_vars(os.environ) == []
    monkeypatch.setenv("LIGHTMEM_STORE", "x.db")
    assert library_vars(os.environ) == ["LIGHTMEM_STORE"]
