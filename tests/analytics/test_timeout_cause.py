"""Which timeout removed a silent member (lagscope.analytics.groups.timeout_cause): the one its
silence can have been, by the lower bound each puts on it; the nearer in ratio only where both
(or neither) can."""

from __future__ import annotations

import pytest

from lagscope.analytics.groups import timeout_cause


@pytest.mark.parametrize(("gap", "session", "rebal", "cause", "why"), [
    # the usual settings: session 45 s, max.poll.interval 300 s, heartbeat 3 s, network 1 s
    (46.0, 45.0, 300.0, "session_timeout", "a crash: removed a session after its last heartbeat"),
    (42.0, 45.0, 300.0, "session_timeout", "its last heartbeat came up to one interval after its last progress"),
    (301.0, 45.0, 300.0, "max_poll_interval", "both can: nearer 300 s than 45 s"),
    # a session longer than the poll interval (the simulator's poll-timeout scenarios: 6 s, 3 s)
    (4.2, 6.0, 3.0, "max_poll_interval", "nearer 6 s in ratio, but a session timeout needs ≥ 6 − 0.5 − 0.5 s"),
    (5.8, 6.0, 3.0, "session_timeout", "both can: nearer 6 s"),
    # neither can (the silence was measured short): the nearer in ratio, as before
    (1.0, 45.0, 300.0, "session_timeout", "neither can: nearer 45 s"),
])
def test_the_timeout_the_silence_can_have_been(gap: float, session: float, rebal: float, cause: str,
                                               why: str) -> None:
    heartbeat = 3.0 if session > 10 else 0.5
    network = 1.0 if session > 10 else 0.5
    assert timeout_cause(gap, session, rebal, heartbeat, network) == cause, why
