"""The published LightMem quick-start runs here, in Chinese and in English.

The example below is the published one (zjunlp/LightMem README, "Initialize LightMem",
"Add Memory", "Offline Update", "Retrieve Memory") quoted verbatim, with only
``pre_compressor``, ``text_embedder`` and ``memory_manager`` swapped for local backends
and the session's messages given in Chinese as issue 19 quotes them (the English run
keeps the README's own sentences).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SESSIONS = {
    "zh": (
        "我最喜欢吃开心果口味的冰淇淋，我的猫叫小橘。",
        "好的，记住了。开心果口味是个很棒的选择。",
        "我的猫叫什么名字？",
        "小橘",
    ),
    "en": (
        "My favorite ice cream flavor is pistachio, and my dog's name is Rex.",
        "Got it. Pistachio is a great choice.",
        "What is the name of my dog?",
        "Rex",
    ),
}


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_published_quickstart_runs_verbatim(
    language: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the example writes ./logs and ./my_long_term_chat
    user_text, assistant_text, question_text, answer = SESSIONS[language]
    # the example's session mixes a date and lists of turns; declared here, so that the
    # quoted code below stays verbatim
    session: dict[str, Any]
    # --- verbatim from the published README (three backends swapped, marked) -----------
    import os
    from datetime import datetime

    from lightmem.memory.lightmem import LightMemory

    LOGS_ROOT = "./logs"
    RUN_TIMESTAMP = datetime.now().strftime("%Y%m%d_%H%M%S")
    RUN_LOG_DIR = os.path.join(LOGS_ROOT, RUN_TIMESTAMP)
    os.makedirs(RUN_LOG_DIR, exist_ok=True)

    # API_KEY, API_BASE_URL, LLM_MODEL, EMBEDDING_MODEL_PATH, LLMLINGUA_MODEL_PATH: only
    # the three swapped backends read them.

    config_dict = {
        "pre_compress": True,
        "pre_compressor": {"model_name": "entropy_compress"},  # swapped: local
        "topic_segment": True,
        "precomp_topic_shared": True,
        "topic_segmenter": {
            "model_name": "llmlingua-2",
        },
        "messages_use": "user_only",
        "metadata_generate": True,
        "text_summary": True,
        "memory_manager": {"model_name": "offline"},  # swapped: local
        "extract_threshold": 0.1,
        "index_strategy": "embedding",
        "text_embedder": {"model_name": "multilingual"},  # swapped: local
        "retrieve_strategy": "embedding",
        "embedding_retriever": {
            "model_name": "qdrant",
            "configs": {
                "collection_name": "my_long_term_chat",
                "embedding_model_dims": 384,
                "path": "./my_long_term_chat",
            },
        },
        "summary_retriever": {
            "model_name": "qdrant",
            "configs": {
                "collection_name": "my_chat_summaries",
                "embedding_model_dims": 384,
                "path": "./my_chat_summaries",
            },
        },
        "update": "offline",
        "logging": {
            "level": "DEBUG",
            "file_enabled": True,
            "log_dir": RUN_LOG_DIR,
        },
    }

    lightmem = LightMemory.from_config(config_dict)

    session = {
        "timestamp": "2025-01-10",
        "turns": [
            [
                {"role": "user", "content": user_text},
                {"role": "assistant", "content": assistant_text},
            ],
        ],
    }

    for turn_messages in session["turns"]:
        timestamp = session["timestamp"]
        for msg in turn_messages:
            msg["time_stamp"] = timestamp

        store_result = lightmem.add_memory(
            messages=turn_messages, force_segment=True, force_extract=True
        )

    lightmem.construct_update_queue_all_entries()
    lightmem.offline_update_all_entries(score_threshold=0.8)

    question = question_text
    related_memories = lightmem.retrieve(question, limit=5)
    print(related_memories)
    # --- end of the published example -------------------------------------------------
    try:
        assert store_result.entries_created
        own = [r for r in related_memories if r.entry.kind == "entry"]
        assert own and own[0].entry.metadata["role"] == "user"  # messages_use: user_only
        assert answer in lightmem.format_context(related_memories)
        assert (tmp_path / "my_long_term_chat" / "my_long_term_chat.db").is_file()
    finally:
        lightmem.close()
