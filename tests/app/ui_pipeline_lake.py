"""A lake produced by the real pipeline: simulator → collector → analytics.

A scenario (``UI_SCENARIO``: a member of ``readers`` is SIGKILLed at 5 s, so the group
rebalances when its 3 s session expires; ``replay`` rewinds 50 messages per partition at 8 s)
runs against the real Kafka broker while the real collector sweeps every second into a sample
lake (with the ``__consumer_offsets`` tail on, so every commit is recorded), then the real
analytics job (Spark, local) turns the lake into the result tables.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import yaml

from lagscope.analytics.job import run_batch
from lagscope.analytics.session import build_session
from lagscope.collector.loop import Collector
from lagscope.config import AnalyticsConfig, Settings
from lagscope.devtools.sim.model import load_scenario_file
from lagscope.devtools.sim.runner import plan_names, start_scenario

CLUSTER = "sim"
REWIND_AT = 8  # s after the start: replay's rewind (its partitions hold 50 committed by then, jitter and load allowing)

UI_SCENARIO = {
    "name": "ui",
    "description": "A crash (rebalance after the 3 s session) and a rewind, for the drill-down app's tests.",
    "duration": 14,
    "topics": [{"name": "events", "partitions": 4}, {"name": "audit", "partitions": 2}],
    "producers": [{"name": "p", "topic": "events", "rate": 40}, {"name": "q", "topic": "audit", "rate": 20}],
    "groups": [
        {"name": "readers", "topics": ["events"], "members": [
            {"name": "c1", "session_timeout_ms": 3000, "heartbeat_interval_ms": 500},
            {"name": "c2", "session_timeout_ms": 3000, "heartbeat_interval_ms": 500,
             "actions": [{"kind": "crash", "at": 5}]}]},
        {"name": "replay", "topics": ["audit"], "members": [
            {"name": "r1", "session_timeout_ms": 3000, "heartbeat_interval_ms": 500, "auto_commit_interval_ms": 500,
             "actions": [{"kind": "rewind", "at": REWIND_AT, "messages": 50}]}]},
    ],
}


@dataclass(frozen=True)
class PipelineLake:
    lake: Path
    results: Path
    readers: str  # the real group names
    replay: str
    events: str  # the real topic names
    audit: str
    t0: float  # the scenario's start (epoch s): its actions run at t0 + at


def build(bootstrap: str, out: Path) -> PipelineLake:
    scenario_file = out / "ui.yaml"
    scenario_file.write_text(yaml.safe_dump(UI_SCENARIO))
    scenario = load_scenario_file(scenario_file)
    names = plan_names(scenario)
    lake, results = out / "lake", out / "results"
    settings = Settings(
        clusters=[{"name": CLUSTER, "bootstrap_servers": bootstrap,  # type: ignore[list-item]
                   "groups": {"include": [re.escape(names.prefix) + ".*"]},
                   "consumer_offsets_tail": {"enabled": True, "start": "latest"}}],
        collector={"interval_s": 1.0, "lake": str(lake), "request_timeout_ms": 3000},  # type: ignore[arg-type]
        metrics={"enabled": False})  # type: ignore[arg-type]
    collector = Collector(settings)
    stop = threading.Event()
    thread = threading.Thread(target=collector.run, args=(stop,), daemon=True, name="ui-collector")
    thread.start()
    first_day = dt.datetime.now(dt.UTC).date()
    try:
        run = start_scenario(scenario, bootstrap, out / "run", run_id=names.run_id)
        run.wait(timeout=150)
        stop.wait(3)  # a few sweeps after the end
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive(), "the collector did not stop"

    from pyspark.sql import SparkSession
    existing = SparkSession.getActiveSession()
    spark = existing or build_session("local[2]", app_name="lagscope-ui-tests", shuffle_partitions=2,
                                      driver_memory="3g")
    try:
        run_batch(spark, lake, results, since=first_day, until=dt.datetime.now(dt.UTC).date(),
                  settings=AnalyticsConfig(session_timeout_s=3.0, heartbeat_s=0.5), progress=False)
    finally:
        if existing is None:  # another test's session stays as it was
            spark.stop()
    t0 = float(json.loads((out / "run" / "parts" / "t0.json").read_text())["t0"])
    return PipelineLake(lake, results, names.groups["readers"], names.groups["replay"], names.topics["events"],
                        names.topics["audit"], t0)
