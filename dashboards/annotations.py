"""Push to Grafana: upsert the dashboards, write rebalance windows and anomalies as annotations.

Through grafana-client (the Grafana HTTP API), idempotently:

- **dashboards** are upserted by uid (``POST /api/dashboards/db`` with ``overwrite``); a
  dashboard whose stored JSON already equals the generated one is left alone, so a re-push
  does not even bump its version;
- **annotations** are organisation-wide region annotations (``time`` → ``timeEnd``) tagged
  ``lagscope`` + ``rebalance`` or ``anomaly`` (the dashboards' annotation queries match these
  tags) + ``cluster:…``, ``group:…`` + one key tag ``lagscope-key:<hash of the finding's
  stable key>``. A push first lists the existing lagscope annotations
  (``GET /api/annotations?tags=lagscope``), then creates the missing ones and updates those
  whose time range, text or tags changed (an open window grows until it closes): re-pushing
  never duplicates.

Credentials: ``GRAFANA_URL`` and ``GRAFANA_TOKEN`` (a service-account token), or
``GRAFANA_TOKEN_FILE`` (a file whose first line is the token). The token is never logged and
never part of an error message.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from grafana_client.api import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException

from lagscope.dashboards.grafana_gen import ANNOTATION_TAG, DEFAULT_APP_URL
from lagscope.errors import ConfigError, LagscopeError
from lagscope.results import current_events, current_rows

__all__ = [
    "Annotation",
    "GrafanaPushError",
    "GrafanaPusher",
    "PushReport",
    "annotations_from_results",
    "anomaly_annotations",
    "grafana_from_env",
    "key_tag",
    "rebalance_annotations",
]

log = logging.getLogger(__name__)

KEY_TAG_PREFIX = "lagscope-key:"
#: how many existing annotations one listing asks for (Grafana's default is 100)
_LIST_LIMIT = 100_000


class GrafanaPushError(LagscopeError):
    """Grafana refused or could not be reached while pushing (the message never holds the token)."""


def key_tag(key: str) -> str:
    """The tag that identifies an annotation across pushes: a hash of the finding's stable key."""
    return KEY_TAG_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Annotation:
    """One region annotation (times in epoch milliseconds). ``update_only``: it retracts what an
    earlier push showed (a withdrawn anomaly): it updates an existing annotation, never creates one."""

    key: str
    time_ms: int
    time_end_ms: int
    text: str
    tags: tuple[str, ...] = field(default_factory=tuple)
    update_only: bool = False

    @property
    def all_tags(self) -> list[str]:
        return [*self.tags, key_tag(self.key)]


def _ms(ts: dt.datetime) -> int:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=dt.UTC)
    return int(ts.timestamp() * 1000)


def _link(app_url: str, page: str, params: Mapping[str, Any], start_ms: int, end_ms: int) -> str:
    margin = 15 * 60 * 1000
    query = {k: str(v) for k, v in params.items() if v is not None}
    query.update({"from": str(start_ms - margin), "to": str(end_ms + margin), "page": page})
    return f"{app_url.rstrip('/')}/?{urlencode(query)}"


def rebalance_annotations(rows: Iterable[Mapping[str, Any]], now: dt.datetime,
                          app_url: str = DEFAULT_APP_URL) -> list[Annotation]:
    out = []
    for r in current_rows(rows, lambda r: (r["cluster"], r["group_id"], _ms(r["start_ts"]))):
        key = f"rebalance|{r['cluster']}|{r['group_id']}|{_ms(r['start_ts'])}"
        start = _ms(r["start_ts"])
        end = _ms(r["end_ts"]) if r.get("end_ts") is not None else _ms(now)
        cause = r.get("cause") or "unknown"
        if r.get("end_ts") is not None:
            text = f"Rebalance of {r['group_id']} ({cause}): {r.get('duration_s') or 0:.1f} s"
            if r.get("bound_s"):
                text += f", bound {r['bound_s']:.1f} s ({(r.get('observed_over_bound') or 0):.2f}x)"
        else:
            text = f"Rebalance of {r['group_id']} ({cause}) in progress"
        if r.get("partitions_moved") is not None:
            text += f"; {r['partitions_moved']} partitions moved"
        # ``rebalance=<start ms>`` names the window exactly (docs/ui.md, the URL contract)
        link = _link(app_url, "rebalance", {"cluster": r["cluster"], "group": r["group_id"], "rebalance": start},
                     start, end)
        text += f' <a href="{link}">open in lagscope</a>'
        out.append(Annotation(key, start, end, text, (ANNOTATION_TAG, "rebalance", f"cluster:{r['cluster']}",
                                                      f"group:{r['group_id']}", f"cause:{cause}")))
    return out


def anomaly_annotations(rows: Iterable[Mapping[str, Any]], now: dt.datetime,
                        app_url: str = DEFAULT_APP_URL) -> list[Annotation]:
    """One annotation per anomaly; a withdrawn one's (a later step found it is no finding: its
    detail says so, tag ``withdrawn``) only updates the annotation an earlier push made of it."""
    out = []
    for r in current_rows(rows, lambda r: (r["cluster"], r["key"]), withdrawn=True):
        gone = bool(r.get("withdrawn"))
        key = str(r["key"])
        start = _ms(r["start_ts"])
        end = _ms(r["end_ts"]) if r.get("end_ts") is not None else _ms(now)
        where = r["group_id"] + (f" {r['topic']}" if r.get("topic") else "") + (
            f"[{r['partition']}]" if r.get("partition") is not None else "")
        text = f"{r['kind']} ({r['severity']}) on {where}"
        if r.get("detail"):
            text += f": {r['detail']}"
        if r.get("end_ts") is None:
            text += " (open)"
        page = "partition" if r.get("partition") is not None else "group"
        link = _link(app_url, page, {"cluster": r["cluster"], "group": r["group_id"], "topic": r.get("topic"),
                                     "partition": r.get("partition")}, start, end)
        text += f' <a href="{link}">open in lagscope</a>'
        out.append(Annotation(key, start, end, text, (ANNOTATION_TAG, "anomaly", r["kind"], r["severity"],
                                                      f"cluster:{r['cluster']}", f"group:{r['group_id']}",
                                                      *(("withdrawn",) if gone else ())), update_only=gone))
    return out


def annotations_from_results(root: Path | str, now: dt.datetime, app_url: str = DEFAULT_APP_URL,
                             since: dt.datetime | None = None) -> list[Annotation]:
    """Rebalance windows and anomalies of the result tables under ``root`` (ending after ``since``)."""
    anns = [*rebalance_annotations(current_events(root, "rebalances"), now, app_url),
            *anomaly_annotations(current_events(root, "anomalies", withdrawn=True), now, app_url)]
    if since is not None:
        cut = _ms(since)
        anns = [a for a in anns if a.time_end_ms >= cut]
    return anns


def grafana_from_env(url: str | None = None, *, token: str | None = None, token_file: Path | str | None = None,
                     timeout_s: float = 10.0, env: Mapping[str, str] | None = None) -> GrafanaApi:
    """A GrafanaApi for ``url``/``GRAFANA_URL`` with ``token``/``GRAFANA_TOKEN``/``GRAFANA_TOKEN_FILE``."""
    environ = os.environ if env is None else env
    url = url or environ.get("GRAFANA_URL")
    if not url:
        raise ConfigError("no Grafana URL: set GRAFANA_URL (or pass --url)")
    if not url.startswith(("http://", "https://")):
        raise ConfigError("GRAFANA_URL must start with http:// or https://")
    # what the caller names wins over the environment: token, token_file, GRAFANA_TOKEN, GRAFANA_TOKEN_FILE
    path = token_file if not token else None
    if not token and not path:
        token = environ.get("GRAFANA_TOKEN")
        path = environ.get("GRAFANA_TOKEN_FILE")
    if not token and path:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read the Grafana token file {path}: {exc.strerror}") from exc
        token = lines[0].strip() if lines else ""
        if not token:
            raise ConfigError(f"the Grafana token file {path} is empty")
    if not token:
        raise ConfigError("no Grafana token: set GRAFANA_TOKEN or GRAFANA_TOKEN_FILE")
    api: GrafanaApi = GrafanaApi.from_url(url, credential=token, timeout=timeout_s)
    return api


@dataclass
class PushReport:
    dashboards: dict[str, str] = field(default_factory=dict)  # uid → created | updated | unchanged
    annotations_created: int = 0
    annotations_updated: int = 0
    annotations_unchanged: int = 0


_VOLATILE = ("id", "version")


def _comparable(dashboard: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in dashboard.items() if k not in _VOLATILE}


class GrafanaPusher:
    """Idempotent pushes of dashboards and annotations through one GrafanaApi."""

    def __init__(self, api: GrafanaApi) -> None:
        self.api = api

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GrafanaException as exc:
            raise GrafanaPushError(f"Grafana refused to {what}: HTTP {exc.status_code}: {exc.message}") from exc
        except Exception as exc:  # connection errors come from niquests/urllib3
            if isinstance(exc, LagscopeError):
                raise
            raise GrafanaPushError(f"cannot reach Grafana to {what}: {type(exc).__name__}") from exc

    def _get_dashboard(self, uid: str) -> Any:
        get: Any = self.api.dashboard.get_dashboard
        return get(uid)

    def upsert_dashboard(self, dashboard: Mapping[str, Any], *, folder_uid: str | None = None,
                         message: str = "lagscope dashboards push") -> str:
        """Create or update one dashboard by uid; returns created, updated or unchanged."""
        uid = dashboard.get("uid")
        if not uid:
            raise GrafanaPushError("a dashboard without a uid cannot be upserted")
        try:
            existing = self._get_dashboard(uid)
        except GrafanaClientError as exc:
            if exc.status_code != 404:
                raise GrafanaPushError(f"Grafana refused to read dashboard {uid}: HTTP {exc.status_code}") from exc
            existing = None
        except Exception as exc:
            raise GrafanaPushError(f"cannot reach Grafana to read dashboard {uid}: {type(exc).__name__}") from exc
        if existing and _comparable(existing.get("dashboard", {})) == _comparable(dashboard):
            return "unchanged"
        body: dict[str, Any] = {"dashboard": {**_comparable(dashboard), "id": None}, "overwrite": True,
                                "message": message}
        if folder_uid:
            body["folderUid"] = folder_uid
        self._call(f"save dashboard {uid}", self.api.dashboard.update_dashboard, body)
        return "updated" if existing else "created"

    def existing_annotations(self, start_ms: int, end_ms: int) -> dict[str, dict[str, Any]]:
        """lagscope's annotations overlapping [start, end], by key tag."""
        found = self._call("list annotations", self.api.annotations.find_annotations, time_from=start_ms,
                           time_to=end_ms, tags=[ANNOTATION_TAG], ann_type="annotation", limit=_LIST_LIMIT)
        out: dict[str, dict[str, Any]] = {}
        for a in found or []:
            for tag in a.get("tags") or []:
                if tag.startswith(KEY_TAG_PREFIX):
                    out.setdefault(tag, a)
        return out

    def sync_annotations(self, annotations: Sequence[Annotation], report: PushReport | None = None) -> PushReport:
        """Create the missing annotations (not an ``update_only`` one) and update the changed ones
        (never duplicates)."""
        report = report or PushReport()
        if not annotations:
            return report
        existing = self.existing_annotations(min(a.time_ms for a in annotations),
                                             max(a.time_end_ms for a in annotations))
        for a in annotations:
            tags = a.all_tags
            old = existing.get(key_tag(a.key))
            if old is None and a.update_only:
                continue
            if old is None:
                self._call("create an annotation", self.api.annotations.add_annotation, time_from=a.time_ms,
                           time_to=a.time_end_ms, tags=tags, text=a.text)
                report.annotations_created += 1
            elif (old.get("time"), old.get("timeEnd"), old.get("text"), sorted(old.get("tags") or [])) != (
                    a.time_ms, a.time_end_ms, a.text, sorted(tags)):
                self._call("update an annotation", self.api.annotations.update_annotation, old["id"],
                           time_from=a.time_ms, time_to=a.time_end_ms, tags=tags, text=a.text)
                report.annotations_updated += 1
            else:
                report.annotations_unchanged += 1
        return report

    def push(self, dashboards: Iterable[Mapping[str, Any]], annotations: Sequence[Annotation] = (),
             *, folder_uid: str | None = None) -> PushReport:
        report = PushReport()
        for d in dashboards:
            report.dashboards[str(d["uid"])] = self.upsert_dashboard(d, folder_uid=folder_uid)
        self.sync_annotations(annotations, report)
        log.info("grafana push: dashboards %s; annotations %d created, %d updated, %d unchanged",
                 report.dashboards, report.annotations_created, report.annotations_updated,
                 report.annotations_unchanged)
        return report
