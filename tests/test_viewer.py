"""The memory viewer in a real headless Chromium against a real server on loopback.

Skipped (with the reason shown) when Chromium or its driver is missing, except in CI, where
``.ci/run`` installs them and sets LIGHTMEM_REQUIRE_BROWSER=1 so the test cannot be skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lightmem.fluxmem.types import StepResult
from lightmem.server.rest import create_app
from lightmem.server.tenancy import TenantPool
from lightmem.testing.live_server import LiveServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    if not (CHROMIUM and DRIVER):
        if os.environ.get("LIGHTMEM_REQUIRE_BROWSER") == "1":
            pytest.fail("Chromium and chromedriver are required here (LIGHTMEM_REQUIRE_BROWSER=1)")
        pytest.skip(
            "Chromium/chromedriver not installed (apt-get install chromium chromium-driver)"
        )
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium fetch a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def test_viewer_search_entry_and_graph(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    key = keys.create("acme")
    tenant = pool.get("acme")
    tenant.memory.add_memory(
        [
            {"id": "t1", "speaker_name": "Maya", "content": "My cat Pixel only eats tuna."},
            {
                "id": "t2",
                "speaker_name": "Maya",
                "content": "<img src=x onerror=window.__pwned=1> cat",
            },
        ],
        force_extract=True,
    )
    tenant.agent.add_knowledge(["Feed cats twice a day.", "Printers need badges."])
    tenant.agent.run_task("feed the cat", lambda ctx: StepResult("ok", None, True, ("open tuna",)))
    wait = WebDriverWait(browser, 20)
    with LiveServer(create_app(pool, keys)) as url:
        browser.get(f"{url}/ui/")
        browser.find_element(By.ID, "key").send_keys(key)
        browser.find_element(By.ID, "query").send_keys("what does the cat eat")
        browser.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#results li")))
        items = browser.find_elements(By.CSS_SELECTOR, "#results li")
        texts = [li.text for li in items]
        assert any("tuna" in t for t in texts)
        next(li for li in items if "onerror" in li.text).click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "detail-meta"), "<img src=x"))
        assert browser.find_elements(By.CSS_SELECTOR, "#detail img, #results img") == []
        assert browser.execute_script("return window.__pwned") is None  # no script ran
        next(li for li in items if "tuna" in li.text).click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "detail-sources"), "Pixel"))
        assert "t1 Maya" in browser.find_element(By.ID, "detail-sources").text
        assert "add v1" in browser.find_element(By.ID, "detail-history").text
        shot = tmp_path / "viewer.png"
        browser.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        browser.find_element(By.ID, "tab-graph").click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#graph-svg circle")))
        kinds = {
            c.get_attribute("class").split()[1]
            for c in browser.find_elements(By.CSS_SELECTOR, "#graph-svg circle")
        }
        assert kinds == {"semantic", "episodic"}
        assert browser.find_elements(By.CSS_SELECTOR, "#graph-svg line.ground")
        assert "nodes" in browser.find_element(By.ID, "graph-status").text
        browser.find_element(By.ID, "task").send_keys("feed the cat")
        browser.find_element(By.CSS_SELECTOR, "#subgraph-form button[type=submit]").click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#graph-svg circle.highlight")))
        browser.save_screenshot(str(tmp_path / "graph.png"))
    pool.close()


def test_viewer_tells_a_first_time_user_how_to_get_a_key(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    key = keys.create("acme")
    wait = WebDriverWait(browser, 20)
    with LiveServer(create_app(pool, keys)) as url:
        browser.get(f"{url}/ui/")
        hint = browser.find_element(By.ID, "key-hint")
        assert hint.is_displayed()
        assert "lightmem keys create --tenant" in hint.text
        browser.find_element(By.ID, "key").send_keys(key)
        wait.until(ec.invisibility_of_element_located((By.ID, "key-hint")))
        browser.find_element(By.ID, "query").send_keys("anything at all")
        browser.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "No memory matches"))
        browser.find_element(By.ID, "key").clear()
        browser.find_element(By.ID, "key").send_keys("lm_wrong_key")
        browser.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "401"))
        assert browser.find_element(By.ID, "key-hint").is_displayed()  # a bad key: the hint again
    pool.close()


def test_viewer_finds_a_memory_added_one_call_earlier(browser: Any, tmp_path: Path) -> None:
    import httpx
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    key = keys.create("acme")
    wait = WebDriverWait(browser, 20)
    with LiveServer(create_app(pool, keys)) as url:
        added = httpx.post(
            f"{url}/v1/memories",
            json={"messages": [{"content": "My parrot Kiwi loves mango slices."}]},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert added.status_code == 200, added.text
        browser.get(f"{url}/ui/")
        browser.find_element(By.ID, "key").send_keys(key)
        browser.find_element(By.ID, "query").send_keys("what does the parrot eat")
        browser.find_element(By.CSS_SELECTOR, "#search-form button[type=submit]").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "result"))
        texts = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#results li")]
        assert any("mango" in t for t in texts), texts
    pool.close()
