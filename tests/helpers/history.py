"""A small synthetic sample lake with a known story, for tests that run the whole pipeline.

``make_history`` writes sweeps 15 s apart (offsets, members and sweeps tables) for two
groups on one partition of topic ``orders``: ``stuck`` never commits while the topic grows
150 messages per sweep (a stall, lag growing), ``healthy`` stays 20 messages behind.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from lagscope.lake import write_rows
from lagscope.schema import MEMBERS, OFFSETS, SWEEPS

__all__ = ["make_history"]


def make_history(root: Path, cluster: str, start: dt.datetime, *, minutes: int = 6) -> None:
    for i in range(minutes * 4):
        ts = start + dt.timedelta(seconds=15 * i)
        offsets, members = [], []
        for group, moving in (("stuck", False), ("healthy", True)):
            end = 1000 + 150 * i
            committed = end - 20 if moving else 1000
            offsets.append({"sweep_ts": ts, "group_id": group, "topic": "orders", "partition": 0,
                            "committed_offset": committed, "log_start_offset": 0, "log_end_offset": end,
                            "last_stable_offset": end, "member_id": f"{group}-m1", "client_id": f"{group}-c",
                            "host": "/10.0.0.1", "group_state": "Stable", "lag": end - committed})
            members.append({"sweep_ts": ts, "group_id": group, "group_state": "Stable", "protocol_type": "consumer",
                            "protocol": "range", "group_protocol": "classic", "generation": 1,
                            "member_id": f"{group}-m1", "client_id": f"{group}-c", "host": "/10.0.0.1",
                            "subscribed_topics": ["orders"], "assignment": [{"topic": "orders", "partition": 0}]})
        write_rows(root, OFFSETS, cluster, offsets)
        write_rows(root, MEMBERS, cluster, members)
        write_rows(root, SWEEPS, cluster, [{"sweep_ts": ts, "duration_ms": 5.0, "ok": True, "groups": 2,
                                            "partitions": 2, "members": 2, "group_errors": 0,
                                            "collector": "history:1"}])
