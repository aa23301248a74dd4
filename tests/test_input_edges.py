"""Input at the edges (messages, the CLI, REST, MCP, the server's config and environment):
refused with an error naming the field, never silently dropped, changed or replaced."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from conftest import acme_rest
from inprocess_cli import run
from lightmem import ConfigError, InvalidInputError, StoreError
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.extract import OfflineMemoryManager, Segment
from lightmem.pipeline.messages import normalize_messages
from lightmem.server.mcp import create_mcp
from lightmem.server.rest import app_from_env
from lightmem.server.tenancy import SQLiteKeyRegistry, Tenant, TenantPool
from lightmem.store.values import BufferedMessage
from lightmem.types import Message, Scope

#: One conversation whose user says "thanks" twice, at the same place of two batches of 2.
THANKS_TWICE = [
    {"role": "user", "content": "thanks"},
    {"role": "assistant", "content": "Booked the flight to Porto."},
    {"role": "user", "content": "thanks"},
    {"role": "assistant", "content": "Booked the hotel too."},
]


def _mcp_call(tenant: Tenant, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with Client(create_mcp(lambda: tenant)) as c:
            out: dict[str, Any] = (await c.call_tool(tool, args)).structured_content or {}
            return out

    return asyncio.run(main())


# -- finding 5: ids of id-less turns over a conversation sent in several calls ----------------
def test_cli_add_in_batches_keeps_a_turn_repeated_at_the_same_place(tmp_path: Path) -> None:
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(THANKS_TWICE))
    store = str(tmp_path / "m.db")
    first = run("--store", store, "add", str(conv), "--batch", "2", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["messages_added"] == 4
    again = run("--store", store, "add", str(conv), "--batch", "2", "--json")
    assert json.loads(again.stdout)["messages_added"] == 0  # re-adding the file: a no-op


def test_assign_ids_derives_over_the_whole_list_and_keeps_given_ids() -> None:
    from lightmem.pipeline.messages import assign_ids

    extra: list[dict[str, Any]] = [
        {"dia_id": "D1:5", "text": "ok"},
        {"message_id": None, "text": "k"},
    ]
    conv = [*THANKS_TWICE, *extra]
    out = assign_ids(conv)
    whole = normalize_messages(conv)
    assert [m["id"] for m in out[:4]] == [m.id for m in whole[:4]]
    assert out[0]["id"] != out[2]["id"]
    assert out[4] == {"dia_id": "D1:5", "text": "ok"}  # a given id (under an alias) stays
    assert out[5] == {"text": "k", "id": whole[5].id}  # a None alias is not "given twice"
    assert [m.id for m in normalize_messages(out)] == [m.id for m in whole]


# -- finding 6: step feedback, one check for REST and MCP -----------------------------------
BAD_FEEDBACK = [
    ({"kind": "missing", "steps": 5}, "feedback.steps: expected a list of strings, got 5"),
    ({"kind": "missing", "steps": {"x": 1}}, "feedback.steps: expected a list of strings"),
    ({"kind": "noise", "detial": "typo"}, "feedback.detial: unknown field"),
    ({"kind": "noise", "node_id": 3}, "feedback.node_id: expected a string"),
]


def test_rest_step_feedback_is_refused_by_field(tmp_path: Path) -> None:
    with acme_rest(tmp_path) as (c, _):
        c.post("/v1/fluxmem/knowledge", json={"docs": ["Printers need badges."]})
        sid = c.post("/v1/fluxmem/tasks", json={"task": "print a report"}).json()["session_id"]
        for feedback, message in BAD_FEEDBACK:
            r = c.post(
                f"/v1/fluxmem/tasks/{sid}/steps", json={"success": False, "feedback": feedback}
            )
            assert r.status_code == 422, r.text
            assert r.json()["error"]["message"].startswith(message), r.text


def test_mcp_step_feedback_is_refused_by_the_same_check(pool: TenantPool) -> None:
    tenant = pool.get("acme")
    sid = _mcp_call(tenant, "start_task", {"task": "print a report"})["session_id"]
    for feedback, message in BAD_FEEDBACK:
        with pytest.raises(ToolError, match=f"^InvalidInputError: {message}"):
            _mcp_call(
                tenant, "record_step", {"session_id": sid, "success": False, "feedback": feedback}
            )
    step = {"session_id": sid, "success": False, "feedback": {"kind": "noise", "steps": ["a"]}}
    assert _mcp_call(tenant, "record_step", step)["session_id"] == sid  # a valid one is taken


# -- finding 7: message normalisation --------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"content": "x", "metadata": {"source": "crm"}, "source": "email"},
            r"messages\[0\]\.source: also given in metadata",
        ),
        ({"content": "x", "metadata": []}, r"messages\[0\]\.metadata: expected a dict, got list"),
        ({"content": "x", "metadata": ""}, r"messages\[0\]\.metadata: expected a dict, got str"),
        ({"content": "x", "metadata": 0}, r"messages\[0\]\.metadata: expected a dict, got int"),
        ({"content": "x", "metadata": False}, r"messages\[0\]\.metadata: expected a dict"),
        ({"content": "x", "metadata": {"role": "user"}}, r"messages\[0\]\.metadata\.role:"),
        ({"content": "x", "role": "   "}, r"messages\[0\]\.role: must not be blank"),
        ({"content": "x", "role": ""}, r"messages\[0\]\.role: must not be blank"),
        ({"content": "x", "role": "Assistant"}, r"messages\[0\]\.role: .*'assistant'"),
        ({"content": "x", "role": "USER"}, r"messages\[0\]\.role: .*'user'"),
        # a scope field would be kept as metadata while the turn is stored unscoped
        ({"content": "x", "user_id": "bob"}, r"messages\[0\]\.user_id: a message has no scope"),
        ({"content": "x", "run_id": "r1"}, r"messages\[0\]\.run_id: .*pass run_id to the add"),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else "",
)
def test_messages_refuse_what_they_would_change(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=f"^{message}"):
        normalize_messages(raw)


def test_roles_are_checked_and_valid_ones_kept_as_given() -> None:
    with pytest.raises(InvalidInputError, match=r"^messages\[1\]\.role: 'Assistant'"):
        normalize_messages([{"content": "a"}, {"content": "b", "role": "Assistant"}])
    msgs = normalize_messages(
        [
            {"content": "a", "role": None, "metadata": None},
            {"content": "b", "role": "assistant", "metadata": {"source": "crm"}, "mood": "ok"},
            {"content": "c", "role": "system"},
            {"content": "d", "role": " user "},
        ]
    )
    assert [m.role for m in msgs] == ["user", "assistant", "system", "user"]
    assert msgs[0].metadata == {} and msgs[1].metadata == {"source": "crm", "mood": "ok"}


def test_an_entry_carries_its_turns_role_whatever_the_turns_metadata() -> None:
    # A Message built directly (not through normalize_messages) with a metadata "role".
    m = Message(id="m1", role="assistant", content="Booked the hotel.", metadata={"role": "x"})
    buffered = BufferedMessage(1, Scope(), m, m.content, "segmented", "t1")
    seg = Segment("t1", Scope(), [buffered], np.ones((1, 4), dtype=np.float32))
    ids = iter(f"e{i}" for i in range(10))
    drafts = OfflineMemoryManager(EntropyCompressor(0.5)).extract([seg], lambda: next(ids))
    assert drafts[0].entry.metadata["role"] == "assistant"


# -- finding 11: the server's own config keys ------------------------------------------------
@pytest.mark.parametrize(
    "key", ["store", "embedding_retriever", "summary_retriever"], ids=lambda k: str(k)
)
def test_tenant_pool_refuses_a_config_naming_a_store(tmp_path: Path, key: str) -> None:
    config = {key: {"path": str(tmp_path / "central.db")}}
    with pytest.raises(ConfigError, match=f"^{key}: the server keeps each tenant's store"):
        TenantPool(tmp_path / "data", config)


def test_cli_servers_refuse_a_store_rather_than_ignore_it(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"store": {"path": str(tmp_path / "central.db")}}))
    # A port taken: a server that wrongly starts fails at once instead of serving.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        data = [*("--data-dir", str(tmp_path / "data")), "--port", str(taken.getsockname()[1])]
        for command in (["serve"], ["mcp", "--transport", "http"]):
            out = run("--config", str(cfg), *command, *data)
            assert out.returncode == 2 and out.stderr.startswith("error: store: "), out.stderr
            out = run("--store", str(tmp_path / "m.db"), *command, *data)
            assert out.returncode == 2 and out.stderr.startswith("error: --store: "), out.stderr
    assert not (tmp_path / "central.db").exists() and not (tmp_path / "m.db").exists()


# -- finding 13: app_from_env ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("LIGHTMEM_MAX_BODY_BYTES", "8MB", "expected a positive integer of bytes, got '8MB'"),
        ("LIGHTMEM_MAX_BODY_BYTES", "0", "expected a positive integer of bytes"),
        ("LIGHTMEM_SERVER_CONFIG", "[1]", "expected a JSON object, got list"),
        ("LIGHTMEM_SERVER_CONFIG", "{", "not valid JSON"),
    ],
)
def test_app_from_env_names_the_bad_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv("LIGHTMEM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"^{name}: {message}"):
        app_from_env()


# -- finding 15: MCP add_memory with messages and the shortcuts ------------------------------
@pytest.mark.parametrize("shortcut", ["user_message", "assistant_message", "timestamp"])
def test_mcp_add_memory_refuses_messages_with_a_shortcut(pool: TenantPool, shortcut: str) -> None:
    args = {"messages": [{"content": "I like tea."}], shortcut: "2024-03-02T09:15"}
    with pytest.raises(ToolError, match=f"^InvalidInputError: {shortcut}: give messages or"):
        _mcp_call(pool.get("acme"), "add_memory", args)
    assert pool.get("acme").memory.stats()["messages"] == 0


# -- finding 18: TenantPool.close ------------------------------------------------------------
def test_tenant_pool_close_closes_every_tenant_then_raises_the_first_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = TenantPool(tmp_path / "data")
    failing, other = pool.get("a"), pool.get("b")
    closed: list[str] = []
    close_other = other.memory.close

    def fail() -> None:
        raise StoreError("store 'a.db': disk I/O error")

    def record() -> None:
        closed.append("b")
        close_other()

    monkeypatch.setattr(failing.memory, "close", fail)
    monkeypatch.setattr(other.memory, "close", record)
    with pytest.raises(StoreError, match="disk I/O error"):
        pool.close()
    assert closed == ["b"]


# -- finding 20: building a TenantPool leaves the process's BLAS threads alone ---------------
def test_a_tenant_pool_does_not_change_the_process_blas_threads(tmp_path: Path) -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        if not before or max(before) < 2:
            pytest.skip("this BLAS runs one thread only")
        pool = TenantPool(tmp_path / "data")
        after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        pool.close()
    assert after == before


# -- smaller notes: key registry errors ------------------------------------------------------
def test_sqlite_key_registry_errors_are_store_errors(tmp_path: Path) -> None:
    keys = SQLiteKeyRegistry(tmp_path / "keys.db")
    keys.close()
    with pytest.raises(StoreError, match=r"^keys: "):
        keys.list()
    with pytest.raises(StoreError, match=r"^keys: "):
        keys.create("acme")
