"""The status rule table (one group per case, sweeps every 10 s in minute 0, each case evaluated
at its last sweep, t=50, with a Burrow window of 5 entries and 30 s thresholds), shared by the
table-driven status test and the numpy status test."""

from __future__ import annotations

from typing import Any

T = range(0, 51, 10)

# (case, rows (t, committed, end, log_start, owner), expected (burrow_status, status))
CASES: list[tuple[str, list[tuple[Any, ...]], tuple[str, str]]] = [
    # caught up on an active topic: both OK
    ("caught-up", [(t, 10 * t, 10 * t, 0, "m1") for t in T], ("OK", "OK")),
    # 300 → 250 inside the window (Burrow rule 2): both REWIND
    ("rewind", [(t, c, 1000, 0, "m1") for t, c in zip(T, (100, 200, 300, 250, 350, 450), strict=True)],
     ("REWIND", "REWIND")),
    # caught up at 300, rewound to 150 at t=30 and caught up again by t=40 (150 messages processed
    # twice): Burrow's "lag 0 in the window → OK" hides it; lagscope's own status shows the REWIND
    # while it is in the window, lag 0 or not
    ("rewind-caught-up", [(t, c, 300, 0, "m1") for t, c in zip(T, (100, 200, 300, 150, 300, 300), strict=True)],
     ("OK", "REWIND")),
    # commits until t=20, then the consumer is gone (no owner, no entries): Burrow's rule 3
    # (50 − 20 > 20 − 0) and lagscope's (no owner, 30 s without progress with lag): STOP
    ("stopped", [(t, min(t, 20), 1000, 0, "m1" if t <= 20 else None) for t in T], ("STOP", "STOP")),
    # owner assigned, offset frozen with lag for 50 s: STALL for both
    ("stalled", [(t, 100, 1000, 0, "m1") for t in T], ("STALL", "STALL")),
    # far behind and falling further (lag 900 → 1650, never decreasing; lag ≥ 50 s): WARN
    ("falling-behind", [(t, 100 + 5 * t, 1000 + 20 * t, 0, "m1") for t in T], ("WARN", "WARN")),
    # Burrow's false alarm: a steady lag of 3 never decreases → WARN; it is 0.25 s of lag:
    # lagscope says OK
    ("steady-small-lag", [(t, 10 * t + 97, 10 * t + 100, 0, "m1") for t in T], ("WARN", "OK")),
    # idle topic, caught up, consumer gone: Burrow OK (lag 0); lagscope IDLE, not an alarm
    ("idle", [(t, 500, 500, 0, None) for t in T], ("OK", "IDLE")),
    # committed below the log start while nobody reads the partition (no owner, no commit for
    # 30 s): lagscope ERR (messages lost); Burrow sees a consumer that stopped
    ("retention", [(t, 100, 1000, 200, None) for t in T], ("STOP", "ERR")),
    # the same with its owner still assigned: it may hold the deleted records, not yet a loss;
    # lagscope says what it sees, a stall
    ("retention-owned", [(t, 100, 1000, 200, "m1") for t in T], ("STALL", "STALL")),
    # a consumer reading at the retention's edge (2 below the log start, a steady lag of 100):
    # Burrow WARN (the lag never decreases); lagscope WARN (it may hold them: not ERR)
    ("retention-edge", [(t, 100 + 10 * t, 200 + 10 * t, 102 + 10 * t, "m1") for t in T], ("WARN", "WARN")),
    # committed at the last stable offset 500, the high watermark 1000 beyond an open
    # transaction: Burrow sees a stall; lagscope OK (a read_committed consumer has nothing to
    # read until the transaction ends; the anomalies report no stall either)
    ("open-transaction", [(t, 500, 1000, 0, "m1", 500) for t in T], ("STALL", "OK")),
    # the topic deleted and re-created between t=10 and 20 (the end fell 1100 → 50; the group
    # reset to the new log's start and committed 30 by t=20): Burrow sees 1000 → 30, REWIND;
    # lagscope knows the lower offset is in another log, nothing is read twice: OK
    ("topic-recreated", [(0, 900, 1000, 0, "m1"), (10, 1000, 1100, 0, "m1"), *[
        (t, t + 10, t + 30, 0, "m1") for t in (20, 30, 40, 50)]], ("REWIND", "OK")),
]
