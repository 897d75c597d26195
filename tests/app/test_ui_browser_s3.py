"""``lagscope ui`` on a bucket, in headless Chromium: the synthetic lake put into the real S3 server
fixture (gofakes3 on loopback), served by ``lagscope ui --config`` with ``s3://`` roots; the
browser goes Overview → Group by clicks and opens a Rebalance by a deep link, seeing what the
same lake on disk shows (tests/app/test_ui_browser.py)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import ui_fixture_lake as fx
import yaml
from test_ui_browser import _click, _h1, _wait_for, browser, serving_ui  # noqa: F401  (a fixture)

from lagscope.app.params import to_ms

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def s3_ui(tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> Iterator[str]:
    """``lagscope ui`` over the fixture lake in a bucket, on a free loopback port, stopped by its PID."""
    root = tmp_path_factory.mktemp("ui-browser-s3-lake")
    fx.build(root)
    prefix = f"t/ui-browser-{int(time.time() * 1000)}"
    assert fx.upload(root, s3_server.store(prefix)) > 10
    shutil.rmtree(root)  # the app can read nothing but the bucket
    config = tmp_path_factory.mktemp("ui-s3-config") / "lagscope.yaml"
    config.write_text(yaml.safe_dump({"storage": {"endpoint": s3_server.endpoint, "credentials": "env"}}))
    url = s3_server.url(prefix)
    env = {**os.environ, **{k: v for k, v in s3_server.credentials.items() if v}}
    with serving_ui(["--config", str(config), "--lake", url, "--results", url],
                    tmp_path_factory.mktemp("ui-s3-log") / "streamlit.log", env=env) as base:
        yield base


def test_overview_group_and_a_rebalance_from_the_bucket(s3_ui: str, browser: Any) -> None:  # noqa: F811
    browser.get(s3_ui)
    body = _wait_for(browser, "Groups by status", "orders-svc · ERR", "Recent rebalances", "orders-svc @ 11:00:00")
    assert _h1(browser) == "Overview"
    assert "audit · WARN" in body
    assert "billing · OK" in body
    assert "s3://lagscope/" in body  # the sidebar names the bucket

    _click(browser, "orders-svc · ERR")
    body = _wait_for(browser, "Lag (messages)", "Members now", "Partitions now", charts=3)
    assert _h1(browser) == "Group"
    assert "200.0/s" in body  # produce rate
    assert "120.0/s" in body  # consume rate

    window = {"from": to_ms(fx.START), "to": to_ms(fx.END + dt.timedelta(minutes=1))}
    browser.get(f"{s3_ui}/?" + urlencode({"page": "rebalance", "cluster": "prod", "group": "orders-svc",
                                          "rebalance": to_ms(fx.REBALANCE_START), **window}))
    body = _wait_for(browser, "Messages accumulated per partition", charts=2)
    assert _h1(browser) == "Rebalance"
    assert "session timeout" in body
    assert "Generation 7 → 8 · 2 partitions moved" in body
