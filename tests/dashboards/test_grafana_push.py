"""``lagscope dashboards push`` against a local HTTP server that speaks the few Grafana API calls used.

The fake Grafana implements: GET /api/dashboards/uid/<uid>, POST /api/dashboards/db (upsert by
uid, version bump), GET /api/annotations (tags AND-matched, from/to overlap, limit), POST
/api/annotations, PUT /api/annotations/<id>; every call needs ``Authorization: Bearer <token>``.
It records every request, so the tests can assert upserts and idempotency.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from helpers.results_synthetic import Synthetic, anomaly, rebalance
from typer.testing import CliRunner

from lagscope.cli import app
from lagscope.dashboards import grafana_gen
from lagscope.dashboards.annotations import (
    GrafanaPusher,
    GrafanaPushError,
    annotations_from_results,
    grafana_from_env,
)
from lagscope.errors import ConfigError
from lagscope.lake import write_rows
from lagscope.schema import ANOMALIES, REBALANCES

TOKEN = "glsa_test-token-never-logged-0123456789"


@dataclass
class FakeGrafana:
    token: str
    dashboards: dict[str, dict[str, Any]] = field(default_factory=dict)
    annotations: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_id: int = 1

    def handle(self, method: str, url: str, body: Any) -> tuple[int, Any]:
        parts = urlsplit(url)
        path, query = parts.path, parse_qs(parts.query)
        if method == "GET" and path.startswith("/api/dashboards/uid/"):
            uid = path.rsplit("/", 1)[1]
            if uid not in self.dashboards:
                return 404, {"message": "Dashboard not found"}
            return 200, {"dashboard": self.dashboards[uid], "meta": {"slug": uid}}
        if method == "POST" and path == "/api/dashboards/db":
            d = dict(body["dashboard"])
            old = self.dashboards.get(d["uid"])
            if old is not None and not body.get("overwrite"):
                return 412, {"message": "version-mismatch"}
            d["id"] = old["id"] if old else len(self.dashboards) + 1
            d["version"] = (old["version"] + 1) if old else 1
            self.dashboards[d["uid"]] = d
            return 200, {"status": "success", "uid": d["uid"], "version": d["version"]}
        if method == "GET" and path == "/api/annotations":
            tags = query.get("tags", [])
            start = int(query.get("from", ["0"])[0])
            end = int(query.get("to", [str(2**62)])[0])
            limit = int(query.get("limit", ["100"])[0])
            found = [a for a in self.annotations.values()
                     if all(t in a["tags"] for t in tags) and a["timeEnd"] >= start and a["time"] <= end]
            return 200, found[:limit]
        if method == "POST" and path == "/api/annotations":
            ann = {"id": self.next_id, "time": body["time"], "timeEnd": body.get("timeEnd") or body["time"],
                   "tags": list(body.get("tags") or []), "text": body.get("text", "")}
            self.annotations[self.next_id] = ann
            self.next_id += 1
            return 200, {"message": "Annotation added", "id": ann["id"]}
        if method == "PUT" and path.startswith("/api/annotations/"):
            aid = int(path.rsplit("/", 1)[1])
            if aid not in self.annotations:
                return 404, {"message": "not found"}
            self.annotations[aid].update({"time": body["time"], "timeEnd": body["timeEnd"], "tags": body["tags"],
                                          "text": body["text"]})
            return 200, {"message": "Annotation updated"}
        return 404, {"message": f"not implemented: {method} {path}"}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with fake.lock:
                    fake.requests.append((method, self.path))
                    if self.headers.get("Authorization") != f"Bearer {fake.token}":
                        status, payload = 401, {"message": "Unauthorized"}
                    else:
                        status, payload = fake.handle(method, self.path, json.loads(raw) if raw else None)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

        return Handler


@pytest.fixture
def grafana() -> Iterator[tuple[FakeGrafana, str]]:
    fake = FakeGrafana(TOKEN)
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def _boards() -> list[dict[str, Any]]:
    return [grafana_gen.dashboard_json(m) for m in grafana_gen.build_all().values()]


def _writes(fake: FakeGrafana) -> list[tuple[str, str]]:
    return [(m, p.split("?")[0]) for m, p in fake.requests if m != "GET"]


def test_push_upserts_and_is_idempotent(grafana: tuple[FakeGrafana, str], synthetic: Synthetic,
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fake, url = grafana
    pusher = GrafanaPusher(grafana_from_env(url, token=TOKEN))
    anns = annotations_from_results(synthetic.root, synthetic.now)
    # 3 rebalance windows + 2 anomalies, each a region
    assert len(anns) == 5
    assert all(a.time_end_ms >= a.time_ms for a in anns)

    first = pusher.push(_boards(), anns)
    assert set(first.dashboards.values()) == {"created"}
    assert set(fake.dashboards) == set(grafana_gen.build_all())
    assert (first.annotations_created, first.annotations_updated) == (5, 0)
    assert len(fake.annotations) == 5
    writes_after_first = len(_writes(fake))

    # the same push again: nothing is written, nothing duplicated, no version bumped
    again = pusher.push(_boards(), annotations_from_results(synthetic.root, synthetic.now))
    assert set(again.dashboards.values()) == {"unchanged"}
    assert again.annotations_unchanged == 5
    assert len(_writes(fake)) == writes_after_first
    assert len(fake.annotations) == 5
    assert {d["version"] for d in fake.dashboards.values()} == {1}

    # later: the open rebalance closes and the stall ends (written again, closed, same identity);
    # a new anomaly appears. Two updates, one creation, still no duplicate.
    later = synthetic.now + dt.timedelta(minutes=2)
    open_start = synthetic.now - dt.timedelta(seconds=20)
    write_rows(synthetic.root, REBALANCES, synthetic.cluster, [rebalance(synthetic.group, open_start, 30.0, "leave",
                                                                                     as_of=later)])
    stall_start = synthetic.now - dt.timedelta(minutes=20)
    write_rows(synthetic.root, ANOMALIES, synthetic.cluster, [
        anomaly(synthetic.cluster, synthetic.group, synthetic.topic, "stall", stall_start, later, "critical",
                as_of=later),
        anomaly(synthetic.cluster, synthetic.group, synthetic.topic, "rewind", later, None, "warning", 1,
                as_of=later)])
    third = pusher.push(_boards(), annotations_from_results(synthetic.root, later))
    assert (third.annotations_created, third.annotations_updated) == (1, 2)
    assert len(fake.annotations) == 6
    closed = [a for a in fake.annotations.values() if "rebalance" in a["tags"] and "cause:leave" in a["tags"]]
    assert len(closed) == 1
    assert closed[0]["timeEnd"] - closed[0]["time"] == 30_000
    assert "in progress" not in closed[0]["text"]

    # a changed dashboard is updated in place (same uid, version 2)
    boards = _boards()
    boards[0]["description"] = "changed"
    changed = pusher.push(boards)
    assert list(changed.dashboards.values()).count("updated") == 1
    assert fake.dashboards[boards[0]["uid"]]["version"] == 2
    # the token never reached a log line
    assert TOKEN not in caplog.text


def test_annotations_carry_tags_the_dashboards_query(grafana: tuple[FakeGrafana, str], synthetic: Synthetic) -> None:
    fake, url = grafana
    GrafanaPusher(grafana_from_env(url, token=TOKEN)).push([], annotations_from_results(synthetic.root,
                                                                                        synthetic.now))
    for board in _boards():
        queries = [a["target"]["tags"] for a in board["annotations"]["list"]
                   if a.get("target", {}).get("type") == "tags"]
        assert sorted(map(tuple, queries)) == [("lagscope", "anomaly"), ("lagscope", "rebalance")]
        for tags in queries:
            # each annotation query of each dashboard finds its annotations
            assert any(all(t in a["tags"] for t in tags) for a in fake.annotations.values())
    texts = " ".join(a["text"] for a in fake.annotations.values())
    assert "http://localhost:8501/?cluster=prod&group=orders-svc" in texts


def test_wrong_token_is_a_clear_error_without_the_token(grafana: tuple[FakeGrafana, str]) -> None:
    _, url = grafana
    wrong = "glsa_wrong-token-value"
    with pytest.raises(GrafanaPushError, match="HTTP 401") as info:
        GrafanaPusher(grafana_from_env(url, token=wrong)).push(_boards())
    assert wrong not in str(info.value)


def test_unreachable_grafana_is_a_clear_error() -> None:
    with pytest.raises(GrafanaPushError, match="cannot reach Grafana"):
        GrafanaPusher(grafana_from_env("http://127.0.0.1:9", token=TOKEN, timeout_s=2)).push(_boards())


@pytest.mark.parametrize(("env", "message"), [
    # no URL at all
    ({"GRAFANA_TOKEN": "t"}, "GRAFANA_URL"),
    # a URL without a scheme
    ({"GRAFANA_URL": "grafana:3000", "GRAFANA_TOKEN": "t"}, "http"),
    # no token and no token file
    ({"GRAFANA_URL": "http://g:3000"}, "GRAFANA_TOKEN"),
    # a token file that does not exist
    ({"GRAFANA_URL": "http://g:3000", "GRAFANA_TOKEN_FILE": "/nonexistent/token"}, "token file"),
])
def test_credentials_from_environment(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        grafana_from_env(env=env)


def test_cli_push_with_token_file(grafana: tuple[FakeGrafana, str], synthetic: Synthetic, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fake, url = grafana
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.delenv("GRAFANA_TOKEN", raising=False)
    monkeypatch.setenv("GRAFANA_URL", url)
    monkeypatch.setenv("GRAFANA_TOKEN_FILE", str(token_file))
    out = tmp_path / "grafana"
    runner = CliRunner()
    gen = runner.invoke(app, ["dashboards", "generate", "--out", str(out)])
    assert gen.exit_code == 0, gen.output
    for _ in range(2):
        result = runner.invoke(app, ["dashboards", "push", "--folder", str(out), "--results", str(synthetic.root)])
        assert result.exit_code == 0, result.output
        assert TOKEN not in result.output
    # the second push created nothing; the open rebalance and the open stall grew to "now"
    assert "annotations: 0 created, 2 updated, 3 unchanged" in result.output
    assert len(fake.dashboards) == 4
    assert len(fake.annotations) == 5


def test_token_file_option_wins_over_the_environment(grafana: tuple[FakeGrafana, str], tmp_path: Path) -> None:
    # `dashboards push --token-file F` is what the operator asked for: a GRAFANA_TOKEN left in the
    # environment (an old, revoked token) must not be sent instead of it
    fake, url = grafana
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    api = grafana_from_env(url, token_file=token_file, env={"GRAFANA_TOKEN": "glsa_stale-token"})
    report = GrafanaPusher(api).push(_boards())
    assert set(report.dashboards.values()) == {"created"}
    assert len(fake.dashboards) == 4


def test_rebalance_annotation_links_open_that_window(synthetic: Synthetic) -> None:
    # the app reads the link through its URL contract (docs/ui.md): the Rebalance page, the
    # window named by its start in epoch ms, a time range around the window
    from lagscope.app.params import parse_selection

    anns = [a for a in annotations_from_results(synthetic.root, synthetic.now) if "rebalance" in a.tags]
    assert len(anns) == 3
    for a in anns:
        href = a.text.split('href="', 1)[1].split('"', 1)[0]
        query = {k: v[-1] for k, v in parse_qs(urlsplit(href).query).items()}
        sel = parse_selection(query)
        assert (sel.page, sel.cluster, sel.group) == ("rebalance", "prod", "orders-svc")
        assert sel.rebalance_ms == a.time_ms
        assert sel.start_ms is not None
        assert sel.end_ms is not None
        assert sel.start_ms < a.time_ms <= a.time_end_ms < sel.end_ms


def test_annotations_come_from_published_steps_only(tmp_path: Path) -> None:
    # a step in place whose checkpoint has not moved makes no annotation; once it has, its
    # window is one annotation however many steps wrote it (open, then closed)
    from helpers.results_steps import publish_step

    now = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
    minute = dt.timedelta(minutes=1)
    start = now - 3 * minute + dt.timedelta(seconds=10)
    publish_step(tmp_path, "prod", now - 3 * minute, now - 2 * minute,
                 {"rebalances": [rebalance("g", start, None, "join", as_of=now - 2 * minute)]})
    publish_step(tmp_path, "prod", now - 2 * minute, now - minute,
                 {"rebalances": [rebalance("g", start, 20.0, "join", as_of=now - minute)]}, checkpoint=False)
    (open_,) = annotations_from_results(tmp_path, now)
    assert "in progress" in open_.text
    publish_step(tmp_path, "prod", now - 2 * minute, now - minute,
                 {"rebalances": [rebalance("g", start, 20.0, "join", as_of=now - minute)]})
    (closed,) = annotations_from_results(tmp_path, now)
    assert closed.key == open_.key
    assert "20.0 s" in closed.text


def test_a_withdrawn_anomaly_updates_its_annotation_and_creates_none(grafana: tuple[FakeGrafana, str],
                                                                     tmp_path: Path) -> None:
    # a stall pushed while open, then withdrawn by a later step: its annotation is updated (the
    # withdrawal's detail and end, tag "withdrawn"), not left "(open)"; a stall published and
    # withdrawn between two pushes makes no annotation at all
    from helpers.results_steps import publish_step

    fake, url = grafana
    pusher = GrafanaPusher(grafana_from_env(url, token=TOKEN))
    now = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
    minute = dt.timedelta(minutes=1)
    start = now - 3 * minute + dt.timedelta(seconds=10)
    pushed, unseen = (anomaly("", "g", "t", "stall", start, None, "warning", p, as_of=now - 2 * minute)
                      for p in (0, 1))
    publish_step(tmp_path, "prod", now - 3 * minute, now - 2 * minute, {"anomalies": [pushed]})
    pusher.push([], annotations_from_results(tmp_path, now))
    ((first_id, first),) = fake.annotations.items()
    assert first["text"].startswith("stall (warning) on g t[0]: stall on g (open)")
    publish_step(tmp_path, "prod", now - 2 * minute, now - minute, {"anomalies": [unseen]})
    end = start + dt.timedelta(seconds=50)
    publish_step(tmp_path, "prod", now - minute, now, {"anomalies": [
        {**r, "end_ts": end, "detail": "withdrawn: a rebalance explains it", "withdrawn": True, "as_of_ts": now}
        for r in (pushed, unseen)]})
    report = pusher.push([], annotations_from_results(tmp_path, now))
    assert (report.annotations_created, report.annotations_updated) == (0, 1)
    ((got_id, got),) = fake.annotations.items()
    assert got_id == first_id
    assert got["text"].startswith("stall (warning) on g t[0]: withdrawn: a rebalance explains it")
    assert "withdrawn" in got["tags"]
    assert got["timeEnd"] == int(end.timestamp() * 1000)
