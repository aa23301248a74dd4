"""What a first-time user met (the newuser review): the published config block taken as
written, a re-embedded store that opens with its new embedder, an embedder whose package is
missing refused before anything is written, provisional entries flushed over REST and MCP,
and the viewer reading across users."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory
from lightmem.config import parse_config
from lightmem.errors import ConfigError


# -- #1: the published block carries both compressors' sections ---------------------------
def _published(model_name: str) -> dict[str, Any]:
    """The README's pre-compressor block: both compressors' sections, one of them chosen."""
    return {
        "pre_compress": True,
        "pre_compressor": {
            "model_name": model_name,
            "configs": {
                "compress_config": {"rate": 0.3},
                "entropy_config": {"compress_rate": 0.4},
                "llmlingua_config": {"model_name": "/path/to/llmlingua-2", "device_map": "cpu"},
            },
        },
    }


def test_the_unused_compressor_section_is_accepted_checked_and_noted(tmp_path: Path) -> None:
    config = {**_published("entropy"), "store": {"path": str(tmp_path / "a.db")}}
    with LightMemory.from_config(config) as mem:
        assert mem.settings.compressor == "entropy" and mem.settings.compress_rate == 0.4
        assert any(
            n.startswith("pre_compressor.configs.llmlingua_config: checked but not used")
            for n in mem.settings.notes
        ), mem.settings.notes
    # the other way round (parsed only: building LLMLingua-2 needs its model)
    s = parse_config(_published("llmlingua-2"))
    assert s.compressor == "llmlingua-2" and s.llmlingua_path == "/path/to/llmlingua-2"
    assert any(n.startswith("pre_compressor.configs.entropy_config: checked") for n in s.notes)
    # checked as if it were chosen: a typo or a wrong type is still refused
    typo = _published("entropy")
    typo["pre_compressor"]["configs"]["llmlingua_config"]["devic_map"] = "cpu"
    with pytest.raises(ConfigError, match=r"^pre_compressor\.configs\.llmlingua_config\.devic_map"):
        parse_config(typo)
    wrong = _published("entropy")
    wrong["pre_compressor"]["configs"]["llmlingua_config"]["model_name"] = 5
    with pytest.raises(ConfigError, match=r"llmlingua_config\.model_name: expected str"):
        parse_config(wrong)
