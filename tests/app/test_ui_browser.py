"""End to end in headless Chromium: ``lagscope ui`` serves the synthetic lake on loopback; the
browser goes Overview → Group → Rebalance by clicks, then by deep links, and checks what is
shown. The screenshots it takes are docs/screenshots/*.png.

Chromium and chromedriver are Debian's (``scripts/setup.sh --system``); nothing is downloaded.
Screenshots go to a temporary folder, or to ``$LAGSCOPE_SCREENSHOTS_DIR`` when set; the
committed ones were made with ``LAGSCOPE_SCREENSHOTS_DIR=docs/screenshots``.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest
import ui_fixture_lake as fx
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from lagscope.app.params import to_ms
from lagscope.devtools.broker import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LAGSCOPE = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "lagscope"



@contextmanager
def serving_ui(args: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """``lagscope ui <args>`` on a free loopback port (its output into ``log``), yielding its URL
    once healthy, stopped by its PID on leaving."""
    executable = str(LAGSCOPE) if LAGSCOPE.exists() else shutil.which("lagscope")
    assert executable, "the lagscope command is not installed"
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen([executable, "ui", *args, "--port", str(port)], stdout=out,
                                stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                assert proc.poll() is None, f"lagscope ui exited with {proc.returncode}"
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                        if resp.read() == b"ok":
                            break
                except OSError:
                    pass
                assert time.monotonic() < deadline, "lagscope ui did not become healthy in 90 s"
                time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``lagscope ui`` on a free loopback port, stopped by its PID at teardown."""
    root = tmp_path_factory.mktemp("ui-browser-lake")
    fx.build(root)
    # the fixture lake holds its result tables under the same root (not beside it, the default)
    with serving_ui(["--lake", str(root), "--results", str(root)],
                    tmp_path_factory.mktemp("ui-log") / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go (the repository's docs/screenshots only when asked)."""
    folder = os.environ.get("LAGSCOPE_SCREENSHOTS_DIR")
    return Path(folder) if folder else tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1440,2000", "--hide-scrollbars",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _text(driver: WebDriver) -> str:
    text: str = driver.find_element(By.TAG_NAME, "body").text
    return text


def _wait_for(driver: WebDriver, *needles: str, charts: int = 0, timeout: float = 60) -> str:
    """Wait until the script has finished and every needle is on the page (and ``charts`` plots)."""
    def ready(d: WebDriver) -> bool:
        if d.find_elements(By.CSS_SELECTOR, '[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]'):
            return False
        if len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")) < charts:
            return False
        body = _text(d)
        return all(n in body for n in needles)
    try:
        WebDriverWait(driver, timeout, poll_frequency=0.3).until(ready)
    except Exception as exc:
        raise AssertionError(f"waited for {needles} and {charts} charts; page shows:\n{_text(driver)[:3000]}") from exc
    time.sleep(0.8)  # let plotly finish its transition before a screenshot
    return _text(driver)


def _h1(driver: WebDriver) -> str:
    text: str = driver.find_element(By.CSS_SELECTOR, "h1").text
    return text


def _click(driver: WebDriver, label: str) -> None:
    button = driver.find_element(By.XPATH, f"//button[.//p[contains(normalize-space(.), '{label}')]]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
    button.click()


def _shot(driver: WebDriver, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    driver.execute_script("window.scrollTo(0, 0);")
    for scroller in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"], section.main'):
        driver.execute_script("arguments[0].scrollTop = 0;", scroller)
    tmp = folder / f".tmp-{name}.png"
    assert driver.get_screenshot_as_file(str(tmp))
    os.replace(tmp, folder / f"{name}.png")
    assert (folder / f"{name}.png").stat().st_size > 20_000  # a rendered page, not a blank one


def test_overview_to_group_to_rebalance_by_clicks(server: str, browser: WebDriver, shots: Path) -> None:
    browser.get(server)
    # tables are drawn on a canvas: their text is not in the DOM, the buttons' is
    body = _wait_for(browser, "Groups by status", "orders-svc · ERR", "Recent rebalances", "orders-svc @ 11:00:00")
    assert _h1(browser) == "Overview"
    assert "audit · WARN" in body
    assert "billing · OK" in body
    _shot(browser, shots, "overview")

    _click(browser, "orders-svc · ERR")
    body = _wait_for(browser, "Lag (messages)", "Members now", "Partitions now", charts=3)
    assert _h1(browser) == "Group"
    assert "page=group" in browser.current_url
    assert "group=orders-svc" in browser.current_url
    assert "200.0/s" in body  # produce rate
    assert "120.0/s" in body  # consume rate
    assert "never" in body  # the catch-up ETA: consume < produce
    _shot(browser, shots, "group")

    _click(browser, "Rebalance at 11:00:00")
    body = _wait_for(browser, "Ownership before → after", "Processing gap per partition", charts=2)
    assert _h1(browser) == "Rebalance"
    assert f"rebalance={to_ms(fx.REBALANCE_START)}" in browser.current_url
    assert "session timeout" in body  # the cause metric
    assert "4.62× the bound" in body
    _shot(browser, shots, "rebalance")


def test_deep_links(server: str, browser: WebDriver, shots: Path) -> None:
    window = {"from": to_ms(fx.START), "to": to_ms(fx.END + dt.timedelta(minutes=1))}
    browser.get(f"{server}/?" + urlencode({"page": "rebalance", "cluster": "prod", "group": "orders-svc",
                                           "rebalance": to_ms(fx.REBALANCE_START), **window}))
    body = _wait_for(browser, "Messages accumulated per partition", charts=2)
    assert _h1(browser) == "Rebalance"
    assert "session timeout" in body  # the cause metric
    assert "Generation 7 → 8 · 2 partitions moved" in body

    browser.get(f"{server}/?" + urlencode({"page": "partition", "cluster": "prod", "group": "orders-svc",
                                           "topic": "orders", "partition": 1, **window}))
    body = _wait_for(browser, "Messages reprocessed", "Offset changes", charts=1)
    assert _h1(browser) == "Partition"
    assert "5,000" in body  # the rewind
    _shot(browser, shots, "partition")

    browser.get(f"{server}/?" + urlencode({"page": "delivery", "cluster": "prod", "group": "orders-svc",
                                           **window}))
    body = _wait_for(browser, "Messages processed twice", "Commits around a finding", charts=1)
    assert _h1(browser) == "Delivery"
    assert "5,000" in body  # the rewind, processed twice
    assert "1 of 2" in body  # the rewind exact, the seek an estimate (judged by the consumer's pace)
    _shot(browser, shots, "delivery")

    mid = fx.START + dt.timedelta(hours=1)
    browser.get(f"{server}/?" + urlencode({"page": "compare", "cluster": "prod", "group": "orders-svc",
                                           "from": to_ms(mid), "to": to_ms(fx.END), "from2": to_ms(fx.START),
                                           "to2": to_ms(mid)}))
    body = _wait_for(browser, "Window A", "Window B", charts=2)
    assert _h1(browser) == "Compare"
    assert "1 (1m)" in body  # one rebalance of one minute in window A
    _shot(browser, shots, "compare")
